"""Renderers of the batch jobs: CPU weight conversion, LoRA adapter conversion, LLaMA-Factory training."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import env_layout
import pytest
import yaml
from int8_tree import moe_model, write_tree
from test_render_support import load_fixture_plan

from ktinfra import int8_weights
from ktinfra.render import RenderError
from ktinfra.render.convert import render_convert, render_lora_convert
from ktinfra.render.train import render_train


def env_values(text: str) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))
    return {key: shlex.split(value)[0] for key, value in pairs}


# ---- convert_cpu_weights.py -------------------------------------------------------------------------------


def test_convert_reproduces_seed002_and_takes_threads_from_the_plan():
    """Seed 002 section 4.2.1 ran the converter by hand; threads follow the plan (8 cores, 2 pools)."""
    plan = load_fixture_plan("seed002-qwen3-30b-a3b-serve.json")
    rendered = render_convert(
        model_path="/root/autodl-tmp/Qwen3-30B-A3B",
        output="/root/autodl-tmp/Qwen3-30B-A3B-INT8",
        method="int8",
        plan=plan,
    )
    assert rendered.info["unit"] == "ktinfra-convert@Qwen3-30B-A3B-INT8.service"
    assert rendered.info["argv"][2:] == [
        "--input-path", "/root/autodl-tmp/Qwen3-30B-A3B", "--input-type", "bf16",
        "--output", "/root/autodl-tmp/Qwen3-30B-A3B-INT8", "--quant-method", "int8",
        "--cpuinfer-threads", "8", "--threadpool-count", "2", "--no-merge-safetensor",
    ]  # fmt: skip
    assert rendered.info["argv"][1].endswith("kt-kernel/scripts/convert_cpu_weights.py")
    env = env_values(rendered.files["ktinfra-convert-Qwen3-30B-A3B-INT8.env"][0])
    assert env["KT_CONVERT_ARGS"].split() == rendered.info["argv"][2:]
    # int8: layer folders finished by the manifest kt-kernel 0.7.2 trains from, which is the done marker (a
    # marker file beside it in that directory would make kt-kernel refuse the tree)
    finish = ["/opt/ktinfra/tool/bin/ktinfra", "weights", "manifest", "/root/autodl-tmp/Qwen3-30B-A3B-INT8",
              "--model-path", "/root/autodl-tmp/Qwen3-30B-A3B"]  # fmt: skip
    assert rendered.info["finish_argv"] == finish and env["KT_CONVERT_FINISH"].split() == finish
    assert env["KT_CONVERT_MARKER"] == "/root/autodl-tmp/Qwen3-30B-A3B-INT8/kt-weight-manifest.json"
    unit = rendered.files["ktinfra-convert@.service"][0]
    assert "Type=oneshot" in unit and "ExecCondition=" in unit and "TimeoutStartSec=infinity" in unit
    posts = [line for line in unit.splitlines() if line.startswith("ExecStartPost=")]
    assert posts[0].endswith(" $KT_CONVERT_FINISH")
    assert posts[1].endswith(" ${KT_CONVERT_MARKER} ${KT_CONVERT_SOURCE}")


def test_convert_int4_stays_merged_with_its_own_marker():
    """AMXINT4's merged safetensors are what kt-kernel's SFT loader reads (blk.N keys): no manifest step."""
    rendered = render_convert(
        model_path="/m/q", output="/m/q-INT4", method="int4", cpuinfer_threads=8, threadpool_count=1,
        ktinfra="/usr/local/bin/ktinfra",
    )  # fmt: skip
    assert "--no-merge-safetensor" not in rendered.info["argv"] and rendered.info["finish_argv"] == []
    env = env_values(rendered.files["ktinfra-convert-q-INT4.env"][0])
    assert env["KT_CONVERT_FINISH"] == "" and env["KT_CONVERT_MARKER"] == "/m/q-INT4/.ktinfra-convert-done"


def test_convert_int8_runs_the_ktinfra_given():
    rendered = render_convert(
        model_path="/m/q", output="/m/q-INT8", method="int8", cpuinfer_threads=8, threadpool_count=1,
        ktinfra="/usr/local/bin/ktinfra",
    )  # fmt: skip
    assert rendered.info["finish_argv"][:3] == ["/usr/local/bin/ktinfra", "weights", "manifest"]
    with pytest.raises(RenderError, match="--ktinfra must be an absolute path"):
        render_convert(
            model_path="/m/q", output="/m/q-INT8", method="int8", cpuinfer_threads=8, threadpool_count=1,
            ktinfra="ktinfra",
        )  # fmt: skip


def test_convert_fp8_model_uses_the_plans_native_dtype():
    plan = load_fixture_plan("h100-qwen3-30b-a3b-serve.json")
    plan["model"]["native_dtype"] = "fp8"
    plan["serve"]["kt_method"] = "AMXINT4"
    rendered = render_convert(
        model_path="/m/DeepSeek-V3", output="/m/DeepSeek-V3-INT4", method="int4", plan=plan
    )
    argv = rendered.info["argv"]
    assert argv[argv.index("--input-type") + 1] == "fp8"
    assert argv[argv.index("--cpuinfer-threads") + 1] == "14"  # the plan's kt_cpuinfer


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"method": "int3"}, "--method 'int3' is not one of int8, int4"),
        ({"model_path": None}, "--model-path is required"),
        ({"output": "rel/out"}, "--output must be an absolute path"),
        ({"output": "/m/q/"}, "--output must differ from --model-path"),
        ({"output": "/m/q/../q"}, "--output must differ from --model-path"),
        ({"output": "/m//q"}, "--output must differ from --model-path"),
        ({"output": "//m/q"}, "--output must differ from --model-path"),  # Linux reads // as /
        ({"output": "/m/q/int8"}, "--output /m/q/int8 and --model-path /m/q must not lie inside one another"),
        ({"output": "/m/q/x/../int8/"}, "--output /m/q/int8 and --model-path /m/q must not lie inside"),
        ({"output": "/m"}, "--output /m and --model-path /m/q must not lie inside one another"),
        ({"output": "/"}, "must not lie inside one another"),
        ({"method": None}, "--method is required without --plan"),
        ({"cpuinfer_threads": None}, "converter threads unknown"),
        ({"input_type": "int8"}, "--input-type 'int8' is not one of"),
        # upstream main(): int8/int4 need fp8/fp16/bf16 input; before, awq rendered a unit that always failed
        ({"input_type": "awq"}, "--input-type awq: convert_cpu_weights.py converts AWQ input only with"),
    ],
)
def test_convert_bad_inputs(kwargs, message):
    args = {"model_path": "/m/q", "output": "/m/q-int8", "method": "int8", "cpuinfer_threads": 8}
    args["threadpool_count"] = 1
    args.update(kwargs)
    with pytest.raises(RenderError, match=message):
        render_convert(**args)


def test_convert_output_beside_the_model_is_normalized():
    args = {"model_path": "/m/q/", "method": "int8", "cpuinfer_threads": 8, "threadpool_count": 1}
    rendered = render_convert(output="/m/x/../q-int8/", **args)
    argv = rendered.info["argv"]
    assert (argv[argv.index("--input-path") + 1], argv[argv.index("--output") + 1]) == ("/m/q", "/m/q-int8")
    assert rendered.info["kt_weight_path"] == "/m/q-int8"


def _noamx_plan() -> dict:
    """The real planner on a host without AMX (seed 000's 8352V + 4090): LLAMAFILE on GGUF experts."""
    from ktinfra import planner

    facts = planner.load_facts(Path(__file__).parents[1] / "fixtures" / "facts" / "xeon8352v-4090-noamx.json")
    return planner.plan(facts, "Qwen3-30B-A3B", "serve")


def test_convert_method_must_fit_the_plan():
    amx8 = load_fixture_plan("h100-qwen3-30b-a3b-serve.json")
    args = {"model_path": "/m/q", "output": "/m/q-int"}
    with pytest.raises(RenderError, match="--method int4 contradicts the plan's kt_method AMXINT8"):
        render_convert(method="int4", plan=amx8, **args)
    assert "int8" in render_convert(plan=amx8, **args).info["argv"]  # taken from the plan
    amx8["serve"]["kt_method"] = "AMXINT4"
    assert render_convert(plan=amx8, **args).info["argv"][-5] == "int4"
    llamafile = _noamx_plan()
    assert llamafile["serve"]["kt_method"] == "LLAMAFILE"
    with pytest.raises(
        RenderError, match="kt_method 'LLAMAFILE' does not read convert_cpu_weights.py output"
    ):
        render_convert(method="int8", plan=llamafile, **args)


# ---- LoRA adapter conversion ------------------------------------------------------------------------------


def test_lora_convert_current_uses_kt_kernels_converter():
    rendered = render_lora_convert(adapter="/runs/med/", output="/srv/lora/med", model_path="/models/Qwen3")
    assert rendered.info["argv"][1].endswith("kt-kernel/scripts/convert_kt_to_sglang_adapter.py")
    assert rendered.info["argv"][2:] == [
        "/runs/med", "/srv/lora/med", "--base-model-name-or-path", "/models/Qwen3",
    ]  # fmt: skip
    assert rendered.info["unit"] == "ktinfra-lora-convert@med.service"
    assert rendered.info["lora_path"] == "/srv/lora/med"


def test_lora_convert_deletes_an_existing_output_only_when_asked():
    """kt-kernel 0.7.2's converter rmtree's a non-empty output given --overwrite: a shared dir would go."""
    args = {"adapter": "/runs/med", "output": "/srv/lora", "model_path": "/models/Qwen3"}
    assert "--overwrite" not in render_lora_convert(**args).info["argv"]
    assert render_lora_convert(**args, overwrite=True).info["argv"][-1] == "--overwrite"


def test_lora_convert_legacy_uses_the_sglang_fork_script():
    rendered = render_lora_convert(adapter="/runs/med", output="/srv/lora/med-sg", legacy=True, name="med")
    assert rendered.info["argv"][1] == f"{env_layout.checkout('sglang')}/convert_lora.py"
    assert rendered.info["argv"][2:] == ["/runs/med", "/srv/lora/med-sg"]
    env = env_values(rendered.files["ktinfra-lora-convert-med.env"][0])
    assert env["KT_LORA_CONVERT_ARGS"] == "/runs/med /srv/lora/med-sg"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, r"--model-path \(the base model"),
        ({"model_path": "/m", "output": "/runs/med"}, "--output must differ from --adapter"),
        ({"model_path": "/m", "output": "/runs/x/../med/"}, "--output must differ from --adapter"),
        ({"model_path": "/m", "output": "/runs/med/sglang"}, "must not lie inside one another"),
        ({"model_path": "/m", "output": "/runs"}, "must not lie inside one another"),
        ({"legacy": True, "lora_alpha": 16.0}, "--lora-alpha and --overwrite apply to the current converter"),
        ({"legacy": True, "overwrite": True}, "--lora-alpha and --overwrite apply to the current converter"),
        # before: the legacy converter takes no base model; --model-path was dropped without a word
        ({"legacy": True, "model_path": "/m"}, "--model-path, --lora-alpha and --overwrite apply to the"),
        ({"model_path": "/m", "lora_alpha": -1.0}, "--lora-alpha must be a finite number above 0"),
    ],
)
def test_lora_convert_bad_inputs(kwargs, message):
    args = {"adapter": "/runs/med", "output": "/srv/lora/med"}
    args.update(kwargs)
    with pytest.raises(RenderError, match=message):
        render_lora_convert(**args)


