"""`ktinfra tune --unit` on a journal holding bytes that are not UTF-8 (a server log line with a cut
multi-byte character, or binary junk a model printed): journalctl -o cat writes the messages as they are,
and the journal was decoded strictly, so tune died with a UnicodeDecodeError traceback. `--log FILE` reads
the same bytes with each bad one replaced; --unit now does too. A real journalctl-like program on PATH."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from typer.testing import CliRunner

from ktinfra.cli import app

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"


def _program(path: Path, body: str) -> None:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def test_unit_journal_with_bytes_that_are_not_utf8(tmp_path, monkeypatch):
    log = (LOGS / "decode-oom.log").read_bytes()
    assert b"server_args=ServerArgs(" in log  # the run's start is in the lines read: no second journal read
    journal = tmp_path / "journal.bin"
    journal.write_bytes(b"[2025-11-11 13:00:00 TP0] a cut character \xe4\xb8 and junk \xff\xfe\n" + log)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    _program(bindir / "journalctl", f"cat '{journal}'\n")
    _program(bindir / "systemctl", "exit 1\n")
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    res = CliRunner().invoke(app, ["tune", "--unit", "ktinfra-serve@m.service", "--json"])
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert res.exit_code == 0, res.output
    expected = CliRunner().invoke(app, ["tune", "--log", str(LOGS / "decode-oom.log"), "--json"])
    assert json.loads(res.stdout)["recommendations"] == json.loads(expected.stdout)["recommendations"]


def test_unit_start_lines_with_bytes_that_are_not_utf8(tmp_path, monkeypatch):
    # the last lines hold no server_args= (a server up for hours): the run's start-up lines are read from
    # the journal of its InvocationID, a second journalctl whose output was decoded strictly too
    log = (LOGS / "decode-oom.log").read_bytes()
    cut = log.index(b"Decode batch")
    cut = log.rindex(b"\n", 0, cut) + 1
    start, tail = tmp_path / "start.bin", tmp_path / "tail.bin"
    start.write_bytes(b"junk \xff\n" + log[:cut])
    tail.write_bytes(log[cut:])  # clean: the bad byte is in the start-up lines only
    bindir = tmp_path / "bin"
    bindir.mkdir()
    _program(bindir / "journalctl", f"if [ \"$1\" = -u ]; then cat '{tail}'; else cat '{start}'; fi\n")
    _program(bindir / "systemctl", "echo 0123456789abcdef0123456789abcdef\n")
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    res = CliRunner().invoke(app, ["tune", "--unit", "ktinfra-serve@m.service", "--json"])
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert res.exit_code == 0, res.output
    got = json.loads(res.stdout)
    expected = json.loads(
        CliRunner().invoke(app, ["tune", "--log", str(LOGS / "decode-oom.log"), "--json"]).stdout
    )
    assert got["recommendations"] == expected["recommendations"] and got["recommendations"]
