"""scripts/test-lanes.sh (`make test`'s lanes) with real make on a small Makefile: goals in order within a
lane, lanes at the same time, every lane's failure reported, and a stop taking every lane's processes down and
still saying where each lane was."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

LANES = Path(__file__).resolve().parents[2] / "scripts" / "test-lanes.sh"

MAKEFILE = """\
a1:
\techo start a1 $$(date +%s.%N) >> order.log; sleep 1; echo end a1 $$(date +%s.%N) >> order.log
a2:
\techo start a2 $$(date +%s.%N) >> order.log
b1:
\techo start b1 $$(date +%s.%N) >> order.log; sleep 1; echo end b1 $$(date +%s.%N) >> order.log
fail:
\t@echo about to fail; exit 3
after-fail:
\techo after-fail ran >> order.log
pyfail:
\t@echo FAILED tests/unit/test_x.py::test_y - assert 1 == 2; echo "1 failed, 9 passed"; exit 1
hang:
\tsleep 300 & echo $$! > hang.pid; wait
"""


def lanes(tmp: Path, *specs: str, include: str = "", **popen) -> subprocess.Popen:
    (tmp / "Makefile").write_text(MAKEFILE + (f"include {include}\n" if include else ""))
    env = dict(os.environ, LANES_OUT=str(tmp / "lanes"), MAKE="make")
    return subprocess.Popen(
        ["bash", str(LANES), *specs], cwd=tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, **popen,
    )  # fmt: skip


def events(tmp: Path) -> dict[str, float]:
    lines = (tmp / "order.log").read_text().splitlines()
    rows = [line.split() for line in lines if line.startswith(("start", "end"))]
    return {f"{kind} {goal}": float(at) for kind, goal, at in rows}


def rows_and_failures(out: str) -> list[str]:
    """The summary's lines without the goals' times (test_each_goals_minutes_are_under_its_lanes_row)."""
    return [line for line in out.split("== lanes", 1)[1].splitlines() if not line.startswith(GOALS)]


GOALS = "         goals: "


def test_goals_run_in_order_within_a_lane_and_lanes_side_by_side(tmp_path):
    proc = lanes(tmp_path, "one=a1 a2", "two=b1")
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
    at = events(tmp_path)
    assert at["end a1"] <= at["start a2"]  # in order
    assert at["start b1"] < at["end a1"] and at["start a1"] < at["end b1"]  # at the same time
    assert "[one] echo start a1" in out and "[two] echo start b1" in out
    assert (tmp_path / "lanes" / "one.log").read_text().startswith("echo start a1")
    summary = rows_and_failures(out)
    assert summary[1].split()[:3] == ["one", "exit", "0"] and summary[1].endswith("a1 a2")
    assert summary[2].split()[:3] == ["two", "exit", "0"]


def test_a_failed_goal_stops_its_lane_only_and_the_run_fails(tmp_path):
    proc = lanes(tmp_path, "bad=fail after-fail", "good=a1")
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 1, out
    assert "[bad] about to fail" in out
    log = (tmp_path / "order.log").read_text()
    assert "after-fail ran" not in log and "end a1" in log  # the other lane finished
    summary = out.split("== lanes", 1)[1].splitlines()[1:]
    rows = {line.split()[0]: line.split()[2] for line in summary if not line.startswith(" ")}
    assert rows == {"bad": "2", "good": "0"}  # make's exit code for a failed recipe


def test_a_failed_lane_repeats_its_failures_under_its_summary_row(tmp_path):
    """CI keeps only the log's last lines: a failed lane's FAILED lines and make's error end the run, under
    its row, where before only its exit code was there (the unit lane of a CI run exited 2, no test named)."""
    proc = lanes(tmp_path, "unit=pyfail", "good=a1")
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 1, out
    summary = rows_and_failures(out)[1:]
    assert summary[0].split()[:3] == ["unit", "exit", "2"]
    assert summary[1] == "  [unit] FAILED tests/unit/test_x.py::test_y - assert 1 == 2", out
    # make or make[N] (CI's make test runs the lanes' make one level down)
    assert re.fullmatch(r"  \[unit\] make(\[\d+\])?: \*\*\* \[Makefile:\d+: pyfail\] Error 1", summary[2]), (
        out
    )
    assert summary[3].split()[:3] == ["good", "exit", "0"] and len(summary) == 4, out


def test_bad_lane_specs_are_refused_before_anything_runs(tmp_path):
    for spec in ("noequals", "Bad Name=a1", "empty="):
        proc = lanes(tmp_path, "one=a1", spec)
        out, _ = proc.communicate(timeout=30)
        assert proc.returncode == 2 and "bad lane" in out, out
        assert not (tmp_path / "order.log").exists()


def test_a_stop_takes_down_every_lane_and_its_children(tmp_path):
    proc = lanes(tmp_path, "one=hang", "two=hang", start_new_session=True)
    pid_file = tmp_path / "hang.pid"
    deadline = time.monotonic() + 30
    while not pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)  # both lanes' sleeps started (they write the same file)
    sleeper = int(pid_file.read_text())
    os.kill(proc.pid, signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 130
    # the summary still ends the output: which lanes were stopped, and where each one was
    summary = out.split("== lanes", 1)[1].splitlines()
    assert summary[1].split()[:2] == ["one", "stopped"] and summary[1].endswith("hang; its last lines:")
    assert summary[2] == "  [one] sleep 300 & echo $! > hang.pid; wait"
    assert summary[3].split()[:2] == ["two", "stopped"]
    deadline = time.monotonic() + 10
    while Path(f"/proc/{sleeper}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not Path(f"/proc/{sleeper}").exists(), "a lane's process outlived the stop"


def test_each_goals_minutes_are_under_its_lanes_row(tmp_path):
    """Each goal runs on a make of its own, the lane's VAR=value words given to each, so the summary says
    where a lane's time went (before: the lane's total only; CI's unit lane was cut off at 88.9 min with no
    word of how long lint took). A failed goal ends its lane and is shown with its exit code."""
    (tmp_path / "extra.mk").write_text("show:\n\techo V is $(V) >> order.log\n")
    proc = lanes(tmp_path, "one=a1 V=x show", "bad=a2 fail after-fail", include="extra.mk")
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 1, out
    assert "V is x" in (tmp_path / "order.log").read_text()
    summary = out.split("== lanes", 1)[1].splitlines()
    one, bad = (
        summary.index(next(line for line in summary if line.startswith("one "))),
        summary.index(next(line for line in summary if line.startswith("bad "))),
    )
    assert re.fullmatch(rf"{GOALS}a1 \d+\.\d, show \d+\.\d", summary[one + 1]), out
    assert re.fullmatch(rf"{GOALS}a2 \d+\.\d, fail exit 2 after \d+\.\d", summary[bad + 1]), out
    assert "after-fail ran" not in (tmp_path / "order.log").read_text()
