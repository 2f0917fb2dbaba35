"""Hand-edited plan values that used to render into broken or misleading files: a newline in a name shown
in a comment line (an extra EnvironmentFile assignment, an extra YAML key), recipe values LLaMA-Factory
cannot take, an empty GPU list read as "every GPU", a process count that does not match the GPUs, a KT
recipe with use_kt false, and a run name that collides with another run's Accelerate config."""

from __future__ import annotations

import json
import re

import pytest
import yaml
from test_render_support import PLANS
from typer.testing import CliRunner

from ktinfra.cli import app
from ktinfra.render import RenderError, render_serve
from ktinfra.render.train import render_train

SEED002 = PLANS / "seed002-qwen3-30b-a3b-serve.json"
SFT_CURRENT = PLANS / "h100-qwen3-30b-a3b-sft-current.json"
SFT_LEGACY = PLANS / "seed002-qwen3-30b-a3b-sft-legacy.json"
TRAIN = {"model_path": "/m/q", "dataset": "d", "dataset_dir": "/data", "output_dir": "/runs/r1"}


def serve_plan() -> dict:
    return json.loads(SEED002.read_text())


def sft_plan(path=SFT_CURRENT) -> dict:
    return json.loads(path.read_text())


INJECTED = ["Qwen3\nLD_PRELOAD=/tmp/evil.so", "Qwen3\rKT_API_KEY=x", "Qwen3\u2028max_steps: 1", 7]


RENDERERS = {  # the env file's comment line (serve), the YAML header (train)
    "serve": (serve_plan, lambda plan: render_serve(plan, name="q", model_path="/m", weight_path="/w")),
    "train": (sft_plan, lambda plan: render_train(plan, name="r1", **TRAIN)),
}


@pytest.mark.parametrize("value", INJECTED)
@pytest.mark.parametrize("key", ["model.name", "stack"])
@pytest.mark.parametrize("renderer", sorted(RENDERERS))
def test_plan_names_that_would_break_the_comment_line_are_refused(renderer, key, value):
    make_plan, render = RENDERERS[renderer]
    plan = make_plan()
    (plan["model"] if key == "model.name" else plan)[key.split(".")[-1]] = value
    with pytest.raises(RenderError, match=f"plan {key} must be one line of text"):
        render(plan)


def test_an_injected_name_on_the_command_line_writes_nothing(tmp_path):
    plan = serve_plan()
    plan["model"]["name"] = "Qwen3\nLD_PRELOAD=/tmp/evil.so"
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    out = tmp_path / "out"
    args = ["render", "serve", "--plan", tmp_path / "plan.json", "--name", "q", "--model-path", "/m"]
    result = CliRunner().invoke(app, [str(a) for a in [*args, "--weight-path", "/w", "--out", out]])
    assert result.exit_code == 1 and result.output.startswith("error: plan model.name must be one line")
    assert result.output.count("\n") == 1 and not out.exists()


