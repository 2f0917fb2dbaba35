"""render train's Accelerate config asks accelerate for a free port (main_process_port 0): without it every
current-stack run's torchrun master took 29500, and of two runs started together on one host (both found 29500
free before either bound it) the second failed to bind it."""

from __future__ import annotations

import pytest
import yaml
from test_render_support import load_fixture_plan, render_train_here

CURRENT = "h100-qwen3-30b-a3b-sft-current.json"


def _accelerate(tmp_path, name: str, gpus: list[int]) -> dict:
    plan = load_fixture_plan(CURRENT)
    plan["host"]["gpus"] = [dict(plan["host"]["gpus"][0], index=i) for i in gpus]
    plan["sft"]["gpu_indices"] = gpus
    plan["sft"]["launcher"]["num_processes"] = len(gpus)
    rendered = render_train_here(plan, tmp_path, name, f"/o/{name}")
    return yaml.safe_load(rendered.files[f"{name}.accelerate.yaml"][0])


@pytest.mark.parametrize("gpus", [[0], [0, 1]])
def test_every_run_lets_accelerate_pick_a_free_port(tmp_path, gpus):
    """accelerate (utils/launch.py prepare_multi_gpu_env) replaces main_process_port 0 with a port the OS
    hands out; a missing one becomes 29500 for every run."""
    first, second = _accelerate(tmp_path, "a", gpus), _accelerate(tmp_path, "b", gpus)
    assert first["main_process_port"] == 0 and second["main_process_port"] == 0
    assert type(first["main_process_port"]) is int  # accelerate compares it with == 0
    assert first["num_processes"] == len(gpus) and first["num_machines"] == 1
