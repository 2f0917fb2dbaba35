"""kt_serve sets an instance to stopped by disabling and stopping ktinfra-serve@NAME.service. One that had
failed before stays listed by `systemctl list-units --all` ('ktinfra-serve@bad.service loaded failed failed',
checked in the debian12-systemd image: systemd keeps the failed state until reset-failed), so the services
checks failed on it ('not enabled (disabled)', 'failed (exit-code)', its health URL refused) on a host where
every instance meant to run was up; one that stopped cleanly is unloaded and was never asked. An instance
disabled and down is now passed over, with a note. Real testinfra local host; `systemctl` on PATH answers as
systemctl does for that host."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import testinfra

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "infra"))
services = importlib.import_module("test_services")

SYSTEMCTL = r"""#!/bin/sh
eval unit=\${$#}
case "$1" in
list-unit-files) printf '%s\n' 'ktinfra-serve@.service indirect enabled' 'sglang.service disabled enabled' ;;
list-units)
  printf '%s\n' 'ktinfra-serve@a.service loaded active running a' \
    'ktinfra-serve@bad.service loaded failed failed b' 'ktinfra-serve@up.service loaded active running c' \
    'ktinfra-serve@off.service loaded inactive dead d' ;;
is-enabled) case "$unit" in *@a.service) echo enabled ;; *) echo disabled; exit 1 ;; esac ;;
show)
  case "$unit" in
  *@bad.service) state=failed ;;
  *@off.service|sglang.service) state=inactive ;;
  *) state=active ;;
  esac
  printf 'LoadState=loaded\nActiveState=%s\nSubState=x\nResult=exit-code\nNRestarts=0\n' "$state" ;;
esac
"""


def test_a_disabled_instance_that_is_down_is_not_checked(tmp_path, monkeypatch, capsys):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "systemctl").write_text(SYSTEMCTL)
    (bin_dir / "systemctl").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    host = testinfra.get_host("local://")
    # up: disabled but running (started by hand), and sglang.service (no instance) are still checked
    checked = ["ktinfra-serve@a.service", "ktinfra-serve@up.service", "sglang.service"]
    assert services.installed_units(host) == checked
    said = capsys.readouterr().out
    assert "not checked (instances disabled and down" in said and "ktinfra-serve@bad.service" in said, said
    assert "ktinfra-serve@off.service" in said, said
