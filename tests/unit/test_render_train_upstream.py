"""render train against what the stacks' upstream code accepts (llamafactory-kt 0.9.6.dev0, transformers-kt
5.6, kt-kernel 0.7.2 sft/; LLaMA-Factory 0.9.4 for the legacy stack)."""

from __future__ import annotations

import pytest
import yaml
from int8_tree import moe_model, write_tree
from test_render_support import load_fixture_plan

from ktinfra import int8_weights
from ktinfra.render import RenderError
from ktinfra.render.train import render_train

CURRENT = "h100-qwen3-30b-a3b-sft-current.json"
LEGACY = "seed002-qwen3-30b-a3b-sft-legacy.json"
ARGS = {"name": "r", "model_path": "/m", "dataset": "d", "dataset_dir": "/d", "output_dir": "/o"}


def _render(plan: dict, **overrides):
    return render_train(plan, **{**ARGS, **overrides})


@pytest.mark.parametrize("plan_name", [CURRENT, LEGACY])
def test_a_plans_fp16_replaces_the_bf16_default(plan_name):
    """transformers' TrainingArguments raises "At most one of fp16 and bf16 can be True" (training_args.py):
    a plan asking for fp16 alone got the default bf16: true beside it, a recipe no run could start."""
    plan = load_fixture_plan(plan_name)
    del plan["sft"]["bf16"]
    plan["sft"]["fp16"] = True
    rendered = _render(plan)
    recipe = yaml.safe_load(rendered.files["r.yaml"][0])
    assert (recipe["fp16"], recipe["bf16"]) == (True, False)
    if plan_name == CURRENT:  # accelerate's config asks for the same precision
        accelerate = yaml.safe_load(rendered.files["r.accelerate.yaml"][0])
        assert accelerate["mixed_precision"] == "fp16"


def test_accelerate_mixed_precision_follows_the_recipe():
    """transformers takes ACCELERATE_MIXED_PRECISION (from the accelerate config) when the recipe sets neither
    fp16 nor bf16: the config must then say "no", not bf16."""
    plan = load_fixture_plan(CURRENT)
    plan["sft"]["bf16"] = False
    rendered = _render(plan)
    recipe = yaml.safe_load(rendered.files["r.yaml"][0])
    assert (recipe.get("fp16", False), recipe["bf16"]) == (False, False)
    assert yaml.safe_load(rendered.files["r.accelerate.yaml"][0])["mixed_precision"] == "no"
    planned = _render(load_fixture_plan(CURRENT))
    assert yaml.safe_load(planned.files["r.accelerate.yaml"][0])["mixed_precision"] == "bf16"


def _pools(tp_enabled: bool | None, count: int) -> dict:
    plan = load_fixture_plan(CURRENT)
    config = plan["sft"]["kt"]["kt_config"]
    config["kt_threadpool_count"] = count
    if tp_enabled is None:
        del config["kt_tp_enabled"]
    else:
        config["kt_tp_enabled"] = tp_enabled
    return plan


def test_int8_experts_are_split_over_the_pools_kt_kernel_trains_with(tmp_path):
    """kt-kernel 0.7.2 validates an INT8 tree's manifest against `kt_threadpool_count if kt_tp_enabled else 1`
    (sft/wrapper.py; kt_tp_enabled defaults to false in sft/config.py). Render compared it with
    kt_threadpool_count alone: with TP off it refused the 1-pool tree kt-kernel loads and took the 2-pool
    tree kt-kernel refuses."""
    model = moe_model(tmp_path / "m")
    one, two = write_tree(tmp_path / "one-INT8", numa=1), write_tree(tmp_path / "two-INT8", numa=2)
    for tree in (one, two):
        int8_weights.write_manifest(tree, model)
    for tp_enabled in (False, None):  # TP off, said or by default: one pool
        recipe = yaml.safe_load(_render(_pools(tp_enabled, 2), weight_path=str(one)).files["r.yaml"][0])
        assert recipe["kt_weight_path"] == str(one)
        with pytest.raises(RenderError, match="split over 2 NUMA pools, the plan trains with 1 "):
            _render(_pools(tp_enabled, 2), weight_path=str(two))
    assert _render(_pools(True, 2), weight_path=str(two))
    with pytest.raises(RenderError, match="split over 1 NUMA pools, the plan trains with 2 "):
        _render(_pools(True, 2), weight_path=str(one))