def test_ordinary_names_still_render_and_the_header_stays_a_comment():
    plan = sft_plan()
    plan["model"]["name"] = "Qwen/Qwen3-30B-A3B (ünï)"
    recipe = render_train(plan, name="r1", **TRAIN).files["r1.yaml"][0]
    assert recipe.splitlines()[0].startswith("# LLaMA-Factory + KT LoRA recipe for Qwen/Qwen3-30B-A3B (ünï)")
    assert "max_steps" not in yaml.safe_load(recipe)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("lora_rank", -1, "sft.lora_rank must be an integer >= 1, got -1"),
        ("lora_rank", 8.0, "sft.lora_rank must be an integer >= 1, got 8.0"),
        ("cutoff_len", "x", "sft.cutoff_len must be an integer >= 1, got 'x'"),
        ("per_device_train_batch_size", 0, "must be an integer >= 1, got 0"),
        ("gradient_accumulation_steps", True, "must be an integer >= 1, got True"),
        ("dataloader_num_workers", -1, "sft.dataloader_num_workers must be an integer >= 0"),
        ("learning_rate", "fast", "sft.learning_rate must be a number > 0, got 'fast'"),
        ("learning_rate", float("nan"), "sft.learning_rate must be a number > 0, got nan"),
        ("num_train_epochs", 0, "sft.num_train_epochs must be a number > 0"),
        ("lora_alpha", -16, "sft.lora_alpha must be a number > 0"),
        ("lora_dropout", 1.0, r"sft.lora_dropout must be a number in \[0, 1\)"),
        ("warmup_ratio", -0.1, r"sft.warmup_ratio must be a number in \[0, 1\)"),
        ("warmup_steps", -5, "sft.warmup_steps must be a number >= 0"),
        ("bf16", "true", "sft.bf16 must be true or false, got 'true'"),
        ("lora_target", "q_proj v_proj", "sft.lora_target must be a name"),
        ("lora_target", ["q_proj"], "sft.lora_target must be a name"),
        ("lr_scheduler_type", "cosine\nmax_steps: 1", "sft.lr_scheduler_type must be a name"),
    ],
)
def test_recipe_values_llamafactory_cannot_take_are_refused(key, value, message):
    plan = sft_plan()
    plan["sft"][key] = value
    with pytest.raises(RenderError, match=message):
        render_train(plan, name="r1", **TRAIN)


def test_bf16_and_fp16_together_are_refused():
    plan = sft_plan()
    plan["sft"].update(bf16=True, fp16=True)
    with pytest.raises(RenderError, match="bf16 and sft.fp16 are both true"):
        render_train(plan, name="r1", **TRAIN)


def test_good_recipe_values_reach_the_yaml():
    plan = sft_plan(SFT_LEGACY)
    plan["sft"].update(lora_target="q_proj,v_proj", lora_dropout=0.05, warmup_steps=5, max_steps=20)
    plan["sft"].update(dataloader_num_workers=0, fp16=False, lr_scheduler_type="cosine_with_restarts")
    recipe = yaml.safe_load(render_train(plan, name="r1", **TRAIN).files["r1.yaml"][0])
    assert recipe["lora_target"] == "q_proj,v_proj" and recipe["lora_dropout"] == 0.05
    assert recipe["max_steps"] == 20 and recipe["dataloader_num_workers"] == 0
    assert recipe["lr_scheduler_type"] == "cosine_with_restarts" and recipe["warmup_steps"] == 5


@pytest.mark.parametrize(("value", "message"), [(5, "sft.template must be a template name, got 5"),
                                                ("", "plan sft.template must not be empty")])  # fmt: skip
def test_plan_templates_that_are_no_name_are_refused(value, message):
    plan = sft_plan()
    plan["sft"]["template"] = value
    with pytest.raises(RenderError, match=message):
        render_train(plan, name="r1", **TRAIN)


def test_an_empty_gpu_list_is_refused_not_read_as_every_gpu():
    plan = sft_plan()
    plan["sft"]["gpu_indices"] = []
    with pytest.raises(RenderError, match=r"plan sft.gpu_indices must be a list of GPU indices, not \[\]"):
        render_train(plan, name="r1", **TRAIN)


def test_process_count_must_match_the_gpus():
    plan = sft_plan()
    plan["sft"]["gpu_indices"] = [0]
    plan["sft"]["launcher"] = {**(plan["sft"].get("launcher") or {}), "num_processes": 4}
    with pytest.raises(RenderError, match=r"num_processes 4 does not match sft.gpu_indices \[0\]"):
        render_train(plan, name="r1", **TRAIN)
    plan["host"]["gpus"] = [plan["host"]["gpus"][0] | {"index": i} for i in range(4)]  # a 4-GPU host
    plan["sft"]["gpu_indices"] = [0, 1, 2, 3]
    config = yaml.safe_load(render_train(plan, name="r1", **TRAIN).files["r1.accelerate.yaml"][0])
    assert config["num_processes"] == 4


