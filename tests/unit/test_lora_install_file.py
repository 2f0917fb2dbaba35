"""`ktinfra lora serve --start` installs the unit and env file through _install_files: a write that fails
leaves neither a half-written target nor its temporary copy (which holds the API key) behind."""

from __future__ import annotations

import errno
import os

import pytest

from ktinfra.commands import lora as lora_cmd


def test_a_failed_write_leaves_no_temporary_copy(tmp_path, monkeypatch):
    """Before: the .NAME.env.tmp written up to the failure stayed in /etc/ktinfra/serve until the next run."""
    target = tmp_path / "qwen3.env"
    target.write_text("OLD=1\n")
    real_fdopen = os.fdopen

    class FullDisk:
        def __init__(self, handle):
            self.handle = handle

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.handle.close()

        def write(self, text):
            self.handle.write(text[:5])
            self.handle.flush()
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(lora_cmd.os, "fdopen", lambda fd, *a, **k: FullDisk(real_fdopen(fd, *a, **k)))
    with pytest.raises(OSError, match="No space left"):
        lora_cmd._install_files({target: ("SGLANG_API_KEY=secret\n", 0o600)})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["qwen3.env"]
    assert target.read_text() == "OLD=1\n"


def test_the_file_is_replaced_with_its_mode(tmp_path):
    target = tmp_path / "qwen3.env"
    target.write_text("OLD=1\n")
    lora_cmd._install_files({target: ("NEW=1\n", 0o600)})
    assert target.read_text() == "NEW=1\n" and target.stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["qwen3.env"]


def test_the_unit_and_env_file_are_replaced_together_or_not_at_all(tmp_path, monkeypatch):
    """Before: the unit was replaced, then the env file's write failed (a full /etc), and the instance's
    next (re)start read the new unit with the old env file."""
    unit, env = tmp_path / "ktinfra-serve@.service", tmp_path / "qwen3.env"
    unit.write_text("OLD UNIT\n")
    env.write_text("OLD=1\n")
    real_fdopen, opened = os.fdopen, []

    def second_write_fails(fd, *args, **kwargs):
        opened.append(fd)
        if len(opened) == 2:
            os.close(fd)
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_fdopen(fd, *args, **kwargs)

    monkeypatch.setattr(lora_cmd.os, "fdopen", second_write_fails)
    with pytest.raises(OSError, match="No space left"):
        lora_cmd._install_files({unit: ("NEW UNIT\n", 0o644), env: ("NEW=1\n", 0o600)})
    assert unit.read_text() == "OLD UNIT\n" and env.read_text() == "OLD=1\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ktinfra-serve@.service", "qwen3.env"]
    monkeypatch.undo()
    lora_cmd._install_files({unit: ("NEW UNIT\n", 0o644), env: ("NEW=1\n", 0o600)})
    assert unit.read_text() == "NEW UNIT\n" and env.read_text() == "NEW=1\n"
    assert env.stat().st_mode & 0o777 == 0o600
