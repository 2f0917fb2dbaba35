"""kt_host_tuning_state=absent puts back what the record holds (tasks/undo.yml, library/kt_tuning_record.py
action=undo), then removes the record. Before, the role had no undo: its files, fstab line, masked units and
runtime values stayed. The role's tasks/undo.yml runs by real ansible on localhost (include_role tasks_from,
never the whole role, which would tune this machine where absent is not honoured), with the record, every
file and value in tmp_path and a stand-in systemctl that logs what it is asked.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

from role_play import run_play
from test_kt_host_tuning_record import FSTAB, LIBRARY, host, record

SYSTEMCTL = """#!/bin/sh
echo "$*" >> "{log}"
case $1 in
  is-enabled|is-active) cat "{units}/$2.$1" 2>/dev/null || echo unknown ;;
  mask) [ -L "{units}/$3" ] || ln -s /dev/null "{units}/$3" ;;  # a mask there already: systemctl keeps it
esac
"""


def stand_in_systemctl(tmp: Path) -> tuple[Path, Path]:
    """bin folder with a systemctl that logs its calls, answers from tmp/units and masks there; its log."""
    bin_dir, log = tmp / "bin", tmp / "systemctl.log"
    bin_dir.mkdir(exist_ok=True)
    log.unlink(missing_ok=True)
    (bin_dir / "systemctl").write_text(SYSTEMCTL.format(log=log, units=tmp / "units"))
    (bin_dir / "systemctl").chmod(0o755)
    return bin_dir, log


def mask(tmp: Path, args: dict) -> tuple[int, str]:
    """governor_daemons_stop.yml's step: the record's masked units masked in tmp/units, the links recorded."""
    bin_dir, _ = stand_in_systemctl(tmp)
    (tmp / "units").mkdir(exist_ok=True)
    step = {"path": args["path"], "action": "mask", "masked": args["masked"], "unit_dir": str(tmp / "units")}
    env = LIBRARY | {"PATH": f"{bin_dir}:{os.environ['PATH']}"}
    return run_play(tmp, [{"kt_tuning_record": step}], env=env)


def undo(
    tmp: Path, state: Path, flags: list[str] | None = None, extra: dict | None = None
) -> tuple[int, str, list[str]]:
    """rc, output and the systemctl calls (less is-enabled/is-active) of the role's tasks/undo.yml."""
    bin_dir, log = stand_in_systemctl(tmp)
    # tasks/undo.yml alone, never the whole role: on code where absent is not honoured (or a regression) the
    # role would tune this machine (main.yml's dispatch is the container test's)
    role = {"ansible.builtin.include_role": {"name": "kt_host_tuning", "tasks_from": "undo"}}
    extra = {"kt_host_tuning_state_file": str(state)} | (extra or {})
    rc, output = run_play(tmp, [role], extra, env={"PATH": f"{bin_dir}:{os.environ['PATH']}"}, flags=flags)
    calls = log.read_text().splitlines() if log.exists() else []
    return rc, output, [c for c in calls if not c.startswith("is-")]


def tuned(tmp: Path) -> None:
    """What a run of the role leaves, in the stand-ins of host(): each value, file and unit changed."""
    (tmp / "sys" / "vm" / "swappiness").write_text("10\n")
    (tmp / "thp").write_text("always [madvise] never\n")
    for cpu in ("cpu0", "cpu1"):
        (tmp / "cpu" / cpu / "cpufreq" / "scaling_governor").write_text("performance\n")
    (tmp / "fstab").write_text(FSTAB.replace("tmpfs  /dev/shm\ttmpfs  defaults,noexec  0 0", "tmpfs /dev/shm "
                                             "tmpfs defaults,noexec,nosuid,nodev,size=75% 0 0"))  # fmt: skip
    (tmp / "own.conf").write_text("ours\n")
    (tmp / "new.conf").write_text("ours\n")
    (tmp / "made").mkdir()
    (tmp / "units").mkdir(exist_ok=True)
    (tmp / "units" / "tuned.service.is-enabled").write_text("masked\n")
    (tmp / "units" / "tuned.service.is-active").write_text("inactive\n")
    (tmp / "units" / "ondemand.service.is-enabled").write_text("disabled\n")