def _kt(plan_name: str, change) -> dict:
    plan = load_fixture_plan(plan_name)
    change(plan["sft"])
    return plan


@pytest.mark.parametrize(
    ("plan_name", "change", "message"),
    [
        # HfArgumentParser refuses a key no dataclass has (llamafactory-kt parser.py, no ALLOW_EXTRA_ARGS)
        (
            CURRENT,
            lambda s: s["kt"].update(kt_optimize_rule="r.yaml"),
            r"sft.kt.kt_optimize_rule is not a KT",
        ),
        (
            LEGACY,
            lambda s: s["kt"].update(kt_config={"kt_backend": "AMXBF16"}),
            r"sft.kt.kt_config is not a KT",
        ),
        # a key of another section would replace that one (the YAML's last duplicate wins)
        (CURRENT, lambda s: s["kt"].update(cutoff_len=4096), r"sft.kt.cutoff_len is not a KT argument"),
        # llamafactory-kt _KT_DERIVED_KEYS: "These `kt_config` values are derived from LLaMA-Factory ..."
        (CURRENT, lambda s: s["kt"]["kt_config"].update(kt_lora_rank=8), r"kt_config.kt_lora_rank is not a"),
        (
            CURRENT,
            lambda s: s["kt"]["kt_config"].update(kt_weight_path="/w"),
            r"kt_config.kt_weight_path is not",
        ),
        # kt-kernel KTConfig._validated_mapping: "Unknown KTConfig fields" (the old accelerate examples' key)
        (
            CURRENT,
            lambda s: s["kt"]["kt_config"].update(lora_rank=8),
            r"kt_config.lora_rank is not a kt_config",
        ),
        # KTConfig.__post_init__: unknown kt_backend / kt_expert_weight_format / kt_weight_lifecycle
        (CURRENT, lambda s: s["kt"]["kt_config"].update(kt_backend="AMXBF17"), r"kt_backend must be one of"),
        (
            CURRENT,
            lambda s: s["kt"]["kt_config"].update(kt_expert_weight_format="int16"),
            r"format must be one",
        ),
        (
            CURRENT,
            lambda s: s["kt"]["kt_config"].update(kt_weight_lifecycle="lazy"),
            r"lifecycle must be one",
        ),
        (
            CURRENT,
            lambda s: s["kt"]["kt_config"].update(kt_num_threads=0),
            r"kt_num_threads must be an integer",
        ),
        (
            CURRENT,
            lambda s: s["kt"]["kt_config"].update(kt_tp_enabled="yes"),
            r"kt_tp_enabled must be true or",
        ),
        # the unit runs in /var/lib/ktinfra/train/RUN: a relative path would be read from there
        (
            CURRENT,
            lambda s: s["kt"].update(kt_weight_path="w-INT8"),
            r"sft.kt.kt_weight_path must be an absolute",
        ),
        (
            CURRENT,
            lambda s: s["kt"].update(kt_non_expert_weight_path="cache"),
            r"kt_non_expert_weight_path must be an absolute",
        ),
        # llamafactory-kt: Literal retain/recompute; recompute without GPU checkpointing raises
        (CURRENT, lambda s: s["kt"].update(kt_cpu_activation="keep"), r"must be retain or recompute"),
        (
            CURRENT,
            lambda s: (
                s.update(disable_gradient_checkpointing=True) or s["kt"].update(kt_cpu_activation="recompute")
            ),
            r"recompute needs GPU gradient checkpointing",
        ),
    ],
)
def test_kt_keys_the_stack_would_refuse_are_refused_before_anything_is_written(plan_name, change, message):
    with pytest.raises(RenderError, match=message):
        _render(_kt(plan_name, change))


