"""`--from DIR` reads each capture file bounded and refuses what is no file: a FIFO blocked the read forever,
a 65 MiB file was read whole (and `lscpu.txt -> /dev/zero` took all memory); CRLF files read as before."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

HOSTS = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"


def _capture(tmp_path: Path) -> Path:
    folder = tmp_path / "cap"
    shutil.copytree(HOSTS / "h100-xeon-amx-16c", folder)
    return folder


def _facts_from(folder: Path) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "ktinfra", "facts", "--from", str(folder), "--json"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


def test_a_fifo_in_a_capture_is_refused_not_waited_on(tmp_path):
    folder = _capture(tmp_path)
    (folder / "thp.txt").unlink()
    os.mkfifo(folder / "thp.txt")
    done = _facts_from(folder)  # before: blocked in open() until the 60 s timeout
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "thp.txt is not a regular file" in done.stderr


def test_an_oversized_capture_file_is_refused(tmp_path):
    folder = _capture(tmp_path)
    with (folder / "meminfo.txt").open("r+b") as handle:
        handle.truncate(65 << 20)  # sparse: no disk used
    done = _facts_from(folder)  # before: read whole, facts printed with exit 0
    assert done.returncode == 1 and "meminfo.txt is over 64 MiB" in done.stderr


def test_a_link_to_dev_zero_is_refused(tmp_path):
    folder = _capture(tmp_path)
    (folder / "pid1.txt").unlink()
    (folder / "pid1.txt").symlink_to("/dev/zero")
    done = _facts_from(folder)
    assert done.returncode == 1 and "pid1.txt is not a regular file" in done.stderr


def test_crlf_files_and_a_folder_named_like_a_file_read_as_before(tmp_path):
    folder = _capture(tmp_path)
    before = json.loads(_facts_from(folder).stdout)
    for path in folder.iterdir():
        path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    (folder / "amx-permission.txt").unlink(missing_ok=True)
    (folder / "amx-permission.txt").mkdir()
    after = _facts_from(folder)
    assert after.returncode == 0, after.stderr
    assert {**json.loads(after.stdout), "source": None} == {**before, "source": None}
