"""Legacy-stack recipes (`kt-0.4-autodl`) read by LLaMA-Factory 0.9.4's own get_train_args:
`make render-legacy-recipe`.

The legacy profile pins LLaMA-Factory 000526908ae9 (0.9.4.dev0, GitHub only); the 0.9.4 release on PyPI has
the same KT arguments (use_kt, kt_optimize_rule, cpu_infer, chunk_size). lf094_probe.py says what differs
from a real run. The current stack's recipe is refused by it, and the legacy one by llamafactory-kt
(molecule envs): each recipe fits exactly one generation.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ktinfra.render.train import LLAMAFACTORY_DIR  # kt_python_env's checkout

HERE = Path(__file__).resolve().parent
FACTS = HERE.parents[1] / "fixtures" / "facts"
CASES = {
    # name: (model, facts capture)
    "seed002-qwen3": ("Qwen3-30B-A3B", "seed002-autodl-6430-4090"),
    "h100-v2lite": ("DeepSeek-V2-Lite", "h100-amx"),
    "4xl40s-v2lite": ("DeepSeek-V2-Lite", "dual-spr-2xnuma-4xl40s"),
}


def ktinfra(*args: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "ktinfra", *args, "--json"], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def render(tmp: Path, name: str, model: str, facts: str, stack: str) -> tuple[dict, Path]:
    plan = ktinfra(
        "plan", "--model", model, "--mode", "sft", "--stack", stack, "--facts", str(FACTS / f"{facts}.json")
    )
    (tmp / f"{name}.plan.json").write_text(json.dumps(plan))
    ktinfra(
        "render", "train", "--plan", str(tmp / f"{name}.plan.json"), "--name", name,
        "--model-path", f"/data/models/{model}", "--dataset", "identity",
        "--dataset-dir", "/data/llamafactory", "--output-dir", f"/data/out/{name}", "--out", str(tmp / name),
    )  # fmt: skip
    return plan, tmp / name / f"{name}.yaml"


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    python = os.environ.get("KTINFRA_LF094_PYTHON")
    if not python:
        pytest.fail(
            "KTINFRA_LF094_PYTHON is not set: run these tests with `make render-legacy-recipe`", pytrace=False
        )
    tmp = tmp_path_factory.mktemp("legacy")
    plans, recipes = {}, []
    for name, (model, facts) in CASES.items():
        plans[name], recipe = render(tmp, name, model, facts, "kt-0.4-autodl")
        recipes.append(str(recipe))
    _, current = render(tmp, "current", "Qwen3-30B-A3B", "seed002-autodl-6430-4090", "kt-0.7")
    broken = tmp / "broken.yaml"  # a key of the other generation in an otherwise valid legacy recipe
    broken.write_text(Path(recipes[0]).read_text() + "kt_weight_path: /data/cpu-weights/q\n")
    out = subprocess.run(
        [python, str(HERE / "lf094_probe.py")],
        input=json.dumps([*recipes, str(current), str(broken)]),
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    results = json.loads(out.stdout.strip().splitlines()[-1])
    return plans, dict(zip([*CASES, "current", "broken"], results, strict=True))


@pytest.mark.parametrize("name", CASES)
def test_llamafactory_094_loads_the_legacy_recipe_as_planned(loaded, name):
    plans, results = loaded
    sft, got = plans[name]["sft"], results[name]
    assert "error" not in got, got
    kt = sft["kt"]
    assert got == {
        "use_kt": True,
        "kt_optimize_rule": f"{LLAMAFACTORY_DIR}/{kt['kt_optimize_rule']}",
        "cpu_infer": kt["cpu_infer"],
        "chunk_size": kt["chunk_size"],
        "cutoff_len": sft["cutoff_len"],
        "template": sft["template"],
        "batch": sft["per_device_train_batch_size"],
        "grad_accum": sft["gradient_accumulation_steps"],
        "warmup_steps_of_1000": 100,  # the 10 % warmup, as transformers 4.57 reads the recipe
        "lora_rank": sft["lora_rank"],
        "ktransformers_required": True,  # 0.9.4 asks for the ktransformers package when use_kt is on
    }


def test_the_cases_cover_single_and_multi_gpu_placement_rules(loaded):
    _, results = loaded
    rules = {Path(results[name]["kt_optimize_rule"]).name for name in CASES}
    assert rules == {
        "Qwen3Moe-sft-amx.yaml",
        "DeepSeek-V2-Lite-Chat-sft-amx.yaml",
        "DeepSeek-V2-Lite-Chat-sft-amx-multi-gpu.yaml",
    }


def test_llamafactory_094_refuses_the_current_stack_recipe(loaded):
    _, results = loaded
    # transformers 4.57 stops at the first misfit: the float warmup_steps (kt_config would be next)
    assert results["current"]["error"] == (
        "ValueError: warmup_steps must be of type int and must be 0 or a positive integer."
    )


def test_llamafactory_094_refuses_a_current_key_in_a_legacy_recipe(loaded):
    _, results = loaded
    assert results["broken"]["error"].endswith("['kt_weight_path']")