def test_absent_puts_back_what_the_record_holds_and_removes_it(tmp_path):
    args = host(tmp_path)
    rc, output = record(tmp_path, args)
    assert rc == 0, output[-3000:]
    stand_ins = [tmp_path / name for name in ("sys", "cpu", "fstab", "own.conf")]
    before = {p: p.read_bytes() for top in stand_ins for p in [top, *top.rglob("*")] if p.is_file()}
    rc, output = mask(tmp_path, args)
    assert rc == 0, output[-3000:]
    tuned(tmp_path)

    rc, output, calls = undo(tmp_path, Path(args["path"]))
    assert rc == 0 and "changed=1" in output, output[-3000:]
    assert calls == ["unmask tuned.service", "start tuned.service", "enable ondemand.service"], calls
    for path, content in before.items():
        assert path.read_bytes() == content, path  # fstab byte for byte, the values, own.conf
    assert (tmp_path / "own.conf").stat().st_mode & 0o777 == 0o640
    assert (tmp_path / "thp").read_text() == "always\n"  # the mode written back (the kernel shows [always])
    assert not (tmp_path / "new.conf").exists() and not (tmp_path / "made").exists()
    assert not Path(args["path"]).exists()
    assert "vm.swappiness 10 -> 60" in output and "unmasked tuned.service" in output

    rc, output, calls = undo(tmp_path, Path(args["path"]))
    assert rc == 0 and "changed=0" in output, output[-3000:]
    assert "nothing to undo" in output and calls == []


def test_a_record_that_cannot_be_put_back_fails_before_anything_changes(tmp_path):
    args = host(tmp_path)
    rc, output = record(tmp_path, args)
    assert rc == 0, output[-3000:]
    tuned(tmp_path)
    state = Path(args["path"])
    broken = json.loads(state.read_text())
    broken["masked"]["tuned.service; rm -rf /"] = {"active": "active", "enabled": "enabled"}
    state.write_text(json.dumps(broken))

    rc, output, calls = undo(tmp_path, state)
    assert rc != 0
    assert "is not a unit name" in output and "nothing was changed" in output, output[-3000:]
    assert calls == [] and json.loads(state.read_text()) == broken
    assert (tmp_path / "new.conf").read_text() == "ours\n" and (tmp_path / "made").is_dir()
    assert (tmp_path / "sys" / "vm" / "swappiness").read_text() == "10\n"


def test_other_fstab_changes_are_kept_and_what_cannot_be_put_back_is_named(tmp_path):
    args = host(tmp_path) | {"masked": [], "disabled": []}
    rc, output = record(tmp_path, args)
    assert rc == 0, output[-3000:]
    tuned(tmp_path)
    fstab = tmp_path / "fstab"
    fstab.write_text(fstab.read_text() + "/dev/vdb1 /data xfs defaults 0 2\n")  # added since by an admin
    (tmp_path / "cpu" / "cpu1" / "cpufreq" / "scaling_governor").unlink()  # that CPU went offline

    rc, output, _ = undo(tmp_path, Path(args["path"]))
    assert rc == 0, output[-3000:]
    assert fstab.read_text().splitlines() == [*FSTAB.splitlines(), "/dev/vdb1 /data xfs defaults 0 2"]
    assert "other lines changed since; its /dev/shm lines alone put back" in output, output[-3000:]
    assert "governor (" in output and "scaling_governor): no longer there" in output


def test_a_file_that_is_not_utf8_comes_back_byte_for_byte(tmp_path):
    """The files' content is kept base64 in the record: one with non-UTF-8 bytes comes back as it was."""
    args = host(tmp_path) | {"masked": [], "disabled": []}
    (tmp_path / "own.conf").write_bytes(b"\xff\xfe latin\n")
    rc, output = record(tmp_path, args)
    assert rc == 0, output[-3000:]
    entry = json.loads(Path(args["path"]).read_text())["files"][str(tmp_path / "own.conf")]
    assert base64.b64decode(entry["content"]) == b"\xff\xfe latin\n"
    (tmp_path / "own.conf").write_text("ours\n")
    rc, output, _ = undo(tmp_path, Path(args["path"]))
    assert rc == 0, output[-3000:]
    assert (tmp_path / "own.conf").read_bytes() == b"\xff\xfe latin\n"


def test_check_mode_says_what_absent_would_put_back_and_changes_nothing(tmp_path):
    args = host(tmp_path)
    args["dirs"].append(str(tmp_path / "state"))  # made for the record, as the role's report folder
    rc, output = record(tmp_path, args)
    assert rc == 0, output[-3000:]
    tuned(tmp_path)
    state = Path(args["path"])
    kept = state.read_text()

    rc, output, calls = undo(tmp_path, state, ["--check"])
    assert rc == 0, output[-3000:]
    assert "removed " in output and "vm.swappiness 10 -> 60" in output, output[-3000:]
    assert "holds files the role did not write" not in output  # the record's folder, emptied by a real run
    assert state.read_text() == kept and calls == []
    assert (tmp_path / "new.conf").read_text() == "ours\n" and (tmp_path / "made").is_dir()
    assert (tmp_path / "sys" / "vm" / "swappiness").read_text() == "10\n"
