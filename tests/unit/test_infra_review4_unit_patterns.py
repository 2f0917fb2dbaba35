"""The services checks' unit list on a real testinfra local host whose working directory holds a file named
like a unit pattern (a ~/sglang checkout where doctor reaches the target over ssh). `systemctl` on PATH is a
script that answers as systemctl does: the units whose names match one of its glob arguments."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import testinfra

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "infra"))
services = importlib.import_module("test_services")

SYSTEMCTL = """#!/bin/sh
shift 4  # list-unit-files|list-units [--all] --no-legend --plain --type=service: patterns follow
[ "$1" = --type=service ] && shift
for unit in sglang.service ktinfra-serve@.service ktinfra-serve@a.service ssh.service; do
  for pattern in "$@"; do
    case "$unit" in $pattern) echo "$unit enabled enabled"; break ;; esac
  done
done
"""


def test_a_file_named_like_a_pattern_in_the_working_directory_hides_no_unit(tmp_path, monkeypatch):
    """sglang* went to the target's shell bare: with a ./sglang there it became 'sglang', which matches no
    unit, and the hand-made sglang.service was left out (its checks skipped)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "systemctl").write_text(SYSTEMCTL)
    (bin_dir / "systemctl").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    home = tmp_path / "home"
    (home / "sglang").mkdir(parents=True)
    (home / "ktinfra-serve-notes.txt").write_text("")
    monkeypatch.chdir(home)
    host = testinfra.get_host("local://")
    assert services.installed_units(host) == ["ktinfra-serve@a.service", "sglang.service"]