# ---- LLaMA-Factory training -------------------------------------------------------------------------------


def _train(plan_name: str, **overrides):
    args = {
        "name": "med-r8",
        "model_path": "/models/Qwen3-30B-A3B",
        "dataset": "identity,alpaca_en_demo",
        "dataset_dir": "/data/llamafactory",
        "output_dir": "/runs/med-r8",
    }
    args.update(overrides)
    return render_train(load_fixture_plan(plan_name), **args)


def test_train_current_stack_recipe_and_launcher():
    rendered = _train("h100-qwen3-30b-a3b-sft-current.json")
    recipe = yaml.safe_load(rendered.files["med-r8.yaml"][0])
    assert recipe["model_name_or_path"] == "/models/Qwen3-30B-A3B"
    assert recipe["template"] == "qwen3"
    assert recipe["dataset_dir"] == "/data/llamafactory"
    assert (recipe["stage"], recipe["finetuning_type"], recipe["lora_rank"], recipe["lora_target"]) == (
        "sft", "lora", 8, "all",
    )  # fmt: skip
    assert recipe["overwrite_output_dir"] is False
    assert recipe["use_kt"] is True
    assert recipe["kt_config"]["kt_backend"] == "AMXBF16"
    assert recipe["kt_config"]["kt_num_threads"] == 14  # the plan's: 16 cores, 2 kept free
    assert "kt_optimize_rule" not in recipe
    accelerate = yaml.safe_load(rendered.files["med-r8.accelerate.yaml"][0])
    assert accelerate["distributed_type"] == "FSDP" and accelerate["num_processes"] == 1
    assert accelerate["fsdp_config"]["fsdp_version"] == 2
    assert not any(key.startswith("kt") for key in accelerate)
    env = env_values(rendered.files["ktinfra-train-med-r8.env"][0])
    assert env == {
        "USE_KT": "1",
        "ACCELERATE_USE_KT": "true",
        "KT_TRAIN_CONFIG": "/etc/ktinfra/train/med-r8.yaml",
        "KT_ACCELERATE_CONFIG": "/etc/ktinfra/train/med-r8.accelerate.yaml",
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "CUDA_VISIBLE_DEVICES": "0",
    }
    unit = rendered.files["ktinfra-train@.service"][0]
    assert (
        "ExecStart=/opt/kt/envs/kt-sft/bin/accelerate launch --config_file ${KT_ACCELERATE_CONFIG} "
        "-m llamafactory.cli train ${KT_TRAIN_CONFIG}" in unit
    )


