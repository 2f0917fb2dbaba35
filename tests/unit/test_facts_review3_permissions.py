"""A capture written under a strict umask, read by another user: the files must be readable, and an
unreadable capture file must be an error naming it, not a file taken as missing (facts without the CPU quota)
or a folder called "not a capture". Run as nobody, as the tests run as root (root reads any file)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

HOSTS = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"
AS_NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] if os.geteuid() == 0 else []


@pytest.fixture
def base():
    base = Path(tempfile.mkdtemp(prefix="ktinfra-facts-perm-"))  # /tmp: nobody can reach it
    base.chmod(0o755)
    yield base
    shutil.rmtree(base)


def _facts_from(folder: Path, as_nobody: bool) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            *(AS_NOBODY if as_nobody else []),
            sys.executable,
            "-m",
            "ktinfra",
            "facts",
            "--from",
            str(folder),
            "--json",
        ],
        capture_output=True,
        text=True,
        cwd="/",
    )


def test_a_capture_written_under_umask_077_is_readable_by_others(base):
    folder = base / "cap"
    write = f"import os, ktinfra.facts as f; os.umask(0o077); f.write_capture({str(folder)!r})"
    subprocess.run([sys.executable, "-c", write], check=True, cwd="/")
    assert {oct(p.stat().st_mode & 0o777) for p in folder.iterdir()} == {"0o644"}
    mine, theirs = _facts_from(folder, as_nobody=False), _facts_from(folder, as_nobody=True)
    # before: files 0600, and nobody was told "... is not a capture folder: none of lscpu.txt, ... is there"
    assert theirs.returncode == 0, theirs.stderr
    assert json.loads(theirs.stdout) == json.loads(mine.stdout)


def test_an_unreadable_capture_file_is_an_error_naming_it(base):
    """The AutoDL capture's quota (16 of 128 CPUs) is in cgroup.txt: read as missing, facts gave 64 cores."""
    folder = base / "autodl"
    shutil.copytree(HOSTS / "synthetic-autodl-6430-4090", folder)
    assert json.loads(_facts_from(folder, as_nobody=True).stdout)["cpu"]["physical_cores"] == 8
    (folder / "cgroup.txt").chmod(0o600 if AS_NOBODY else 0o000)
    done = _facts_from(folder, as_nobody=True)
    assert done.returncode == 1 and done.stdout == ""
    assert (
        "permission denied" in done.stderr and "cgroup.txt" in done.stderr and "Traceback" not in done.stderr
    )


def test_a_capture_none_of_whose_files_can_be_read_is_not_called_no_capture(base):
    folder = base / "closed"
    shutil.copytree(HOSTS / "h100-xeon-amx-16c", folder)
    for path in folder.iterdir():
        path.chmod(0o600 if AS_NOBODY else 0o000)
    done = _facts_from(folder, as_nobody=True)
    assert done.returncode == 1 and "not a capture folder" not in done.stderr
    assert "permission denied" in done.stderr and "lscpu.txt" in done.stderr
