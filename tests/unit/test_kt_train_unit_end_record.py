"""The end record ktinfra-train@'s ExecStopPost writes (OUTPUT_DIR/.ktinfra-run-end), from the rendered unit's
text: its ExecStartPre/ExecStopPost command lines run by /bin/sh as systemd would run them ($$ and %%
unescaped, %i expanded, the variables systemd sets given), no systemd needed.
tests/integration/test_train_end_marker.py runs the same unit under a real systemd."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from role_play import REPO

PLAN = REPO / "tests" / "fixtures" / "plans" / "h100-qwen3-30b-a3b-sft-current.json"
FAILED = {"SERVICE_RESULT": "exit-code", "EXIT_CODE": "exited", "EXIT_STATUS": "1"}  # what systemd hands over


def _render(tmp: Path, output_dir: Path) -> tuple[str, Path]:
    """(the unit's text, the recipe) of `ktinfra render train` for a run writing to `output_dir`."""
    out = tmp / "rendered"
    res = subprocess.run(
        [sys.executable, "-m", "ktinfra", "render", "train", "--plan", str(PLAN), "--name", "run1",
         "--model-path", "/models/Qwen3-30B-A3B", "--dataset", "identity", "--dataset-dir", "/data",
         "--output-dir", str(output_dir), "--env-dir", str(tmp / "cfg"), "--out", str(out), "--json"],
        capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(REPO)),
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    (tmp / "cfg").mkdir(exist_ok=True)
    recipe = tmp / "cfg" / "run1.yaml"
    recipe.write_bytes((out / "run1.yaml").read_bytes())
    return (out / "ktinfra-train@.service").read_text(), recipe


def _commands(unit: str, key: str) -> list[list[str]]:
    """The argv of each `key=` line of the unit as systemd runs it (instance run1)."""
    joined = re.sub(r"\\\n", " ", unit)
    found = []
    for line in joined.splitlines():
        if line.startswith(f"{key}="):
            value = line.split("=", 1)[1].lstrip("-")  # '-': a failure is ignored
            words = shlex.split(value.replace("%i", "run1").replace("%%", "%"))
            found.append([w.replace("$$", "$") for w in words])
    return found


def _run(unit: str, key: str, env: dict) -> None:
    for argv in _commands(unit, key):
        subprocess.run(argv, env=env, check=False, timeout=60)


def _env(tmp: Path, recipe: Path, **more) -> dict:
    state = tmp / "state"
    state.mkdir(exist_ok=True)
    return {"PATH": "/usr/bin:/bin", "KT_TRAIN_CONFIG": str(recipe), "STATE_DIRECTORY": str(state)} | more


def _record(output_dir: Path) -> dict[str, str]:
    text = (output_dir / ".ktinfra-run-end").read_text()
    return dict(line.split("=", 1) for line in text.splitlines())


def test_the_record_names_the_recipe_the_run_started_with(tmp_path):
    """kt_train installs a changed recipe while the run trains (and says so): before, the record at the
    end took the sha256 of the new recipe, which this run never read."""
    output_dir = tmp_path / "out" / "run1"
    output_dir.mkdir(parents=True)
    unit, recipe = _render(tmp_path, output_dir)
    started = hashlib.sha256(recipe.read_bytes()).hexdigest()
    env = _env(tmp_path, recipe)
    _run(unit, "ExecStartPre", env)
    recipe.write_text(recipe.read_text() + "# changed by a play\n")
    _run(unit, "ExecStopPost", env | FAILED)
    assert _record(output_dir) == FAILED | {"RECIPE_SHA256": started}
    assert started != hashlib.sha256(recipe.read_bytes()).hexdigest()


def test_an_output_dir_with_non_ascii_characters_gets_its_record(tmp_path):
    """Before: the recipe's YAML wrote output_dir as "…/\\u6A21\\u578B-lora" (escaped, double-quoted), the
    unit read that text as the path, found no such folder and wrote no record: a run failed after its
    metrics there looked finished once systemd forgot the failure."""
    output_dir = tmp_path / "out" / "模型-lora"
    output_dir.mkdir(parents=True)
    unit, recipe = _render(tmp_path, output_dir)
    env = _env(tmp_path, recipe)
    _run(unit, "ExecStartPre", env)
    _run(unit, "ExecStopPost", env | FAILED)
    assert _record(output_dir)["SERVICE_RESULT"] == "exit-code"
    assert sorted(p.name for p in output_dir.iterdir()) == [".ktinfra-run-end"]  # nothing half-written


def test_a_recipe_with_non_ascii_output_dir_reads_back_as_the_path(tmp_path):
    """LLaMA-Factory reads the recipe with OmegaConf.load (UTF-8): the plain UTF-8 path is the same path."""
    import yaml

    output_dir = tmp_path / "out" / "模型-lora"
    _, recipe = _render(tmp_path, output_dir)
    loaded = yaml.safe_load(recipe.read_text(encoding="utf-8"))
    assert loaded["output_dir"] == str(output_dir)
    assert json.dumps(loaded)  # the whole recipe still loads