def test_train_legacy_stack_recipe_and_launcher():
    rendered = _train("seed002-qwen3-30b-a3b-sft-legacy.json", python="/opt/conda/envs/kt-sft/bin/python")
    recipe = yaml.safe_load(rendered.files["med-r8.yaml"][0])
    assert recipe["template"] == "qwen3"  # the plan's sft.template (the catalog's, for Qwen3-30B-A3B)
    assert recipe["kt_optimize_rule"] == (
        f"{env_layout.checkout('LLaMA-Factory')}/examples/kt_optimize_rules/Qwen3Moe-sft-amx.yaml"
    )
    assert (recipe["use_kt"], recipe["cpu_infer"], recipe["chunk_size"]) == (True, 8, 8192)
    assert (recipe["per_device_train_batch_size"], recipe["gradient_accumulation_steps"]) == (2, 4)
    assert recipe["cutoff_len"] == 2048
    assert "kt_config" not in recipe
    assert "med-r8.accelerate.yaml" not in rendered.files
    unit = rendered.files["ktinfra-train@.service"][0]
    assert "ExecStart=/opt/conda/envs/kt-sft/bin/llamafactory-cli train ${KT_TRAIN_CONFIG}" in unit
    assert rendered.info["argv"] == [
        "/opt/conda/envs/kt-sft/bin/llamafactory-cli", "train", "/etc/ktinfra/train/med-r8.yaml",
    ]  # fmt: skip