@pytest.mark.parametrize(
    ("plan_name", "change", "key", "value"),
    [
        (CURRENT, lambda s: s["kt"].update(kt_cpu_activation="retain"), "kt_cpu_activation", "retain"),
        (CURRENT, lambda s: s["kt"]["kt_config"].update(enabled=True), "kt_config", None),
        (LEGACY, lambda s: s["kt"].update(kt_maxlen=8192), "kt_maxlen", 8192),
    ],
)
def test_kt_keys_the_stack_takes_pass_through(plan_name, change, key, value):
    """What the stack's LLaMA-Factory takes passes as the plan has it (llamafactory-kt drops kt_config's
    `enabled: true`, the old accelerate examples' transport key)."""
    plan = _kt(plan_name, change)
    recipe = yaml.safe_load(_render(plan).files["r.yaml"][0])
    assert recipe[key] == (plan["sft"]["kt"][key] if value is None else value)


def _config(**keys):
    return lambda s: s["kt"]["kt_config"].update(keys)


@pytest.mark.parametrize(
    ("change", "overrides", "message"),
    [
        # KTConfig: "kt_expert_weight_format='int8' conflicts with kt_backend='AMXBF16'"
        (
            _config(kt_expert_weight_format="int8"),
            {},
            "kt_expert_weight_format int8 does not go with kt_backend",
        ),
        # KTConfig: "INT8 SFT requires kt_weight_path pointing to pre-quantized .kt weights"
        (_config(kt_backend="INT8", kt_expert_weight_format="int8"), {}, "only with a kt_weight_path"),
        # KTConfig: "INT8 SFT requires kt_share_backward_bb=true" / "kt_num_gpu_experts=0" / no LoRA experts
        (
            _config(kt_share_backward_bb=False),
            {"weight_path": "/w-INT8"},
            "only with kt_share_backward_bb: true",
        ),
        (_config(kt_num_gpu_experts=2), {"weight_path": "/w-INT8"}, "only with kt_num_gpu_experts: 0"),
        (
            lambda s: s["kt"].update(kt_use_lora_experts=True),
            {"weight_path": "/w-INT8"},
            "only with no kt_use_lora_experts",
        ),
        # KTConfig: "kt_non_expert_weight_path is supported only with kt_expert_weight_format='int8' ..."
        (
            lambda s: s["kt"].update(kt_non_expert_weight_path="/c"),
            {},
            "kt_non_expert_weight_path goes with int8",
        ),
    ],
)
def test_expert_formats_kt_kernel_refuses_are_refused(change, overrides, message):
    with pytest.raises(RenderError, match=message):
        _render(_kt(CURRENT, change), **overrides)


def test_int8_experts_with_their_non_expert_cache_pass():
    """LLaMA-Factory examples/ktransformers/train_lora/deepseek_v3_int8_lora_sft_kt.yaml: INT8 experts from
    kt_weight_path beside a kt_non_expert_weight_path."""
    plan = _kt(CURRENT, lambda s: s["kt"].update(kt_non_expert_weight_path="/cache"))
    recipe = yaml.safe_load(_render(plan, weight_path="/w-INT8").files["r.yaml"][0])
    assert (recipe["kt_weight_path"], recipe["kt_non_expert_weight_path"]) == ("/w-INT8", "/cache")
    assert recipe["kt_config"]["kt_expert_weight_format"] == "int8"


@pytest.mark.parametrize("option", ["template", "weight_path", "weight_format"])
def test_an_empty_option_is_refused_not_read_as_left_out(option):
    """`--weight-path ''` rendered a recipe without kt_weight_path (the run trained from the BF16 checkpoint
    instead of the converted experts asked for) and `--template ''` took the plan's template."""
    with pytest.raises(RenderError, match=f"--{option.replace('_', '-')} is empty"):
        _render(load_fixture_plan(CURRENT), **{option: ""})


def test_an_ephemeral_int8_tree_is_not_asked_for_the_persistent_manifest(tmp_path):
    """kt-kernel 0.7.2 validates kt-weight-manifest.json only for persistent INT8 weights; an ephemeral tree
    is opened by its own kt-ephemeral-manifest.json (sft/wrapper.py, sft/ephemeral.py)."""
    tree = write_tree(tmp_path / "eph-INT8", numa=1)
    with pytest.raises(RenderError, match="has no kt-weight-manifest.json"):
        _render(load_fixture_plan(CURRENT), weight_path=str(tree))
    plan = _kt(CURRENT, _config(kt_weight_lifecycle="ephemeral"))
    recipe = yaml.safe_load(_render(plan, weight_path=str(tree)).files["r.yaml"][0])
    assert recipe["kt_config"]["kt_weight_lifecycle"] == "ephemeral"


