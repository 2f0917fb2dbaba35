"""The end record a ktinfra-train@ unit leaves in its output dir, under a real systemd (Debian 12 container,
systemd as PID 1): `make render-systemd`.

systemd forgets a failed unit at boot and at reset-failed; a run that failed after LLaMA-Factory's
save_metrics (in save_state or the loss plot) then looked finished to kt_train. The unit's ExecStopPost now
writes OUTPUT_DIR/.ktinfra-run-end at each end. What is real: `ktinfra render train`'s unit and recipe,
systemd 252 running them (ExecStopPost, its $SERVICE_RESULT/$EXIT_CODE/$EXIT_STATUS, Restart=on-failure,
reset-failed). The stand-in: `accelerate`, which writes the adapter and train_results.json as a run's end
does, then exits with the status the test asks for.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PLAN = REPO / "tests" / "fixtures" / "plans" / "h100-qwen3-30b-a3b-sft-current.json"
sys.path.insert(0, str(REPO / "tests" / "unit"))
from systemd_box import IMAGE, systemd_box  # noqa: E402

BIN = "/opt/kt/envs/kt-sft/bin"
# `accelerate launch ... train RECIPE`: the recipe is its last argument
ACCELERATE_STANDIN = """#!/bin/bash
recipe=${@: -1}
while [ -e /run/standin-wait ]; do sleep 0.2; done  # a test's play changes the recipe meanwhile
out=$(sed -n 's/^output_dir: //p' "$recipe" | tr -d "'")
mkdir -p "$out"
echo adapter > "$out/adapter_model.safetensors"
echo '{"train_loss": 1.0}' > "$out/train_results.json"
exit "$(cat /run/standin-exit 2>/dev/null || echo 0)"
"""


def sh(box: str, script: str, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(["docker", "exec", box, "bash", "-c", script], capture_output=True, text=True)
    if check and result.returncode != 0:
        raise AssertionError(f"{script!r} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return result


def put(box: str, path: str, content: str, mode: str = "0644") -> None:
    subprocess.run(["docker", "exec", "-i", box, "bash", "-c", f"mkdir -p $(dirname {path}) && cat > {path}"],
                   input=content, text=True, check=True)  # fmt: skip
    sh(box, f"chmod {mode} {path}")


def install_run(box: str, tmp_path: Path, name: str, output_dir: str) -> dict:
    """`ktinfra render train` on this machine, its files put where its "install" map says."""
    res = subprocess.run(
        [sys.executable, "-m", "ktinfra", "render", "train", "--plan", str(PLAN), "--name", name,
         "--model-path", "/models/Qwen3-30B-A3B", "--dataset", "identity", "--dataset-dir", "/data",
         "--output-dir", output_dir, "--out", str(tmp_path / name), "--json"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    rendered = json.loads(res.stdout)
    for path in rendered["files"]:
        target = rendered["install"][Path(path).name]
        put(box, target, Path(path).read_text(), oct(Path(path).stat().st_mode & 0o777)[2:])
    sh(box, "systemctl daemon-reload")
    return rendered


def wait_ended(box: str, unit: str) -> dict[str, str]:
    """The unit's state once its run has ended (before Restart=on-failure's 60 s are up)."""
    state = {}
    for _ in range(60):
        shown = sh(box, f"systemctl show -p ActiveState -p SubState -p Result {unit}").stdout
        state = dict(line.split("=", 1) for line in shown.split())
        if state["ActiveState"] in ("inactive", "failed") or state["SubState"] == "auto-restart":
            return state
        time.sleep(0.5)
    raise AssertionError(f"{unit} still running: {state}")


def record(box: str, output_dir: str) -> dict[str, str]:
    text = sh(box, f"cat '{output_dir}/.ktinfra-run-end'").stdout
    return dict(line.split("=", 1) for line in text.splitlines())


@pytest.fixture(scope="module")
def box():
    with systemd_box("train-end", image=IMAGE) as name:
        sh(name, f"mkdir -p {BIN} /runs")
        put(name, f"{BIN}/accelerate", ACCELERATE_STANDIN, "0755")
        yield name


def test_a_run_that_fails_after_its_metrics_leaves_a_failure_record(box, tmp_path):
    """The stand-in writes the adapter and train_results.json, then exits 1 (as a failure in save_state
    would). The record says so, is newer than train_results.json, and outlives systemd's memory of the
    failure (reset-failed, as at a reboot)."""
    rendered = install_run(box, tmp_path, "fails", "/runs/fails")
    unit = rendered["unit"]
    sh(box, "echo 1 > /run/standin-exit")
    sh(box, f"systemctl start {unit}")
    state = wait_ended(box, unit)
    assert state["Result"] == "exit-code", state
    assert record(box, "/runs/fails") == {
        "SERVICE_RESULT": "exit-code", "EXIT_CODE": "exited", "EXIT_STATUS": "1",
        "RECIPE_SHA256": hashlib.sha256(Path(tmp_path / "fails" / "fails.yaml").read_bytes()).hexdigest(),
    }  # fmt: skip
    sh(box, "test /runs/fails/.ktinfra-run-end -nt /runs/fails/train_results.json "
            "-o ! /runs/fails/.ktinfra-run-end -ot /runs/fails/train_results.json")  # fmt: skip
    # no restart in 60 s; systemd forgets the failure (stop in auto-restart, then reset-failed as at a boot)
    sh(box, f"systemctl stop {unit}; systemctl reset-failed {unit} 2>/dev/null; true")
    shown = sorted(sh(box, f"systemctl show -p ActiveState -p Result {unit}").stdout.split())
    assert shown == ["ActiveState=inactive", "Result=success"]  # what a run that succeeded shows too
    assert record(box, "/runs/fails")["SERVICE_RESULT"] == "exit-code"
    assert sh(box, "ls -A /runs/fails").stdout.split() == [
        ".ktinfra-run-end",
        "adapter_model.safetensors",
        "train_results.json",
    ]  # nothing half-written left behind


def test_a_run_that_succeeds_replaces_the_record_with_success(box, tmp_path):
    """The same run started again ends with exit 0: its record says success. The output dir here ends in
    ':', which the recipe's YAML writes quoted."""
    rendered = install_run(box, tmp_path, "fails", "/runs/fails:")
    sh(box, "mkdir -p /runs/fails: && echo 0 > /run/standin-exit")
    sh(box, f"systemctl start {rendered['unit']}")
    state = wait_ended(box, rendered["unit"])
    assert (state["ActiveState"], state["Result"]) == ("inactive", "success"), state
    end = record(box, "/runs/fails:")
    assert (end["SERVICE_RESULT"], end["EXIT_CODE"], end["EXIT_STATUS"]) == ("success", "exited", "0")
    sh(box, "echo 0 > /run/standin-exit && rm -rf /runs/ok && mkdir /runs/ok")
    ok = install_run(box, tmp_path, "ok", "/runs/ok")
    sh(box, f"systemctl start {ok['unit']}")
    wait_ended(box, ok["unit"])
    assert record(box, "/runs/ok")["SERVICE_RESULT"] == "success"
    assert sh(box, "ls -A /runs/ok").stdout.split() == [
        ".ktinfra-run-end",
        "adapter_model.safetensors",
        "train_results.json",
    ]