def _no_template(architecture: str):
    """A plan without sft.template (the planner's, which render follows) for `architecture`."""

    def change(plan: dict) -> None:
        plan["model"] = {"architecture": architecture}
        del plan["sft"]["template"]

    return change


def test_train_template_without_one_in_the_plan_follows_the_stack_generation():
    """Plans without sft.template (older planners) get the KT examples' template of their generation."""
    for plan_name, template in (
        ("h100-qwen3-30b-a3b-sft-current.json", "qwen3"),
        ("seed002-qwen3-30b-a3b-sft-legacy.json", "qwen3_nothink"),
    ):
        plan = load_fixture_plan(plan_name)
        del plan["sft"]["template"]
        args = {"name": "r", "model_path": "/m", "dataset": "d", "dataset_dir": "/d", "output_dir": "/o"}
        assert yaml.safe_load(render_train(plan, **args).files["r.yaml"][0])["template"] == template


@pytest.mark.parametrize(
    ("plan_name", "change", "overrides", "message"),
    [
        ("h100-qwen3-30b-a3b-serve.json", {}, {}, "needs a sft plan, got a serve plan"),
        ("h100-qwen3-30b-a3b-sft-current.json", {"stack_generation": "next"}, {}, "stack_generation 'next'"),
        ("h100-qwen3-30b-a3b-sft-current.json", _no_template("llama"), {}, "pass --template"),
        ("h100-qwen3-30b-a3b-sft-current.json", {}, {"dataset_dir": "data"}, "--dataset-dir must be an abs"),
        ("h100-qwen3-30b-a3b-sft-current.json", {}, {"dataset": "a b"}, "--dataset 'a b' contains ' '"),
        (
            "seed002-qwen3-30b-a3b-sft-legacy.json",
            {"stack_generation": "current"},
            {},
            "must hold a kt_config",
        ),
    ],
)
def test_train_bad_inputs(plan_name, change, overrides, message):
    plan = load_fixture_plan(plan_name)
    if callable(change):
        change(plan)
    else:
        plan.update(change)
    args = {"name": "r", "model_path": "/m", "dataset": "d", "dataset_dir": "/d", "output_dir": "/o"}
    args.update(overrides)
    with pytest.raises(RenderError, match=message):
        render_train(plan, **args)


