"""`os.kernel` and `os.arch` of a capture came from the words of `uname -a` alone: the release was its third
word and the machine a known word after it. A host name holding a space (sethostname(2) takes any bytes) or
an empty one shifts the words, so "Linux my host 6.1.0 ..." gave the kernel "host"; busybox's layout with a
machine not in the known list ("... e2k Linux") gave no arch. The capture now also records `uname -s`, `-r`
and `-m`, each on its own, and facts prefer them; a capture of before (uname.txt alone, every capture in
tests/fixtures/hosts) is read as before.

SYNTHETIC: `uname` is a script answering as a host named "my host" with an e2k CPU would; no such host was
captured.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ktinfra.facts import capture as capture_module
from ktinfra.facts import from_capture, parse_files
from ktinfra.facts.system import os_facts

HOSTS = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"
UNAME_A = "Linux my host 6.1.0-e2k #1 SMP Mon Jan 1 00:00:00 UTC 2024 e2k Linux"
FAKE_UNAME = f"""#!/bin/sh
case "$1" in
  -a) echo '{UNAME_A}' ;;
  -s) echo Linux ;;
  -r) echo 6.1.0-e2k ;;
  -m) echo e2k ;;
  *) exit 1 ;;
esac
"""


def test_the_capture_records_each_uname_field_and_facts_prefer_them(tmp_path, monkeypatch):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "uname").write_text(FAKE_UNAME)
    (bindir / "uname").chmod(0o755)
    monkeypatch.setenv("PATH", str(bindir))  # the other commands are missing: their files are left out
    files = capture_module.collect_live()
    assert {name: files.get(name) for name in ("uname-s.txt", "uname-r.txt", "uname-m.txt")} == {
        "uname-s.txt": "Linux\n",
        "uname-r.txt": "6.1.0-e2k\n",
        "uname-m.txt": "e2k\n",
    }
    assert files["uname.txt"] == UNAME_A + "\n"  # kept: captures are read on hosts with older ktinfra too
    os_section = parse_files(files, "test")["os"]
    assert (os_section["kernel"], os_section["arch"]) == ("6.1.0-e2k", "e2k")


@pytest.mark.parametrize(
    ("uname_a", "release", "machine"),
    [
        (UNAME_A, "6.1.0-e2k", "e2k"),
        (
            "Linux  6.8.0-60-generic #63-Ubuntu SMP x86_64 x86_64 x86_64 GNU/Linux",
            "6.8.0-60-generic",
            "x86_64",
        ),
    ],
    ids=["a space in the host name", "an empty host name"],
)
def test_a_capture_folder_with_the_fields_reads_them(tmp_path, uname_a, release, machine):
    capture = tmp_path / "cap"
    capture.mkdir()
    for name, text in {
        "uname.txt": uname_a,
        "uname-s.txt": "Linux",
        "uname-r.txt": release,
        "uname-m.txt": machine,
    }.items():
        (capture / name).write_text(text + "\n")
    assert {key: from_capture(capture)["os"][key] for key in ("kernel", "arch")} == {
        "kernel": release,
        "arch": machine,
    }


def test_a_field_file_that_is_not_one_word_is_passed_over():
    """A uname that ignores its flags (a wrapper printing `uname -a` for any) leaves uname -a's reading."""
    line = "Linux vm 6.8.0 #1 SMP x86_64 GNU/Linux\n"
    facts = os_facts({"uname.txt": line, "uname-r.txt": line, "uname-m.txt": "\n"})
    assert (facts["kernel"], facts["arch"]) == ("6.8.0", "x86_64")


@pytest.mark.parametrize("host", sorted(p.name for p in HOSTS.iterdir() if (p / "uname.txt").is_file()))
def test_captures_of_before_read_the_same(host):
    """The fixtures hold uname.txt alone: kernel and arch still come from its words."""
    assert not list((HOSTS / host).glob("uname-?.txt"))
    words = (HOSTS / host / "uname.txt").read_text().split()
    facts = from_capture(HOSTS / host)["os"]
    assert (facts["kernel"], facts["arch"]) == (words[2], "x86_64")