@pytest.mark.parametrize("value", [False, "false", 0])
def test_a_kt_recipe_with_use_kt_off_is_refused(value):
    plan = sft_plan()
    plan["sft"]["kt"]["use_kt"] = value
    with pytest.raises(RenderError, match="plan sft.kt.use_kt must be true"):
        render_train(plan, name="r1", **TRAIN)


def test_a_run_name_that_would_overwrite_another_runs_accelerate_config_is_refused():
    with pytest.raises(RenderError, match="ends in '.accelerate'"):
        render_train(sft_plan(), name="x.accelerate", **TRAIN)
    assert "x.accelerate.yaml" in render_train(sft_plan(), name="x", **TRAIN).files


HUGE = int("9" * 400)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("lora_alpha", HUGE, "sft.lora_alpha must be a number > 0, got 9999"),  # was OverflowError
        ("learning_rate", HUGE, "sft.learning_rate must be a number > 0"),
        ("cutoff_len", HUGE, "sft.cutoff_len must be at most 2147483647, got 9999"),
        ("lora_rank", 2**31, "sft.lora_rank must be at most 2147483647, got 2147483648"),
    ],
)
def test_numbers_of_hundreds_of_digits_are_refused_not_a_traceback(key, value, message):
    plan = sft_plan()
    plan["sft"][key] = value
    with pytest.raises(RenderError, match=message) as caught:
        render_train(plan, name="r1", **TRAIN)
    assert len(str(caught.value)) < 200  # the number is shown cut short


@pytest.mark.parametrize(
    ("path", "key", "value", "message"),
    [
        (
            SFT_LEGACY,
            "kt_optimize_rule",
            None,
            "sft.kt.kt_optimize_rule must be a name, a number or true/false",
        ),
        (
            SFT_LEGACY,
            "kt_optimize_rule",
            "",
            "sft.kt.kt_optimize_rule must be a name, a number or true/false",
        ),
        (SFT_LEGACY, "kt_optimize_rule", 5, "sft.kt.kt_optimize_rule must be a rule file path, got 5"),
        (SFT_LEGACY, "cpu_infer", float("nan"), "sft.kt.cpu_infer must be a name, a number or true/false"),
        (SFT_LEGACY, "chunk_size", "big", "sft.kt.chunk_size must be an integer >= 1, got 'big'"),
        (
            SFT_CURRENT,
            "kt_config",
            {"kt_num_threads": float("nan")},
            "sft.kt.kt_config.kt_num_threads must be",
        ),
        (SFT_CURRENT, "kt_config", {"kt_backend": None}, "sft.kt.kt_config.kt_backend must be"),
    ],
)
def test_kt_values_the_recipe_would_misread_are_refused(path, key, value, message):
    """Before: null became kt_optimize_rule '<LLaMA-Factory>/None', NaN became cpu_infer: .nan."""
    plan = sft_plan(path)
    plan["sft"]["kt"][key] = value
    with pytest.raises(RenderError, match=message.replace("[", r"\[")):
        render_train(plan, name="r1", **TRAIN)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"FOO": None}, "sft.launcher.env.FOO must be a string or a number, got None"),
        ({"BAR": True}, "sft.launcher.env.BAR must be a string or a number, got True"),
        ({"CUDA_VISIBLE_DEVICES": "0,1,2,3"}, "sets CUDA_VISIBLE_DEVICES=0,1,2,3, but ktinfra sets it to 0"),
        ({"USE_KT": "0"}, "sets USE_KT=0, but ktinfra sets it to 1"),
    ],
)
def test_launcher_env_may_not_change_what_ktinfra_sets_or_hold_null(env, message):
    plan = sft_plan()
    plan["sft"]["launcher"] = {"kind": "accelerate", "env": env}
    with pytest.raises(RenderError, match=message):
        render_train(plan, name="r1", **TRAIN)