def test_train_legacy_refuses_a_weight_path_its_llamafactory_does_not_know():
    plan = load_fixture_plan("seed002-qwen3-30b-a3b-sft-legacy.json")
    args = {"name": "r", "model_path": "/m", "dataset": "d", "dataset_dir": "/d", "output_dir": "/o"}
    with pytest.raises(RenderError, match="kt_weight_path .--weight-path. is a current-stack key"):
        render_train(plan, **args, weight_path="/w")
    plan["sft"]["kt"]["kt_weight_path"] = "/w"
    with pytest.raises(RenderError, match="current-stack key"):
        render_train(plan, **args)
    with pytest.raises(RenderError, match="--weight-format goes with --weight-path"):
        render_train(load_fixture_plan("seed002-qwen3-30b-a3b-sft-legacy.json"), **args, weight_format="int8")
    current = _train("h100-qwen3-30b-a3b-sft-current.json", weight_path="/w-INT8")
    assert yaml.safe_load(current.files["med-r8.yaml"][0])["kt_weight_path"] == "/w-INT8"


INT8_EXPERTS = {"kt_backend": "INT8", "kt_expert_weight_format": "int8"}


@pytest.mark.parametrize(
    ("weight_path", "weight_format", "kt_config"),
    [
        ("/store/cpu-weights/Qwen3-30B-A3B-INT8", None, INT8_EXPERTS),
        ("/store/cpu-weights/Qwen3-30B-A3B-int4/", None, {"kt_backend": "AMXINT4"}),
        ("/data/experts", "int8", INT8_EXPERTS),
        ("/data/experts-INT8", "int4", {"kt_backend": "AMXINT4"}),  # what was asked wins over the name
    ],
)  # fmt: skip
def test_converted_experts_train_on_the_backend_they_were_quantized_for(
    weight_path, weight_format, kt_config
):
    """kt-kernel 0.7.2 loads a converted _layer_N/_numa_0/*.kt directory as the backend's own layout: INT8
    experts under the plan's AMXBF16/bf16 would be read as BF16 (sft/amx.py); sft/config.py pairs int8 with
    INT8, and has no int4 format (AMXINT4 alone)."""
    rendered = _train(
        "h100-qwen3-30b-a3b-sft-current.json", weight_path=weight_path, weight_format=weight_format
    )
    recipe = yaml.safe_load(rendered.files["med-r8.yaml"][0])
    got = {k: v for k, v in recipe["kt_config"].items() if k in ("kt_backend", "kt_expert_weight_format")}
    assert got == kt_config and recipe["kt_weight_path"] == weight_path
    assert recipe["kt_config"]["kt_num_threads"] > 0  # the plan's other KT keys are kept


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"weight_path": "/data/experts"}, "unknown format: pass --weight-format int8 or int4"),
        ({"weight_path": "/data/experts", "weight_format": "bf16"}, "--weight-format must be int8 or int4"),
        ({"weight_format": "int8"}, "--weight-format names the format of --weight-path: give both"),
    ],
)
def test_converted_experts_of_an_unknown_format_are_refused(overrides, message):
    with pytest.raises(RenderError, match=message):
        _train("h100-qwen3-30b-a3b-sft-current.json", **overrides)