def test_the_record_names_the_recipe_the_run_started_with(box, tmp_path):
    """A play installs a changed recipe while the run trains (kt_train does, and says so). Before, the record
    took the sha256 of the recipe at the end, one this run never read."""
    sh(box, "rm -rf /runs/changed && mkdir /runs/changed && echo 1 > /run/standin-exit")
    sh(box, "touch /run/standin-wait")
    rendered = install_run(box, tmp_path, "changed", "/runs/changed")
    sh(box, f"systemctl start {rendered['unit']}")
    recipe = rendered["install"]["changed.yaml"]
    sh(box, f"echo '# changed by a play' >> {recipe} && rm /run/standin-wait")
    wait_ended(box, rendered["unit"])
    started = hashlib.sha256(Path(tmp_path / "changed" / "changed.yaml").read_bytes()).hexdigest()
    assert record(box, "/runs/changed")["RECIPE_SHA256"] == started
    sh(box, f"systemctl stop {rendered['unit']}; systemctl reset-failed {rendered['unit']} 2>/dev/null; true")


def test_an_output_dir_with_non_ascii_characters_gets_its_record(box, tmp_path):
    """Before: the recipe's YAML escaped the path ("/runs/\\u6A21\\u578B-lora"), the unit found no such
    folder and wrote no record, so a run failed after its metrics there looked finished after a reboot."""
    sh(box, "rm -rf /runs/模型-lora && mkdir /runs/模型-lora && echo 1 > /run/standin-exit")
    rendered = install_run(box, tmp_path, "unicode", "/runs/模型-lora")
    sh(box, f"systemctl start {rendered['unit']}")
    assert wait_ended(box, rendered["unit"])["Result"] == "exit-code"
    assert record(box, "/runs/模型-lora")["SERVICE_RESULT"] == "exit-code"
    sh(box, f"systemctl stop {rendered['unit']}; systemctl reset-failed {rendered['unit']} 2>/dev/null; true")