def test_launcher_env_repeating_what_ktinfra_sets_still_renders():
    plan = sft_plan()
    plan["sft"]["launcher"] = {"kind": "accelerate", "env": {"USE_KT": "1", "HF_HUB_OFFLINE": 1}}
    env = render_train(plan, name="r1", **TRAIN).files["ktinfra-train-r1.env"][0]
    assert 'USE_KT="1"' in env and 'HF_HUB_OFFLINE="1"' in env


@pytest.mark.parametrize("cpus", [True, "banana", 1e400, 0, [0, 1], "0-99999"])
def test_numa_cpus_that_are_no_cpu_list_are_refused(cpus):
    """Before: True became --physcpubind=True, 0 (CPU 0) was dropped as false; numactl failed the start."""
    plan = serve_plan()
    plan["serve"]["numa_cpus"] = cpus
    with pytest.raises(RenderError, match=r'plan serve.numa_cpus must be a CPU list such as "0-13" or null'):
        render_serve(plan, name="q", model_path="/m", weight_path="/w")


@pytest.mark.parametrize(
    ("dataset", "message"),
    [
        ("identity,,alpaca", "has an empty name between commas"),
        (",", "has an empty name between commas"),
        ("identity,alpaca,identity", "names identity twice"),
    ],
)
def test_dataset_lists_llamafactory_would_misread_are_refused(dataset, message):
    with pytest.raises(RenderError, match=message):
        render_train(sft_plan(), name="r1", **{**TRAIN, "dataset": dataset})


@pytest.mark.parametrize(
    ("where", "output_dir"),
    [("--model-path", "/m/q/"), ("--dataset-dir", "/data/."), ("--model-path", "//m/q")],
)
def test_an_output_dir_that_is_the_model_or_the_dataset_dir_is_refused(where, output_dir):
    with pytest.raises(RenderError, match=f"--output-dir must differ from {where}"):
        render_train(sft_plan(), name="r1", **{**TRAIN, "output_dir": output_dir})


@pytest.mark.parametrize(
    ("paths", "message"),
    [
        ({"output_dir": "/m/q/sub"}, "--output-dir /m/q/sub and --model-path /m/q must not lie inside"),
        ({"output_dir": "/data/x/../run/"}, "--output-dir /data/run and --dataset-dir /data must not lie"),
        ({"output_dir": "/m"}, "--output-dir /m and --model-path /m/q must not lie inside one another"),
        ({"dataset_dir": "//runs/r1/data"}, "--output-dir /runs/r1 and --dataset-dir /runs/r1/data must"),
        ({"output_dir": "/"}, "--output-dir / and --model-path /m/q must not lie inside one another"),
    ],
)
def test_an_output_dir_nested_with_the_model_or_the_dataset_dir_is_refused(paths, message, tmp_path):
    """Before: only equal paths were refused; an output inside the model (or around it, or /) rendered."""
    with pytest.raises(RenderError, match=message):
        render_train(sft_plan(), name="r1", **{**TRAIN, **paths})
    args = [f"--{key.replace('_', '-')}={value}" for key, value in {**TRAIN, **paths}.items()]
    args += ["--name", "r1", "--plan", str(SFT_CURRENT), "--out", str(tmp_path / "out")]
    result = CliRunner().invoke(app, ["render", "train", *args])
    assert result.exit_code == 1 and result.stdout == "" and not (tmp_path / "out").exists()
    assert result.stderr.startswith("error: ") and "must not lie inside one another" in result.stderr


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"HF": {"token": "hf_planted0secret"}}, "env.HF must be a string or a number, got a dict (its"),
        (["HF_TOKEN=hf_planted0secret"], "must map variable names to values, not a list (its content"),
    ],
)
def test_a_wrong_launcher_env_value_is_refused_without_showing_it(env, message):
    """Before: the error printed the value, a token nested in a mapping or a KEY=VALUE list with it."""
    plan = sft_plan()
    plan["sft"]["launcher"] = {"kind": "accelerate", "env": env}
    with pytest.raises(RenderError, match=re.escape(message)) as caught:
        render_train(plan, name="r1", **TRAIN)
    assert "hf_planted0secret" not in str(caught.value)