def test_legacy_defaults_are_the_checkouts_kt_python_env_makes():
    """Review repro: render's legacy defaults were /opt/ktinfra/src/LLaMA-Factory (kt_optimize_rule) and
    /opt/ktinfra/src/sglang/convert_lora.py, where nothing checks them out; kt_python_env clones the legacy
    profile's git sources to kt_python_env_src_dir/<name>: /opt/kt/src/llamafactory and /opt/kt/src/sglang.
    --src-dir (the role's kt_python_env_src_dir) moves both; --llamafactory-dir and --script still win."""
    rule = "examples/kt_optimize_rules/Qwen3Moe-sft-amx.yaml"
    for root, extra in ((None, {}), ("/srv/src", {"src_dir": "/srv/src"})):
        rendered = _train("seed002-qwen3-30b-a3b-sft-legacy.json", **extra)
        recipe = yaml.safe_load(rendered.files["med-r8.yaml"][0])
        assert recipe["kt_optimize_rule"] == f"{env_layout.checkout('LLaMA-Factory', root)}/{rule}"
        converted = render_lora_convert(adapter="/runs/med", output="/srv/lora/med", legacy=True, **extra)
        assert converted.info["argv"][1] == f"{env_layout.checkout('sglang', root)}/convert_lora.py"
    own = _train("seed002-qwen3-30b-a3b-sft-legacy.json", llamafactory_dir="/lf", src_dir="/srv/src")
    assert yaml.safe_load(own.files["med-r8.yaml"][0])["kt_optimize_rule"] == f"/lf/{rule}"
    mine = render_lora_convert(adapter="/a", output="/b", legacy=True, script="/c.py", src_dir="/srv/src")
    assert mine.info["argv"][1] == "/c.py"
    with pytest.raises(RenderError, match="--src-dir must be an absolute path"):
        render_lora_convert(adapter="/a", output="/b", legacy=True, src_dir="src")


def test_legacy_profile_pins_the_llamafactory_its_recipe_fits():
    """main dropped kt_optimize_rule/cpu_infer/chunk_size: a moving ref would break legacy recipes."""
    from ktinfra import profiles

    git = profiles.env_spec(profiles.load_profile("kt-0.4-autodl"), "sft")["git"]
    ref = next(g["ref"] for g in git if g["name"] == "llamafactory")
    assert re.fullmatch(r"[0-9a-f]{40}", ref), ref


def test_train_legacy_plan_without_its_kt_keys_is_refused():
    plan = load_fixture_plan("seed002-qwen3-30b-a3b-sft-legacy.json")
    del plan["sft"]["kt"]["chunk_size"]
    with pytest.raises(RenderError, match="legacy plan sft.kt lacks chunk_size"):
        render_train(plan, name="r", model_path="/m", dataset="d", dataset_dir="/d", output_dir="/o")


