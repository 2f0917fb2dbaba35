"""kt_train where systemd is not PID 1 (AutoDL and most containers), by real ansible on localhost writing only
into tmp_path: a run started by hand is handed over once it has finished, its adapter converted by the
conversion's command run by the play (a real python converter), and no systemctl is called. Before, the
hand-over and the conversion were skipped on such hosts: a trained adapter never reached its serve
instance."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_kt_train_role import finished, run, systemctl_calls, train

CONVERTER = """import pathlib, shutil, sys
adapter, output = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
base = sys.argv[sys.argv.index("--base-model-name-or-path") + 1]
if "--overwrite" in sys.argv and output.exists():
    shutil.rmtree(output)
output.mkdir(parents=True)
parts = ("fused_expert_lora.safetensors", "adapter_model.safetensors")
merged = b"".join((adapter / part).read_bytes() for part in parts)
(output / "adapter_model.safetensors").write_bytes(merged)
(output / "adapter_config.json").write_text('{"base_model_name_or_path": "%s"}' % base)
with open(sys.argv[0] + ".calls", "a") as log:
    log.write(output.name + "\\n")
"""


def nosystemd(tmp: Path) -> dict:
    converter = tmp / "convert.py"
    converter.write_text(CONVERTER)
    return {
        "kt_train__sd_booted": {"stat": {"isdir": False}},
        "kt_train_lora_converter": str(converter),
        "kt_train_serve_python": sys.executable,
    }


def conversions(tmp: Path) -> int:
    calls = tmp / "convert.py.calls"
    return len(calls.read_text().splitlines()) if calls.exists() else 0


def end_training(tmp: Path, name: str, later: float = 1.0) -> Path:
    """LLaMA-Factory's last write of a finished run: train_results.json, after the adapter files."""
    results = tmp / "outputs" / name / "train_results.json"
    results.write_text('{"train_loss": 1.0}')
    newest = max(p.stat().st_mtime for p in results.parent.iterdir() if p != results)
    os.utime(results, (newest + later, newest + later))
    return results


def record(tmp: Path, name: str = "done") -> Path:
    return tmp / "cfg" / "serve" / f"tiny--{name}.lora.json"


def test_a_run_finished_by_hand_is_converted_and_handed_over(tmp_path):
    trained = finished(tmp_path, "done")
    end_training(tmp_path, "done")
    rc, output = train(tmp_path, [run("done", serve_instance="tiny")], **nosystemd(tmp_path))
    assert rc == 0, output[-3000:]
    adapter = tmp_path / "loras" / "done"
    assert conversions(tmp_path) == 1
    parts = [
        (trained / p).read_bytes() for p in ("fused_expert_lora.safetensors", "adapter_model.safetensors")
    ]
    assert (adapter / "adapter_model.safetensors").read_bytes() == b"".join(parts)  # the converter's output
    assert json.loads((adapter / "adapter_config.json").read_text()) == {
        "base_model_name_or_path": str(tmp_path / "model")
    }
    handover = json.loads(record(tmp_path).read_text())
    assert handover["path"] == str(adapter) and handover["instance"] == "tiny"
    assert json.loads((adapter / ".ktinfra-convert-done").read_text()) == handover["source"]
    assert sorted(p.name for p in (tmp_path / "loras").iterdir()) == ["done"]
    assert systemctl_calls(tmp_path) == []
    assert "once it has finished, run this play again to convert the adapter and hand it to tiny" in output


@pytest.mark.slow  # the fast test above shows the hand-over; this one that a second play changes nothing
def test_a_run_finished_by_hand_is_handed_over_once(tmp_path):
    finished(tmp_path, "done")
    end_training(tmp_path, "done")
    for _ in range(2):
        rc, output = train(tmp_path, [run("done", serve_instance="tiny")], **nosystemd(tmp_path))
        assert rc == 0, output[-3000:]
    assert "changed=0" in output, output[-3000:]
    assert conversions(tmp_path) == 1 and record(tmp_path).exists()


@pytest.mark.parametrize("ending", [pytest.param("none", marks=pytest.mark.slow), "older than the adapter"])
def test_a_run_that_did_not_reach_the_end_of_training_is_not_handed_over(tmp_path, ending):
    """No train_results.json, or one from an earlier run older than the adapter files (killed between
    save_model and save_metrics): the output may be half-written."""
    finished(tmp_path, "done")
    if ending == "none":
        (tmp_path / "outputs" / "done" / "train_results.json").unlink()
    else:
        end_training(tmp_path, "done", later=-60)
    rc, output = train(tmp_path, [run("done", serve_instance="tiny")], **nosystemd(tmp_path))
    assert rc == 0, output[-3000:]
    assert conversions(tmp_path) == 0 and not record(tmp_path).exists()
    assert list((tmp_path / "loras").iterdir()) == []


@pytest.mark.slow  # three plays; the process finder's own test below is fast
def test_a_run_still_training_by_hand_is_handed_over_after_it_ended(tmp_path):
    """A retrain started by hand (as tasks/run.yml says, the recipe by a path relative to its working
    directory here) keeps the finished output of the run before it: not handed over while a process names
    the recipe."""
    finished(tmp_path, "done")
    rc, output = train(tmp_path, [run("done")], **nosystemd(tmp_path))  # installs cfg/done.yaml
    assert rc == 0 and (tmp_path / "cfg" / "done.yaml").exists(), output[-3000:]
    end_training(tmp_path, "done")
    (tmp_path / "outputs" / "done" / "train_results.json").touch()  # the run trained with that recipe
    trainer = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)", "train", "done.yaml"], cwd=tmp_path / "cfg"
    )
    try:
        rc, output = train(tmp_path, [run("done", serve_instance="tiny")], **nosystemd(tmp_path))
        assert rc == 0, output[-3000:]
        assert conversions(tmp_path) == 0 and not record(tmp_path).exists()
    finally:
        trainer.kill()
        trainer.wait()
    rc, output = train(tmp_path, [run("done", serve_instance="tiny")], **nosystemd(tmp_path))
    assert rc == 0, output[-3000:]
    assert conversions(tmp_path) == 1 and record(tmp_path).exists()


def test_the_process_finder_matches_whole_arguments_only(tmp_path):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "roles" / "kt_train" / "library"))
    from kt_train_processes import find

    recipe = str(tmp_path / "run.yaml")
    procs = [
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", *args], cwd=tmp_path)
        for args in (
            ["train", recipe],
            ["train", "./sub/../run.yaml"],
            ["train", recipe + ".bak"],
            ["run.yaml.x"],
        )
    ]
    try:
        time.sleep(0.2)
        found = find([recipe, str(tmp_path / "other.yaml")], own=os.getpid())
        assert found == {recipe: sorted(p.pid for p in procs[:2]), str(tmp_path / "other.yaml"): []}
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