@pytest.mark.parametrize(
    ("weight_path", "output_dir", "cache"),
    [
        ("/store/q-INT8", "/store/q-INT8/run", None),  # checkpoints inside the expert tree
        ("/store/q-INT8", "/store/q-INT8", None),
        ("/store/runs/q-INT8", "/store/runs", None),  # the tree inside the output
        ("/store/q-INT8", "/store/cache/run", "/store/cache"),  # inside the non-expert cache
    ],
)
def test_the_output_dir_stays_apart_from_the_weights_kt_kernel_reads(weight_path, output_dir, cache):
    """kt-kernel 0.7.2 trains from an INT8 tree only while the directory holds its files and manifest alone
    (sft/weight_manifest.py), and prepares and validates the non-expert cache itself; a run writing its
    checkpoints there broke its next start."""
    plan = load_fixture_plan(CURRENT)
    if cache:
        plan["sft"]["kt"]["kt_non_expert_weight_path"] = cache
    with pytest.raises(
        RenderError, match="--output-dir .*kt_(non_expert_)?weight_path|--output-dir must differ"
    ):
        _render(plan, weight_path=weight_path, output_dir=output_dir)
    assert _render(plan, weight_path=weight_path, output_dir="/runs/q")


@pytest.mark.parametrize(
    ("plan_name", "scheduler", "ok"),
    [
        (CURRENT, "linear", True),
        (LEGACY, "constant_with_warmup", True),
        (CURRENT, "greedy", True),  # transformers 5 (transformers-kt 5.6)
        (LEGACY, "greedy", False),  # not in transformers 4.56's SchedulerType
        (CURRENT, "cosine_with_min_lr", False),  # "One of min_lr or min_lr_rate should be set"
        (CURRENT, "warmup_stable_decay", False),  # get_wsd_schedule needs num_decay_steps
        (LEGACY, "reduce_lr_on_plateau", False),  # "requires an eval strategy"
        (CURRENT, "cosine_annealing", False),  # no such SchedulerType
    ],
)
def test_the_lr_scheduler_is_one_the_stacks_transformers_runs(plan_name, scheduler, ok):
    plan = load_fixture_plan(plan_name)
    plan["sft"]["lr_scheduler_type"] = scheduler
    if ok:
        assert yaml.safe_load(_render(plan).files["r.yaml"][0])["lr_scheduler_type"] == scheduler
    else:
        with pytest.raises(RenderError, match=f"lr_scheduler_type '{scheduler}' is not one the"):
            _render(plan)


def test_a_legacy_rule_missing_from_the_checkout_here_is_refused(tmp_path):
    """LLaMA-Factory 0.9.4 hands kt_optimize_rule to ktransformers, which opens it when the model loads; where
    the checkout is on the rendering machine (the kt_train role renders on the host), a rule file it lacks
    is said before anything is written. A checkout not here is not judged."""
    rules = tmp_path / "lf" / "examples" / "kt_optimize_rules"
    rules.mkdir(parents=True)
    plan = load_fixture_plan(LEGACY)  # examples/kt_optimize_rules/Qwen3Moe-sft-amx.yaml
    with pytest.raises(RenderError, match="Qwen3Moe-sft-amx.yaml is not on this machine, though"):
        _render(plan, llamafactory_dir=str(tmp_path / "lf"))
    (rules / "Qwen3Moe-sft-amx.yaml").write_text("- match: {}\n")
    recipe = yaml.safe_load(_render(plan, llamafactory_dir=str(tmp_path / "lf")).files["r.yaml"][0])
    assert recipe["kt_optimize_rule"] == str(rules / "Qwen3Moe-sft-amx.yaml")
    assert _render(plan, llamafactory_dir=str(tmp_path / "elsewhere"))
    (tmp_path / "newer").mkdir()  # a LLaMA-Factory whose rules moved (v0.9.4: examples/ktransformers/)
    with pytest.raises(RenderError, match="is not on this machine, though"):
        _render(plan, llamafactory_dir=str(tmp_path / "newer"))