@pytest.mark.parametrize(
    "plan_name, expected",
    [
        # transformers-kt 5.6 logs warmup_ratio as deprecated; a float warmup_steps < 1 is the ratio
        ("h100-qwen3-30b-a3b-sft-current.json", {"warmup_steps": 0.1}),
        # transformers 4.57 (LLaMA-Factory 0.9.4) has only an integer warmup_steps
        ("seed002-qwen3-30b-a3b-sft-legacy.json", {"warmup_ratio": 0.1}),
    ],
)
def test_train_warmup_is_spelled_the_way_each_stacks_transformers_reads_it(plan_name, expected):
    recipe = yaml.safe_load(_train(plan_name).files["med-r8.yaml"][0])
    assert {key: recipe[key] for key in recipe if key.startswith("warmup")} == expected


def test_train_warmup_from_the_plan_replaces_the_default():
    plan = load_fixture_plan("h100-qwen3-30b-a3b-sft-current.json")
    plan["sft"]["warmup_ratio"] = 0.05
    args = {"name": "r", "model_path": "/m", "dataset": "d", "dataset_dir": "/d", "output_dir": "/o"}
    recipe = yaml.safe_load(render_train(plan, **args).files["r.yaml"][0])
    assert {key: recipe[key] for key in recipe if key.startswith("warmup")} == {"warmup_ratio": 0.05}


@pytest.mark.parametrize(
    "plan_name", ["h100-qwen3-30b-a3b-sft-current.json", "seed002-qwen3-30b-a3b-sft-legacy.json"]
)
def test_kimi_k2_gets_no_deepseek_template(plan_name):
    """Kimi-K2 chats as <|im_user|>user<|im_middle|>...<|im_end|>, not as DeepSeek: with no template in the
    plan (the planner says "set `template` yourself") the renderer asks for one instead of guessing."""
    plan = load_fixture_plan(plan_name)
    plan["model"]["architecture"], plan["sft"]["template"] = "kimi_k2", None
    args = {"name": "r", "model_path": "/m", "dataset": "d", "dataset_dir": "/d", "output_dir": "/o"}
    with pytest.raises(RenderError, match="no LLaMA-Factory template known for architecture 'kimi_k2'"):
        render_train(plan, **args)
    assert yaml.safe_load(render_train(plan, **args, template="moonlight").files["r.yaml"][0])[
        "template"
    ] == ("moonlight")


def test_int8_experts_on_this_machine_need_their_manifest_and_pools(tmp_path):
    """kt-kernel 0.7.2 validates kt-weight-manifest.json (pools included) before it loads INT8 experts: a
    tree without it, a merged output, or one split over other pools fails while the model loads. Rendered on
    the host that has the tree, that is said here; a path not on this machine is not checked."""
    model = moe_model(tmp_path / "m")
    tree = write_tree(tmp_path / "m-INT8", numa=1)
    with pytest.raises(RenderError, match=r"has no kt-weight-manifest.json: kt-kernel trains from INT8"):
        _train("h100-qwen3-30b-a3b-sft-current.json", weight_path=str(tree))
    int8_weights.write_manifest(tree, model)
    rendered = _train("h100-qwen3-30b-a3b-sft-current.json", weight_path=str(tree))
    assert yaml.safe_load(rendered.files["med-r8.yaml"][0])["kt_config"]["kt_backend"] == "INT8"
    two = write_tree(tmp_path / "two-INT8", numa=2)
    int8_weights.write_manifest(two, model)
    with pytest.raises(RenderError, match="split over 2 NUMA pools, the plan trains with 1 "):
        _train("h100-qwen3-30b-a3b-sft-current.json", weight_path=str(two))
    int4 = tmp_path / "m-INT4"  # AMXINT4 reads merged shards: nothing to check
    int4.mkdir()
    assert _train("h100-qwen3-30b-a3b-sft-current.json", weight_path=str(int4))
