"""The install check's disk need: the wheelhouse is shared (kt_python_env_wheelhouse: every profile, every
earlier pin), so only its wheels these envs install are taken off their download. Before, every file in it
was: a wheelhouse of an older stack as large as the download made 'no problems' on a disk the download then
filled. The wheels here are real zip files with METADATA; their size comes from a sparse prefix (zipfile
reads an archive after leading data), so a wheel can be larger than the disk is free."""

from __future__ import annotations

import io
import shutil
import zipfile
from pathlib import Path

import pytest
from installed_env import record_install

from ktinfra import envcheck

GB = 10**9

# The wheels here are x86_64 glibc builds (manylinux_2_35 at most): the host's platform tags are pinned to an
# x86_64 glibc 2.35 host's, in packaging's order, so that these tests assert the same on any machine (an
# aarch64 or older-glibc one takes none of these wheels).
X86_64_GLIBC_2_35 = ["linux_x86_64", *(f"manylinux_2_{minor}_x86_64" for minor in range(35, 16, -1))]


@pytest.fixture(autouse=True)
def _x86_64_glibc_2_35_host(monkeypatch):
    monkeypatch.setattr(envcheck.tags, "platform_tags", lambda: iter(X86_64_GLIBC_2_35))


def _wheel(wheelhouse: Path, filename: str, requires: list[str], size: int = 0) -> Path:
    dist, version = filename.split("-")[:2]
    metadata = "".join(
        ["Metadata-Version: 2.1\n", f"Name: {dist}\n", f"Version: {version}\n"]
        + [f"Requires-Dist: {r}\n" for r in requires]
    )
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(f"{dist}-{version}.dist-info/METADATA", metadata + "\nDescription\n")
    data = buffer.getvalue()
    path = wheelhouse / filename
    with path.open("wb") as handle:
        handle.truncate(max(0, size - len(data)))  # a hole: no disk used
        handle.seek(0, 2)
        handle.write(data)
    with zipfile.ZipFile(path) as archive:  # a wheel zipfile reads, at the size asked for
        assert archive.namelist() and path.stat().st_size == max(size, len(data))
    return path


def _profile(download: int, packages: list[str]) -> dict:
    return {
        "name": "site",
        "generation": "current",
        "python": ["3.11"],
        "envs": {"inference": {"name": "kt-kernel", "packages": packages, "download_bytes": download}},
    }


def _need(tmp_path: Path, profile: dict) -> tuple[int, list[str]]:
    result = envcheck.check_install(
        profile, ["inference"], root=tmp_path / "envs", wheelhouse=tmp_path / "wh", manager="venv"
    )
    (disk,) = result["disks"]
    return disk["need_bytes"], [p for p in result["problems"] if p.startswith("disk too small")]


def _free(tmp_path: Path) -> int:
    return shutil.disk_usage(tmp_path).free


def test_an_older_stacks_wheels_do_not_count_against_this_download(tmp_path):
    (tmp_path / "wh").mkdir()
    download = _free(tmp_path) + 20 * GB  # more than the disk has
    _wheel(tmp_path / "wh", "torch-2.7.1+cu128-cp311-cp311-linux_x86_64.whl", [], size=download + 20 * GB)
    _wheel(tmp_path / "wh", "kt_kernel-0.4.4-cp311-cp311-linux_x86_64.whl", ["torch==2.7.1"], size=GB)
    need, too_small = _need(tmp_path, _profile(download, ["kt-kernel==0.7.2", "torch==2.9.1"]))
    assert need == download
    assert too_small, "the download does not fit; the old wheels were counted as if they were its"


def test_the_pinned_wheels_and_what_they_require_are_not_downloaded_again(tmp_path):
    wh = tmp_path / "wh"
    wh.mkdir()
    download = _free(tmp_path) + 20 * GB
    _wheel(wh, "kt_kernel-0.7.2-cp311-cp311-manylinux_2_35_x86_64.whl", ["torch==2.9.1", "numpy"], size=GB)
    _wheel(wh, "torch-2.9.1+cu128-cp311-cp311-manylinux_2_28_x86_64.whl", ["nvidia-cudnn-cu12==9.10.2.21"],
           size=download // 2)  # fmt: skip
    _wheel(wh, "nvidia_cudnn_cu12-9.10.2.21-py3-none-manylinux_2_27_x86_64.whl", [], size=download // 4)
    _wheel(
        wh, "nvidia_cudnn_cu12-9.5.1.17-py3-none-manylinux_2_27_x86_64.whl", [], size=download
    )  # torch 2.7's
    _wheel(wh, "numpy-2.1.0-cp311-cp311-manylinux_2_17_x86_64.whl", [], size=GB)
    need, too_small = _need(tmp_path, _profile(download, ["kt-kernel==0.7.2"]))
    assert need == download - (GB + download // 2 + download // 4 + GB)
    assert not too_small


def test_a_dependency_of_an_extra_counts_only_when_the_extra_is_installed(tmp_path):
    wh = tmp_path / "wh"
    wh.mkdir()
    requires = [
        "kt-kernel==0.7.2",
        'llamafactory-kt==0.9.6.dev0; extra == "sft"',
        'sglang-kt==0.7.2; extra == "sglang"',
    ]
    _wheel(wh, "ktransformers-0.7.2-py3-none-manylinux_2_35_x86_64.whl", requires, size=10_000)
    _wheel(wh, "llamafactory_kt-0.9.6.dev0-py3-none-any.whl", [], size=20_000)
    _wheel(wh, "sglang_kt-0.7.2-py3-none-manylinux_2_35_x86_64.whl", [], size=500_000)
    need, _ = _need(tmp_path, _profile(10**9, ["ktransformers[sft]==0.7.2"]))
    assert need == 10**9 - 10_000 - 20_000


def test_an_installed_env_neither_needs_nor_credits_the_wheelhouse(tmp_path):
    wh = tmp_path / "wh"
    wh.mkdir()
    _wheel(wh, "kt_kernel-0.7.2-cp311-cp311-manylinux_2_35_x86_64.whl", [], size=5000)
    record_install(tmp_path / "envs" / "kt-kernel", _profile(10**6, ["kt-kernel==0.7.2"]), "inference")
    need, too_small = _need(tmp_path, _profile(10**6, ["kt-kernel==0.7.2"]))
    assert (need, too_small) == (0, [])
