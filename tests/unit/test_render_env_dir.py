"""`render ... --env-dir`: the roles' config directories (kt_serve_config_dir, kt_train_config_dir,
kt_train_lora_config_dir) reach the unit's EnvironmentFile=, the env file's paths and the install map.
Before, the renderers wrote /etc/ktinfra/<kind> into the unit whatever the role installed the env file to,
so a moved config directory gave a unit that failed on its missing EnvironmentFile."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ktinfra.cli import app

PLANS = Path(__file__).resolve().parents[1] / "fixtures" / "plans"
SERVE_PLAN = PLANS / "seed002-qwen3-30b-a3b-serve.json"
TRAIN_PLAN = PLANS / "h100-qwen3-30b-a3b-sft-current.json"


def _args(kind: str, out: Path) -> list[str]:
    common = ["--out", str(out), "--json"]
    if kind == "serve":
        return ["render", "serve", "--plan", str(SERVE_PLAN), "--name", "q30", "--model-path", "/m/q",
                "--weight-path", "/w/q-INT8", *common]  # fmt: skip
    if kind == "train":
        return [
            "render", "train", "--plan", str(TRAIN_PLAN), "--name", "run1", "--model-path", "/m/q",
            "--dataset", "identity", "--dataset-dir", "/data", "--output-dir", "/runs/run1", *common,
        ]  # fmt: skip
    if kind == "convert":
        return ["render", "convert", "--model-path", "/m/q", "--output", "/w/q-INT4", "--method", "int4",
                "--cpuinfer-threads", "8", "--threadpool-count", "1", *common]  # fmt: skip
    return ["render", "lora-convert", "--adapter", "/runs/run1", "--output", "/loras/run1",
            "--model-path", "/m/q", "--script", "/opt/convert.py", *common]  # fmt: skip


def cli(args):
    return CliRunner().invoke(app, args)


KINDS = {
    "serve": ("ktinfra-serve", "q30"),
    "train": ("ktinfra-train", "run1"),
    "convert": ("ktinfra-convert", "q-INT4"),
    "lora-convert": ("ktinfra-lora-convert", "run1"),
}


@pytest.mark.parametrize("kind", KINDS)
def test_env_dir_reaches_unit_env_and_install_map(tmp_path, kind):
    prefix, name = KINDS[kind]
    res = cli([*_args(kind, tmp_path / "out"), "--env-dir", "/srv/lab%1/conf/"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    moved = "/srv/lab%1/conf"  # normalized: the trailing '/' is dropped
    assert doc["env_file"] == f"{moved}/{name}.env"
    unit = (tmp_path / "out" / f"{prefix}@.service").read_text()
    assert "EnvironmentFile=/srv/lab%%1/conf/%i.env" in unit  # '%' escaped for systemd
    assert "/etc/ktinfra/" not in unit
    env = (tmp_path / "out" / f"{prefix}-{name}.env").read_text()
    assert f"install as {moved}/{name}.env" in env
    for file_name, target in doc["install"].items():
        if not file_name.endswith(".service"):
            assert target.startswith(f"{moved}/"), (file_name, target)


def test_train_recipe_paths_follow_env_dir(tmp_path):
    res = cli([*_args("train", tmp_path / "out"), "--env-dir", "/srv/kt/train"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    env = (tmp_path / "out" / "ktinfra-train-run1.env").read_text()
    assert 'KT_TRAIN_CONFIG="/srv/kt/train/run1.yaml"' in env
    assert 'KT_ACCELERATE_CONFIG="/srv/kt/train/run1.accelerate.yaml"' in env
    assert doc["config_file"] == "/srv/kt/train/run1.yaml"
    assert (
        doc["argv"][-1] == "/srv/kt/train/run1.yaml" and "/srv/kt/train/run1.accelerate.yaml" in doc["argv"]
    )
    assert doc["install"]["run1.yaml"] == "/srv/kt/train/run1.yaml"


@pytest.mark.parametrize("kind", KINDS)
def test_default_env_dir_is_unchanged(tmp_path, kind):
    prefix, name = KINDS[kind]
    res = cli(_args(kind, tmp_path / "out"))
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["env_file"] == f"/etc/ktinfra/{prefix.removeprefix('ktinfra-')}/{name}.env"


@pytest.mark.parametrize(
    ("env_dir", "message"),
    [
        ("etc/kt", "--env-dir must be an absolute path"),
        ("/", "not / itself"),
        ("//", "not / itself"),
        ("/srv/my conf", "contains ' '"),
        ("/srv/$HOME", "contains '$'"),
        ("", "--env-dir is empty"),
    ],
)
@pytest.mark.parametrize("kind", KINDS)
def test_bad_env_dir_is_refused_before_writing(tmp_path, kind, env_dir, message):
    out = tmp_path / "out"
    res = cli([*_args(kind, out), "--env-dir", env_dir])
    assert res.exit_code == 1
    assert message in res.stderr and res.stdout == ""
    assert not out.exists()
