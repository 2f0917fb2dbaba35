"""`ktinfra facts` (the table) in a terminal whose encoding is GBK (zh_CN.GBK; PYTHONIOENCODING=gbk gives
stdout that encoding the same way): a capture keeps a byte that is no UTF-8 as U+FFFD, which GBK cannot
encode. --json and --capture worked there; the table failed with a UnicodeEncodeError traceback."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

HOSTS = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"
KERNEL = "6.8.0-模型".encode() + b"\xff"  # GBK holds the two characters; the stray byte is read as U+FFFD


def _facts(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONIOENCODING": "gbk", "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "ktinfra", "facts", *args], capture_output=True, env=env)


def _capture(tmp_path: Path) -> Path:
    capture = tmp_path / "cap"
    shutil.copytree(HOSTS / "h100-xeon-amx-16c", capture)
    (capture / "uname.txt").write_bytes(b"Linux host " + KERNEL + b" #1 SMP x86_64 GNU/Linux\n")
    return capture


def test_the_table_prints_what_gbk_cannot_hold_as_a_question_mark(tmp_path):
    done = _facts("--from", str(_capture(tmp_path)))
    stdout, stderr = done.stdout.decode("gbk"), done.stderr.decode("gbk", errors="replace")
    assert done.returncode == 0, stderr  # before: 1, UnicodeEncodeError: 'gbk' codec can't encode '\ufffd'
    assert "Traceback" not in stderr
    assert "kernel 6.8.0-模型?" in stdout
    assert "NVIDIA H100 80GB HBM3" in stdout  # the rest of the output is all there


def test_json_is_unchanged(tmp_path):
    done = _facts("--from", str(_capture(tmp_path)), "--json")
    assert done.returncode == 0
    assert b'"kernel": "6.8.0-\\u6a21\\u578b\\ufffd"' in done.stdout
