"""kt_train and the end record its unit leaves, OUTPUT/.ktinfra-run-end (the unit's ExecStopPost writes it at
each end: tests/integration/test_train_end_marker.py runs it under systemd). Real ansible on localhost, the
stand-in systemctl of test_kt_train_role, which shows a unit it did not start as systemd shows one it has
forgotten (at a boot, at reset-failed): inactive, Result=success.

Before, a run that failed after LLaMA-Factory's save_metrics (in save_state, the loss plot) read as finished
once systemd had forgotten the failure: its adapter was handed over, and a start: true run was not trained
again. A record newer than train_results.json now speaks for that output: only a trainer that exited 0 ended
it well. Where there is none, or an older one, the files decide as before."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from test_kt_train_role import finished, run, systemctl_calls, train

FAILED = {"SERVICE_RESULT": "exit-code", "EXIT_CODE": "exited", "EXIT_STATUS": "1"}
SUCCEEDED = {"SERVICE_RESULT": "success", "EXIT_CODE": "exited", "EXIT_STATUS": "0"}
# systemctl stop (or a shutdown) during save_state: SIGTERM is a clean end to systemd, not to the run
STOPPED = {"SERVICE_RESULT": "success", "EXIT_CODE": "killed", "EXIT_STATUS": "TERM"}


def end_record(out: Path, fields: dict, after_results: float) -> None:
    """The unit's record, written `after_results` seconds after train_results.json (< 0: before it)."""
    path = out / ".ktinfra-run-end"
    lines = [f"{key}={value}" for key, value in fields.items()] + ["RECIPE_SHA256=" + "0" * 64]
    path.write_text("\n".join(lines) + "\n")
    at = (out / "train_results.json").stat().st_mtime + after_results
    os.utime(path, (at, at))


def handed_over(tmp: Path, name: str) -> bool:
    return (tmp / "cfg" / "serve" / f"tiny--{name}.lora.json").exists()


def test_the_record_after_the_metrics_says_whether_the_run_ended_well(tmp_path):
    """One play, four complete outputs (adapter, then train_results.json) with their unit forgotten. Only
    those whose record says the trainer exited 0, or whose record is older than their train_results.json
    (trained again by hand after a failed unit run), are finished and handed over."""
    cases = {
        "failed": (FAILED, 1),
        "stopped": (STOPPED, 1),
        "ended": (SUCCEEDED, 1),
        "byhand": (FAILED, -600),
    }
    for name, (fields, after_results) in cases.items():
        end_record(finished(tmp_path, name), fields, after_results)
    rc, output = train(tmp_path, [run(name, serve_instance="tiny") for name in cases])
    assert rc == 0, output[-3000:]
    assert {name: handed_over(tmp_path, name) for name in cases} == {
        "failed": False,
        "stopped": False,
        "ended": True,
        "byhand": True,
    }
    assert sorted(p.name for p in (tmp_path / "loras").iterdir()) == ["byhand", "ended"]


# slow: a failure record newer than the metrics keeps the run unfinished in
# test_the_record_after_the_metrics_says_whether_the_run_ended_well, and an unfinished start: true
# run is started again in test_kt_train_review8_reboot.py's
# test_a_retrain_with_a_changed_recipe_cut_by_a_reboot_is_not_taken_for_finished
@pytest.mark.slow
def test_a_run_started_here_that_failed_after_its_metrics_is_trained_again(tmp_path):
    """start: true, the run failed in save_state, systemd forgot it: started again (it resumes from its last
    checkpoint), not taken for finished."""
    out = finished(tmp_path, "again")
    runs = [run("again", start=True)]
    rc, output = train(tmp_path, runs)
    assert rc == 0, output[-3000:]
    (tmp_path / "systemctl.log.ktinfra-train@again.service.active").unlink()  # ended, then forgotten
    (out / "train_results.json").write_text("{}")  # written at its end, after the recipe
    end_record(out, FAILED, after_results=5)
    rc, output = train(tmp_path, runs)
    assert rc == 0, output[-3000:]
    assert systemctl_calls(tmp_path).count("start ktinfra-train@again.service") == 2
    assert "again has finished" not in output
