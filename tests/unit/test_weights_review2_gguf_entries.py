"""--weight-path at a directory of .gguf files that also holds an entry named *.gguf which is no file (a
folder, a dangling link: an interrupted download into a huggingface cache leaves those). kt-kernel 0.7.2's
GGUFLoader opens every name ending in .gguf in the directory (utils/loader.py _load_directory:
os.listdir + endswith), so the server fails at load; before, the planner skipped such entries and planned
the directory as servable."""

from __future__ import annotations

import os

import gguf_fixture as fixture
import pytest
from test_gguf_weights import serve

from ktinfra import gguf_files
from ktinfra.planner import PlanInputError


@pytest.mark.parametrize("entry", ["folder", "dangling link"])
def test_a_gguf_name_that_is_no_file_is_refused(tmp_path, entry):
    fixture.qwen3_30b(tmp_path, "Q8_0")
    odd = tmp_path / "Qwen3-30B-A3B-Q8_0-extra.gguf"
    if entry == "folder":
        odd.mkdir()
    else:
        os.symlink(tmp_path / "blobs" / "0123abcd", odd)
    with pytest.raises(PlanInputError, match=r"Qwen3-30B-A3B-Q8_0-extra.gguf is not a file"):
        serve(tmp_path)


def test_the_same_directory_without_it_is_planned(tmp_path):
    """The control: a link to a file (a huggingface cache's snapshot) is a file and is read."""
    blobs = tmp_path / "blobs"
    fixture.qwen3_30b(blobs, "Q8_0")
    snapshot = tmp_path / "snapshot"
    snapshot.mkdir()
    os.symlink(blobs / "Qwen3-30B-A3B-Q8_0.gguf", snapshot / "Qwen3-30B-A3B-Q8_0.gguf")
    assert serve(snapshot)["serve"]["kt_weight_format"] == "gguf:Q8_0"
    assert gguf_files.read_dir(snapshot).models[0].files == ["Qwen3-30B-A3B-Q8_0.gguf"]


@pytest.mark.parametrize("name", ["model.safetensors", "Qwen3-30B-A3B-Q8_0.gguf.part"])
def test_a_weight_path_that_is_some_other_file_is_refused_for_a_gguf_format(tmp_path, name):
    """kt-kernel 0.7.2's GGUFLoader takes a .gguf file or a directory, else raises "Path must be a .gguf file
    or a directory"; the planner took such a file as a directory not downloaded yet and planned it."""
    other = tmp_path / name
    other.write_bytes(b"\0" * 64)
    with pytest.raises(PlanInputError, match=rf"--weight-path {other} is a file, not a .gguf file"):
        serve(other, "GGUF:Q4_K_M")


def test_a_weight_path_not_there_yet_is_still_planned(tmp_path):
    """The control: a directory the download will fill is planned from the quant's bits per weight."""
    assert serve(tmp_path / "later", "GGUF:Q4_K_M")["serve"]["kt_weight_format"] == "gguf:Q4_K_M"


def test_a_split_part_copied_under_another_number_names_both_files(tmp_path):
    """Part 2 copied as part 3 (the set looks whole): the error named the set's first file twice, "(A-00001
    and A-00001): two GGUF models", pointing at neither copy."""
    fixture.qwen3_30b(tmp_path, "Q8_0", parts=3)
    second, third = (tmp_path / f"Qwen3-30B-A3B-Q8_0-0000{n}-of-00003.gguf" for n in (2, 3))
    with open(second, "rb") as source, open(third, "wb") as copy:  # the header, the data left a hole
        copy.write(source.read(gguf_files.read_header(second).data_start))
        copy.truncate(second.stat().st_size)
    with pytest.raises(PlanInputError) as refused:
        serve(tmp_path)
    assert f"twice ({second.name} and {third.name}): two copies of the same experts" in str(refused.value)
