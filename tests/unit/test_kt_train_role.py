"""kt_train run by real ansible on localhost (-c local) with this checkout's ktinfra, writing only into
tmp_path; systemctl is a stand-in on PATH that records what it was asked."""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path

from role_play import REPO, run_play

FILES = REPO / "molecule" / "serve" / "files"
SYSTEMCTL = """#!/bin/sh
echo "$*" >> "$KT_TEST_SYSTEMCTL_LOG"
case "$1" in
  show) printf 'Id=%s\\nLoadState=loaded\\nActiveState=inactive\\nSubState=dead\\nResult=success\\n' "$2"
        printf 'UnitFileState=static\\n' ;;
esac
exit 0
"""


def setup(tmp: Path) -> dict:
    for sub in ("model", "datasets", "outputs", "loras", "cfg", "render", "units", "bin"):
        (tmp / sub).mkdir()
    (tmp / "model" / "config.json").write_text("{}")
    store = {"root": str(tmp), "models": {"tiny": {"kind": "model", "path": str(tmp / "model")}},
             "dirs": {d: str(tmp / d) for d in ("datasets", "outputs", "loras")}}  # fmt: skip
    (tmp / "store.json").write_text(json.dumps(store))
    wrapper = tmp / "bin" / "ktinfra"
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH={REPO} exec {sys.executable} -m ktinfra "$@"\n')
    systemctl = tmp / "bin" / "systemctl"
    systemctl.write_text(SYSTEMCTL)
    for exe in (wrapper, systemctl):
        exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return {
        "kt_train_ktinfra": str(wrapper),
        "kt_train_python": "/usr/bin/python3",
        "kt_train_config_dir": str(tmp / "cfg"),
        "kt_train_render_dir": str(tmp / "render"),
        "kt_train_unit_dir": str(tmp / "units"),
        "kt_train_lora_config_dir": str(tmp / "cfg" / "lora"),
        "kt_train_serve_config_dir": str(tmp / "cfg" / "serve"),
        "kt_train_store_state_file": str(tmp / "store.json"),
        "kt_train_datasets": [
            {"name": "tiny_alpaca", "src": str(FILES / "tiny_alpaca.json"), "file_name": "tiny_alpaca.json"}
        ],  # fmt: skip
        # systemd as init, as on a real host (this test machine has none): the stand-in systemctl answers
        "kt_train__sd_booted": {"stat": {"isdir": True}},
    }


def run(name: str = "tiny-sft", **more) -> dict:
    return {
        "name": name,
        "model": "tiny",
        "dataset": "tiny_alpaca",
        "plan_file": str(FILES / "plan-tiny-sft.json"),
    } | more


def train(tmp: Path, runs: list, cli: list[str] | None = None, **extra) -> tuple[int, str]:
    env = {"PATH": f"{tmp / 'bin'}:/usr/bin:/bin", "KT_TEST_SYSTEMCTL_LOG": str(tmp / "systemctl.log")}
    tasks = [{"ansible.builtin.include_role": {"name": "kt_train"}}]
    return run_play(tmp, tasks, setup(tmp) | {"kt_train_runs": runs} | extra, cli, env=env)


def systemctl_calls(tmp: Path) -> list[str]:
    log = tmp / "systemctl.log"
    return log.read_text().splitlines() if log.exists() else []


def test_a_run_is_installed_and_started_when_asked(tmp_path):
    rc, output = train(tmp_path, [run()], ["kt_train_start=true"])
    assert rc == 0, output[-3000:]
    assert (tmp_path / "cfg" / "tiny-sft.yaml").exists() and (
        tmp_path / "units" / "ktinfra-train@.service"
    ).exists()
    assert "start ktinfra-train@tiny-sft.service" in systemctl_calls(tmp_path)


def test_kt_train_start_false_as_a_string_does_not_start(tmp_path):
    """Before: -e kt_train_start=false is the string "false", which `when:` took as true: the run started."""
    rc, output = train(tmp_path, [run()], ["kt_train_start=false"])
    assert rc == 0, output[-3000:]
    assert (tmp_path / "cfg" / "tiny-sft.yaml").exists()
    assert not [c for c in systemctl_calls(tmp_path) if c.startswith("start")]


def test_run_problems_name_the_run_and_the_dataset(tmp_path):
    """Before: the messages read `\\1: run name must match …` and `dataset \\1 is not registered`."""
    runs = [run("Bad_Name"), run("other", model="absent"), run("third", dataset="tiny_alpaca, nope")]
    rc, output = train(tmp_path, runs)
    assert rc != 0
    assert "Bad_Name: run name must match [a-z0-9][a-z0-9_-]*" in output, output[-3000:]
    assert "other: model is not in the model store and no model_path is given" in output
    assert "dataset nope is not registered" in output
    assert "\\1" not in output


def test_a_run_without_model_or_model_path_is_named(tmp_path):
    """Before: "object of type 'dict' has no attribute 'model'" from the store check."""
    entry = run("nomodel")
    del entry["model"]
    rc, output = train(tmp_path, [entry])
    assert rc != 0
    assert "nomodel: give model (a kt_model_store model) or model_path" in output, output[-3000:]
    assert "has no attribute" not in output
    assert not (tmp_path / "render" / "nomodel").exists()


def test_every_run_is_checked_and_planned_before_anything_is_installed(tmp_path):
    """Before: the datasets were copied and registered, and the first run installed and started, before the
    second run's infeasible plan stopped the play."""
    infeasible = json.loads((FILES / "plan-tiny-sft.json").read_text()) | {
        "feasible": False,
        "problems": ["no GPU"],
    }
    (tmp_path / "infeasible.json").write_text(json.dumps(infeasible))
    runs = [run("first"), run("second", plan_file=str(tmp_path / "infeasible.json"))]
    rc, output = train(tmp_path, runs, ["kt_train_start=true"])
    assert rc != 0
    assert "second: sft plan infeasible: no GPU" in output, output[-3000:]
    for sub in ("cfg", "render", "units", "datasets", "outputs"):
        assert list((tmp_path / sub).iterdir()) == [], sub
    assert systemctl_calls(tmp_path) == []


def test_a_dataset_missing_on_the_host_stops_before_anything_is_written(tmp_path):
    extra = {"kt_train_datasets": [{"name": "tiny_alpaca", "src": str(FILES / "tiny_alpaca.json"),
                                    "file_name": "tiny_alpaca.json"},
                                   {"name": "absent", "file_name": "absent.json"}]}  # fmt: skip
    rc, output = train(tmp_path, [run()], **extra)
    assert rc != 0 and "absent" in output, output[-3000:]
    for sub in ("cfg", "render", "units", "datasets", "outputs"):
        assert list((tmp_path / sub).iterdir()) == [], sub
