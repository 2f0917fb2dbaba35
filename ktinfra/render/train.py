"""LLaMA-Factory + KT LoRA training: the run's YAML recipe and the ktinfra-train@ unit.

Keys follow hiyouga/LLaMA-Factory examples/ktransformers/train_lora/*_kt.yaml (current stack, `kt_config`)
and the earlier examples/train_lora/*_kt.yaml (legacy: `kt_optimize_rule`, `cpu_infer`, `chunk_size`).
Launchers: legacy `USE_KT=1 llamafactory-cli train FILE`; current (ktransformers[sft] user guide)
`USE_KT=1 ACCELERATE_USE_KT=true accelerate launch --config_file FSDP2.yaml -m llamafactory.cli train FILE`.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

import yaml

from ktinfra import int8_weights
from ktinfra.plan.sft import DUMMY_IMAGE_TEMPLATES, DUMMY_IMAGE_TOKENS, TEMPLATES, kt_model_max_length
from ktinfra.profiles import SRC_DIR, checkout_dir
from ktinfra.render.chat_templates import unknown_template
from ktinfra.render.common import (
    Rendered,
    RenderError,
    check_abs_path,
    check_apart,
    check_env_dir,
    check_env_name,
    check_instance_name,
    check_program,
    check_user,
    check_word,
    env_line,
    gpu_visibility,
    legacy_checkout,
    refuse_empty,
    render_template,
    unit_literal,
)
from ktinfra.render.plans import (
    MAX_PLAN_INT,
    check_gpus_on_host,
    comment_text,
    host_gpu_indices,
    host_section,
    model_section,
    optional_int,
    plan_section,
    real_number,
    require_int,
    sft_expert_pools,
    shown,
)

DEFAULT_SFT_PYTHON = "/opt/kt/envs/kt-sft/bin/python"
# Legacy stack: kt_python_env's LLaMA-Factory checkout (relative kt_optimize_rule paths are pinned under it).
LLAMAFACTORY_DIR = checkout_dir("LLaMA-Factory")
ENV_DIR = "/etc/ktinfra/train"
# The KT keys each stack's LLaMA-Factory takes at the top level of the recipe: HfArgumentParser refuses any
# other key (no ALLOW_EXTRA_ARGS), and a key of another section would silently replace that one.
KT_KEYS = {
    # llamafactory-kt 0.9.6.dev0 hparams/model_args.py KTransformersArguments, + training_args' kt_config
    "current": {"use_kt", "kt_config", "kt_cpu_activation", "kt_weight_path", "kt_non_expert_weight_path",
                "kt_expert_checkpoint_path", "kt_use_lora_experts", "kt_lora_expert_num",
                "kt_lora_expert_intermediate_size"},
    # LLaMA-Factory 0.9.4 (the arguments of the pinned 000526908ae9) KTransformersArguments
    "legacy": {"use_kt", "kt_optimize_rule", "cpu_infer", "chunk_size", "mode", "kt_maxlen",
               "kt_use_cuda_graph", "kt_mode", "kt_force_think"},
}  # fmt: skip
# kt_config: the kt_kernel.sft.KTConfig fields (kt-kernel 0.7.2 sft/config.py) a recipe may set, with the kind
# each takes. KTConfig refuses unknown fields; llamafactory-kt refuses those it derives from its own
# arguments (kt_lora_rank, kt_weight_path, ...: KTransformersArguments._KT_DERIVED_KEYS).
KT_CONFIG_KEYS = {
    "kt_backend": "backend", "kt_expert_weight_format": "format", "kt_weight_lifecycle": "lifecycle",
    "kt_num_threads": 1, "kt_threadpool_count": 1, "kt_max_cache_depth": 0, "kt_num_gpu_experts": 0,
    "kt_model_max_length": 1, "kt_tp_enabled": bool, "kt_share_backward_bb": bool,
    "kt_share_cache_pool": bool, "kt_force_fused_expert_lora": bool,
}  # fmt: skip
# kt_config keys llamafactory-kt drops when true (transformers-kt's transport metadata: hparams/model_args.py
# _normalize_advanced_kt_config); any other value of them it refuses as derived from its own arguments
KT_CONFIG_DROPPED = ("enabled", "kt_skip_expert_loading")
KT_CONFIG_WORDS = {  # sft/config.py _KNOWN_SFT_BACKENDS (any case), ExpertWeightFormat, WeightLifecycle
    "backend": ("auto", "int8", "fp8", "amxbf16", "amxint8", "amxfp8", "amxint4", "rawint4", "mxfp4",
                "amxint4_kgroup", "amxbf16_skiplora", "amxint8_skiplora", "amxint4_skiplora"),
    "format": ("bf16", "int8", "fp8", "rawint4", "mxfp4"),
    "lifecycle": ("persistent", "ephemeral"),
}  # fmt: skip
KT_PATH_KEYS = ("kt_weight_path", "kt_non_expert_weight_path", "kt_expert_checkpoint_path")
# The other typed KT arguments (bool | None, int | None in KTransformersArguments), with the kind each takes.
# HfArgumentParser.parse_dict converts no value: kt-kernel's wrapper reads bool(kt_use_lora_experts) (a
# string "false" turns LoRA experts on) and `kt_lora_expert_num or 2`.
KT_ARG_KINDS = {
    "kt_use_lora_experts": bool, "kt_lora_expert_num": 1, "kt_lora_expert_intermediate_size": 1,
    "kt_maxlen": 1, "kt_use_cuda_graph": bool, "kt_force_think": bool,
}  # fmt: skip
# --weight-format of experts pre-converted by convert_cpu_weights.py -> (kt_backend, kt_expert_weight_format)
CONVERTED_EXPERT_BACKENDS = {"int8": ("INT8", "int8"), "int4": ("AMXINT4", None)}
# LLaMA-Factory arguments a plan's sft block may set; anything else there is planner bookkeeping.
RECIPE_KEYS = (
    "lora_rank", "lora_alpha", "lora_dropout", "lora_target", "per_device_train_batch_size",
    "gradient_accumulation_steps", "cutoff_len", "bf16", "fp16", "learning_rate", "num_train_epochs",
    "max_steps", "max_samples", "save_steps", "logging_steps", "lr_scheduler_type", "warmup_ratio",
    "warmup_steps", "disable_gradient_checkpointing", "preprocessing_num_workers", "dataloader_num_workers",
)  # fmt: skip
_COUNTS = {  # key: smallest value LLaMA-Factory / transformers accept
    "lora_rank": 1, "per_device_train_batch_size": 1, "gradient_accumulation_steps": 1, "cutoff_len": 1,
    "max_steps": 1, "max_samples": 1, "save_steps": 1, "logging_steps": 1, "preprocessing_num_workers": 1,
    "dataloader_num_workers": 0,
}  # fmt: skip
_POSITIVE = ("lora_alpha", "learning_rate", "num_train_epochs")
_RATIOS = ("lora_dropout", "warmup_ratio")
_FLAGS = ("bf16", "fp16", "disable_gradient_checkpointing")
_NAMES = re.compile(r"[A-Za-z0-9_.-]+(,[A-Za-z0-9_.-]+)*")  # lora_target "all" or "q_proj,v_proj"


def _recipe_problem(key: str, value: object) -> str | None:
    """Why a plan's non-count recipe value cannot go into the LLaMA-Factory YAML (None: it can)."""
    number = real_number(value)
    if key in _POSITIVE:
        return None if number and value > 0 else "a number > 0"
    if key in _RATIOS:
        return None if number and 0 <= value < 1 else "a number in [0, 1)"
    if key == "warmup_steps":  # transformers 5 reads a float below 1 as a ratio
        return None if number and value >= 0 else "a number >= 0"
    if key in _FLAGS:
        return None if isinstance(value, bool) else "true or false"
    ok = isinstance(value, str) and _NAMES.fullmatch(value)  # lora_target, lr_scheduler_type
    return (
        None
        if ok
        else "a name (letters, digits, '_', '.', '-'; lora_target may list several, comma-separated)"
    )


# lr_scheduler_type: the transformers SchedulerType values each stack's transformers (4.56 / transformers-kt
# 5.6) builds from this recipe's keys. The others refuse it at start: cosine_with_min_lr,
# cosine_warmup_with_min_lr and warmup_stable_decay need lr_scheduler_kwargs (optimization.py: "One of min_lr
# or min_lr_rate should be set", get_wsd_schedule's num_decay_steps), reduce_lr_on_plateau an eval strategy
# (training_args.py); greedy is new in transformers 5.
_SCHEDULERS = ("linear", "cosine", "cosine_with_restarts", "polynomial", "constant", "constant_with_warmup",
               "inverse_sqrt")  # fmt: skip
SCHEDULERS = {"legacy": _SCHEDULERS, "current": (*_SCHEDULERS, "greedy")}


def _recipe(sft: dict, generation: str = "current") -> dict:
    recipe = {key: sft[key] for key in RECIPE_KEYS if sft.get(key) is not None}
    for key, value in recipe.items():
        if key in _COUNTS:
            require_int(recipe, key, "sft", _COUNTS[key])
            continue
        problem = _recipe_problem(key, value)
        if problem:
            raise RenderError(f"plan sft.{key} must be {problem}, got {shown(value)}")
    steps = recipe.get("warmup_steps")
    if generation == "legacy" and steps is not None and not isinstance(steps, int):
        # transformers 4.56 (the legacy sft env) refuses it at start: "warmup_steps must be of type int";
        # transformers 5 (current) reads a float below 1 as a ratio
        raise RenderError(
            f"plan sft.warmup_steps must be a whole number of steps on the legacy stack (its transformers "
            f"4.56 takes no float; a ratio is sft.warmup_ratio), got {shown(steps)}"
        )
    scheduler = recipe.get("lr_scheduler_type")
    if scheduler is not None and scheduler not in SCHEDULERS[generation]:
        raise RenderError(
            f"plan sft.lr_scheduler_type {shown(scheduler)} is not one the {generation} stack's transformers "
            f"runs from this recipe (it takes {', '.join(SCHEDULERS[generation])})"
        )
    if recipe.get("bf16") and recipe.get("fp16"):
        raise RenderError("plan sft.bf16 and sft.fp16 are both true: pick one")
    return recipe


# 10 % warmup as in LLaMA-Factory's examples. transformers 5 (the current stack's transformers-kt 5.6) logs
# warmup_ratio as deprecated and reads a warmup_steps float below 1 as that ratio; the legacy stack's
# transformers 4.57 has only an integer warmup_steps.
WARMUP = {"current": {"warmup_steps": 0.1}, "legacy": {"warmup_ratio": 0.1}}


def _template(plan: dict, sft: dict, generation: str, template: str | None) -> tuple[str, str]:
    """(where the chat template comes from, its name)."""
    if template:
        return "--template", check_word("--template", template)
    if sft.get("template") is not None:
        if not isinstance(sft["template"], str):
            raise RenderError(f"plan sft.template must be a template name, got {sft['template']!r}")
        return "plan sft.template", check_word("plan sft.template", sft["template"])
    arch = model_section(plan).get("architecture")
    found = TEMPLATES[generation].get(arch) if isinstance(arch, str) else None
    if not found:
        raise RenderError(f"no LLaMA-Factory template known for architecture {arch!r}: pass --template")
    return f"the template picked for architecture {arch!r}", found


def _kt_block(
    sft: dict,
    generation: str,
    llamafactory_dir: str,
    weight_path: str | None,
    weight_format: str | None = None,
    model_path: str | None = None,
) -> dict:
    kt = sft.get("kt")
    if not isinstance(kt, dict) or not kt:
        raise RenderError(
            "plan sft.kt must hold the stack's KT keys (use_kt/kt_optimize_rule/... or kt_config)"
        )
    if kt.get("use_kt", True) is not True:
        raise RenderError(
            f"plan sft.kt.use_kt must be true (the unit runs with USE_KT=1), got {kt['use_kt']!r}"
        )
    kt = {"use_kt": True, **kt}
    if isinstance(kt.get("kt_config"), dict):  # filled in below: the caller's plan stays as it was
        kt["kt_config"] = dict(kt["kt_config"])
    if generation == "legacy" and (weight_path or "kt_weight_path" in kt):
        # LLaMA-Factory <= 0.9.4 (the legacy stack) has no kt_weight_path argument; 0.9.5 added it and
        # dropped kt_optimize_rule/cpu_infer/chunk_size, so no one recipe can carry both.
        raise RenderError(
            "kt_weight_path (--weight-path) is a current-stack key: the legacy stack's LLaMA-Factory "
            "(kt_optimize_rule/cpu_infer/chunk_size) has no such argument; drop --weight-path"
        )
    _check_kt_values(kt, "sft.kt")
    if generation == "legacy":
        missing = [key for key in ("kt_optimize_rule", "cpu_infer", "chunk_size") if key not in kt]
        if missing:
            raise RenderError(f"legacy plan sft.kt lacks {', '.join(missing)}")
        require_int(kt, "cpu_infer", "sft.kt", 1)
        require_int(kt, "chunk_size", "sft.kt", 1)
        rule = kt["kt_optimize_rule"]
        if not isinstance(rule, str) or not rule.strip():  # "" or null named the LLaMA-Factory checkout
            raise RenderError(f"plan sft.kt.kt_optimize_rule must be a rule file path, got {shown(rule)}")
        if not rule.startswith("/"):
            # LLaMA-Factory resolves it against its working directory; pin it to the checkout instead.
            kt["kt_optimize_rule"] = f"{llamafactory_dir}/{rule}"
        rule_file = Path(kt["kt_optimize_rule"])
        here = Path(llamafactory_dir if not rule.startswith("/") else rule_file.parent)
        if here.is_dir() and not rule_file.is_file():  # the checkout is here, without that rule
            raise RenderError(
                f"kt_optimize_rule {rule_file} is not on this machine, though {here} is: ktransformers would "
                "fail to open it when the run starts (a checkout of another LLaMA-Factory commit?)"
            )
    elif not isinstance(kt.get("kt_config"), dict):
        raise RenderError("current-stack plan sft.kt must hold a kt_config mapping")
    _check_kt_keys(kt, generation, sft.get("disable_gradient_checkpointing") is True)
    if weight_path:
        kt["kt_weight_path"] = check_abs_path("--weight-path", weight_path)
    fp8 = generation == "current" and _expert_format(kt["kt_config"]) == "fp8"
    if generation == "legacy":
        if weight_format:
            raise RenderError("--weight-format goes with --weight-path, a current-stack key")
    elif fp8:
        if weight_format:  # converted experts would contradict the plan, whose RAM holds the FP8 ones
            raise RenderError(
                f"--weight-format {weight_format}: the plan trains the checkpoint's FP8 experts (kt_backend "
                f"{kt['kt_config'].get('kt_backend')}, kt_expert_weight_format fp8), its RAM sized for "
                "them; leave --weight-format out (--weight-path then names the FP8 checkpoint), or plan "
                "again without --expert-format fp8 to train converted experts"
            )
        # kt-kernel 0.7.2 reads FP8 experts from raw safetensors (sft/wrapper.py: "FP8 SFT requires raw
        # safetensors checkpoint files. Point kt_weight_path at model_name_or_path"): --weight-path, if
        # given, names that checkpoint, else the model's own
        if not kt.get("kt_weight_path") and not kt.get("kt_expert_checkpoint_path") and model_path:
            kt["kt_weight_path"] = model_path
    elif kt.get("kt_weight_path"):
        kt["kt_config"] = _converted_experts(kt["kt_config"], kt["kt_weight_path"], weight_format)
    elif weight_format:
        raise RenderError("--weight-format names the format of --weight-path: give both")
    if generation == "current":
        _check_expert_format(kt, sft)
        _check_cpu_retain(kt, sft.get("disable_gradient_checkpointing") is True)
    return kt


# Why a qwen3_vl-plugin template needs room past cutoff_len x batch: ktinfra.plan.sft DUMMY_IMAGE_TEMPLATES
def _dummy_image_room(config: dict, template: str, cutoff_len: int, batch: int) -> None:
    """kt_model_max_length with room for the dummy image of a qwen3_vl-plugin template (set when the plan
    leaves it out, refused when it leaves too little)."""
    if template not in DUMMY_IMAGE_TEMPLATES:
        return
    need = kt_model_max_length(cutoff_len, batch)
    have = config.get("kt_model_max_length")
    if have is None:
        config["kt_model_max_length"] = need
    elif have < need:
        raise RenderError(
            f"plan sft.kt.kt_config.kt_model_max_length {have} leaves no room for the dummy image "
            f"template {template} adds to a text-only batch: kt-kernel needs {need} tokens "
            f"(per_device_train_batch_size {batch} x (cutoff_len {cutoff_len} + {DUMMY_IMAGE_TOKENS}), "
            "rounded up to 8); raise it or leave it out"
        )


# kt_backend values (any case) whose SFT method kt-kernel 0.7.2 cannot run with the CPU activations retained
# (sft/wrapper.py: retain takes AMXBF16_SFT, AMXFP8_SFT, INT8_SFT, RAWINT4_SFT or MXFP4_SFT)
NO_CPU_RETAIN_BACKENDS = ("amxint4", "amxbf16_skiplora", "amxint8_skiplora", "amxint4_skiplora")


def _check_cpu_retain(kt: dict, no_checkpointing: bool) -> None:
    """The activation policy llamafactory-kt derives (get_kt_activation_policy: kt_cpu_activation, else
    retain without GPU gradient checkpointing, recompute with it) as kt-kernel 0.7.2's wrapper checks it
    while the model is wrapped: CPU retain needs every expert and its LoRA on the CPU and a backend with
    checkpoint-forward reuse; RAWINT4 retains only with GPU retain too."""
    gpu = "retain" if no_checkpointing else "recompute"
    cpu = kt.get("kt_cpu_activation") or gpu
    if cpu != "retain":
        return
    config = kt["kt_config"]
    backend = str(config.get("kt_backend", "AMXBF16"))
    why = (
        "kt_cpu_activation: retain"
        if kt.get("kt_cpu_activation")
        else ("sft.disable_gradient_checkpointing: true (llamafactory-kt then retains CPU activations)")
    )
    problems = [
        problem
        for problem, bad in (
            (
                f"kt_backend {backend} (no checkpoint-forward reuse)",
                backend.lower() in NO_CPU_RETAIN_BACKENDS,
            ),
            ("kt_num_gpu_experts other than 0", config.get("kt_num_gpu_experts", 0) != 0),
            ("kt_use_lora_experts", kt.get("kt_use_lora_experts") is True),
            (
                "rawint4 experts with GPU gradient checkpointing (they retain only with GPU retain too)",
                str(config.get("kt_expert_weight_format", "")).lower() == "rawint4" and gpu == "recompute",
            ),
        )
        if bad
    ]
    if problems:
        raise RenderError(
            f"plan sft.kt: {why} does not go with {', '.join(problems)}: kt-kernel 0.7.2 refuses it once the "
            "model is loaded; use kt_cpu_activation: recompute with GPU gradient checkpointing"
        )


# kt_expert_weight_format -> the kt_backend values sft/config.py pairs with it (any case)
FORMAT_BACKENDS = {
    "bf16": ("auto", "amxbf16"), "int8": ("auto", "int8", "amxint8"), "fp8": ("auto", "fp8", "amxfp8"),
    "rawint4": ("auto", "rawint4", "amxint4_kgroup"), "mxfp4": ("auto", "mxfp4"),
}  # fmt: skip


# kt_backend (any case) -> the expert format kt-kernel 0.7.2 takes for it when the recipe names none
BACKEND_FORMATS = {"int8": "int8", "amxint8": "int8", "fp8": "fp8", "amxfp8": "fp8", "rawint4": "rawint4",
                   "amxint4_kgroup": "rawint4", "mxfp4": "mxfp4"}  # fmt: skip


def _expert_format(config: dict) -> str | None:
    """The expert format kt-kernel 0.7.2 trains: the one named, else the backend's (None: not known)."""
    fmt = config.get("kt_expert_weight_format")
    backend = str(config.get("kt_backend", "AMXBF16")).lower()
    return fmt.lower() if isinstance(fmt, str) else BACKEND_FORMATS.get(backend)


def _check_expert_format(kt: dict, sft: dict) -> None:
    """The final kt_config as kt-kernel 0.7.2's KTConfig.__post_init__ checks it (sft/config.py): the
    expert format fits the backend; kt_non_expert_weight_path goes with int8 (or mxfp4) experts only; each
    quantized format's own rules (INT8: a kt_weight_path, kt_share_backward_bb; FP8: kt_share_backward_bb,
    persistent weights; RAWINT4: rank 8, dropout 0, kt_share_backward_bb false, fused expert LoRA; MXFP4: a
    kt_weight_path, dropout 0, kt_share_backward_bb false; all: no GPU experts, no GPU LoRA experts);
    ephemeral weights are INT8 only."""
    config = kt["kt_config"]
    backend = str(config.get("kt_backend", "AMXBF16")).lower()
    fmt = _expert_format(config)
    if fmt is not None and backend not in FORMAT_BACKENDS[fmt]:
        raise RenderError(
            f"plan sft.kt.kt_config: kt_expert_weight_format {fmt} does not go with kt_backend "
            f"{config.get('kt_backend')} (kt-kernel pairs it with {' or '.join(FORMAT_BACKENDS[fmt][1:])})"
        )
    if kt.get("kt_non_expert_weight_path") and fmt not in ("int8", "mxfp4"):
        raise RenderError(
            "plan sft.kt.kt_non_expert_weight_path goes with int8 (or mxfp4) experts only (kt-kernel), "
            f"the recipe trains {fmt or config.get('kt_backend')} experts"
        )
    persistent = str(config.get("kt_weight_lifecycle", "persistent")).lower() == "persistent"
    if not persistent and fmt != "int8":
        raise RenderError(
            "plan sft.kt.kt_config.kt_weight_lifecycle ephemeral is for INT8 .kt weights only (kt-kernel "
            f"0.7.2), the recipe trains {fmt or config.get('kt_backend')} experts"
        )
    if fmt not in ("int8", "fp8", "rawint4", "mxfp4"):
        return
    share_bb = config.get("kt_share_backward_bb", True) is not False  # KTConfig's default: on
    pools = config.get("kt_threadpool_count", 1) if config.get("kt_tp_enabled") else 1
    dropout = sft.get("lora_dropout") or 0  # LLaMA-Factory's default 0
    checkpoint = bool(kt.get("kt_expert_checkpoint_path"))
    rules = {
        "int8": (
            ("a kt_weight_path (pre-quantized experts: --weight-path)", not kt.get("kt_weight_path")),
            ("kt_share_backward_bb: true", not share_bb),
            ("no kt_expert_checkpoint_path", checkpoint),
        ),
        "fp8": (("kt_share_backward_bb: true", not share_bb), ("persistent weights", not persistent)),
        "rawint4": (
            ("lora_rank 8", sft.get("lora_rank", 8) != 8),  # LLaMA-Factory's default 8
            ("lora_dropout 0", dropout != 0),
            ("1 or 2 NUMA pools", pools not in (1, 2)),
            ("kt_share_backward_bb: false", share_bb),
            ("kt_force_fused_expert_lora: true", config.get("kt_force_fused_expert_lora") is not True),
            ("no kt_expert_checkpoint_path", checkpoint),
        ),
        "mxfp4": (
            ("a kt_weight_path", not kt.get("kt_weight_path")),
            ("lora_dropout 0", dropout != 0),
            ("1 or 2 NUMA pools", pools not in (1, 2)),
            ("kt_share_backward_bb: false", share_bb),
            ("no kt_expert_checkpoint_path", checkpoint),
        ),
    }[fmt]
    problems = [
        why
        for why, bad in (
            *rules,
            ("kt_num_gpu_experts: 0", config.get("kt_num_gpu_experts", 0) != 0),
            ("no kt_use_lora_experts", kt.get("kt_use_lora_experts") is True),
        )
        if bad
    ]
    if problems:
        raise RenderError(f"{fmt.upper()} experts train in kt-kernel 0.7.2 only with {', '.join(problems)}")


def _converted_experts(kt_config: dict, weight_path: object, weight_format: str | None) -> dict:
    """kt_config for experts pre-converted by convert_cpu_weights.py: kt-kernel 0.7.2 loads a
    _layer_N/_numa_0/*.kt directory as the backend's own layout (sft/amx.py), so the backend must be the one
    the weights were quantized for (sft/config.py pairs format int8 with backend INT8)."""
    if weight_format is None:
        found = re.search(r"-(INT8|INT4)/*$", str(weight_path), re.IGNORECASE)
        if not found:
            raise RenderError(
                f"kt_weight_path {weight_path} holds converted experts of an unknown format: pass "
                f"--weight-format {' or '.join(CONVERTED_EXPERT_BACKENDS)} (the conversion's --method)"
            )
        weight_format = found.group(1).lower()
    if weight_format not in CONVERTED_EXPERT_BACKENDS:
        raise RenderError(
            f"--weight-format must be {' or '.join(CONVERTED_EXPERT_BACKENDS)}, got {weight_format!r}"
        )
    backend, expert_format = CONVERTED_EXPERT_BACKENDS[weight_format]
    # an ephemeral INT8 tree has kt-kernel's own kt-ephemeral-manifest.json (sft/ephemeral.py), not this one
    if expert_format == "int8" and str(kt_config.get("kt_weight_lifecycle", "")).lower() != "ephemeral":
        _check_int8_tree(str(weight_path), sft_expert_pools(kt_config))
    _check_tree_kernel(str(weight_path), weight_format)
    config = {key: value for key, value in kt_config.items() if key != "kt_expert_weight_format"}
    config["kt_backend"] = backend
    if expert_format:
        config["kt_expert_weight_format"] = expert_format
    return config


def _check_tree_kernel(weight_path: str, weight_format: str) -> None:
    """Where the tree is on this machine, its .kt files are the ones the backend opens: kt-kernel 0.7.2 takes
    any _layer_N/_numa_0/*.kt as the backend's own layout (sft/amx.py _load_base_weights_from_file), and its
    C++ opens T::name() + "_up_E_…kt" (INT8_ for INT8, INT4_ for AMXINT4), so an INT8 tree trained as int4
    stops while the model loads."""
    from ktinfra.render.serve import _layer_kernel, _lowest_layer

    try:
        layer = _lowest_layer(Path(weight_path)) if Path(weight_path).is_dir() else None
        kernel = _layer_kernel(layer) if layer is not None else None
    except OSError:
        return
    if kernel is not None and kernel != weight_format.upper():
        other = f"--weight-format {kernel.lower()} or " if kernel.lower() in CONVERTED_EXPERT_BACKENDS else ""
        raise RenderError(
            f"kt_weight_path {weight_path} holds {kernel} .kt files (by their names), the recipe trains "
            f"them as {weight_format} (--weight-format or the path's -INT8/-INT4 name): kt-kernel opens only "
            f"{weight_format.upper()}_* files; pass {other}the tree converted for {weight_format}"
        )


def _check_int8_tree(weight_path: str, pools: object) -> None:
    """Where the INT8 tree is on this machine: kt-kernel 0.7.2 loads it only with its kt-weight-manifest.json,
    split over the `pools` NUMA pools it trains with (sft/weight_manifest.py); else the run would
    fail while the model loads. Rendering for another host, the path is not here and not checked."""
    root = Path(weight_path)
    if not root.is_dir():
        return
    try:
        manifest = int8_weights.read_manifest(root)
    except int8_weights.WeightsError as exc:
        raise RenderError(str(exc)) from None
    if manifest is None:
        raise RenderError(
            f"kt_weight_path {root} has no {int8_weights.MANIFEST_NAME}: kt-kernel trains from INT8 experts "
            "only as convert_cpu_weights.py --no-merge-safetensor output with that manifest (what `ktinfra "
            "render convert` and kt_model_store write; `ktinfra weights manifest` adds it to such a tree)"
        )
    if manifest.get("threadpool_count") != pools:
        raise RenderError(
            f"kt_weight_path {root} is split over {manifest.get('threadpool_count')} NUMA pools, the plan "
            f"trains with {pools} (kt_threadpool_count with kt_tp_enabled, else 1): kt-kernel loads it only "
            "with the same count (convert again with the sft plan's pools)"
        )


def _check_kt_keys(kt: dict, generation: str, no_checkpointing: bool) -> None:
    """Every key of the plan's KT block (and of kt_config) one the stack's LLaMA-Factory and kt-kernel take,
    of the kind they read; the current stack's paths absolute (the unit runs in its state directory)."""
    unknown = sorted(set(kt) - KT_KEYS[generation])
    if unknown:
        raise RenderError(
            f"plan sft.kt.{unknown[0]} is not a KT argument of the {generation} stack's LLaMA-Factory "
            f"(it takes {', '.join(sorted(KT_KEYS[generation]))})"
        )
    for key in KT_PATH_KEYS:
        if key in kt:
            check_abs_path(f"plan sft.kt.{key}", kt[key])
    activation = kt.get("kt_cpu_activation")
    if activation is not None and activation not in ("retain", "recompute"):
        raise RenderError(
            f"plan sft.kt.kt_cpu_activation must be retain or recompute, got {shown(activation)}"
        )
    if activation == "recompute" and no_checkpointing:  # llamafactory-kt get_kt_activation_policy
        raise RenderError(
            "plan sft.kt.kt_cpu_activation recompute needs GPU gradient checkpointing, but "
            "sft.disable_gradient_checkpointing is true (use retain)"
        )
    for key, kind in KT_ARG_KINDS.items():
        if key in kt:
            _check_kind(f"sft.kt.{key}", kind, kt[key])
    for key, value in (kt.get("kt_config") or {}).items():
        if key in KT_CONFIG_DROPPED and value is True:
            continue
        kind = KT_CONFIG_KEYS.get(key)
        if kind is None:
            raise RenderError(
                f"plan sft.kt.kt_config.{key} is not a kt_config key kt-kernel 0.7.2 takes from the recipe "
                f"(it takes {', '.join(KT_CONFIG_KEYS)}; LLaMA-Factory sets the LoRA, path and mode keys "
                "itself from its own arguments)"
            )
        _check_kind(f"sft.kt.kt_config.{key}", kind, value)


def _check_kind(where: str, kind: object, value: object) -> None:
    """A KT value of the kind its reader takes: bool (true/false), an int (at least that int) or a word of
    KT_CONFIG_WORDS[kind]."""
    if kind is bool:
        ok, want = isinstance(value, bool), "true or false"
    elif isinstance(kind, int):
        ok = isinstance(value, int) and not isinstance(value, bool) and kind <= value <= MAX_PLAN_INT
        want = f"an integer >= {kind}"
    else:
        words = KT_CONFIG_WORDS[kind]
        ok, want = isinstance(value, str) and value.lower() in words, f"one of {', '.join(words)}"
    if not ok:
        raise RenderError(f"plan {where} must be {want}, got {shown(value)}")


def _datasets(value: str) -> str:
    """--dataset as LLaMA-Factory splits it (on commas): no empty or repeated name."""
    names = value.split(",")
    if not all(names):
        raise RenderError(f"--dataset {value!r} has an empty name between commas")
    repeated = next((n for i, n in enumerate(names) if n in names[:i]), None)
    if repeated:
        raise RenderError(f"--dataset {value!r} names {repeated} twice")
    return value


def _check_kt_values(block: dict, where: str) -> None:
    """Every KT key's value as LLaMA-Factory reads it: a word, a number or a flag (nested for kt_config);
    null or NaN would reach the recipe as None / .nan."""
    for key, value in block.items():
        if isinstance(value, dict):
            _check_kt_values(value, f"{where}.{key}")
        elif not (
            isinstance(value, bool) or real_number(value) or (isinstance(value, str) and value.strip())
        ):
            raise RenderError(
                f"plan {where}.{key} must be a name, a number or true/false, got {shown(value)}"
            )


# Set by the unit from the plan; a launcher env entry must not quietly replace them
_OWN_ENV = ("USE_KT", "KT_TRAIN_CONFIG", "ACCELERATE_USE_KT", "KT_ACCELERATE_CONFIG", "CUDA_VISIBLE_DEVICES",
            "CUDA_DEVICE_ORDER")  # fmt: skip


def _launcher_env(launcher: dict, own: dict) -> dict:
    """The plan's launcher env; it may repeat what ktinfra sets itself (`own`), never change it."""
    env = launcher.get("env") or {}
    if not isinstance(env, dict):
        raise RenderError(f"plan sft.launcher.env must map variable names to values, not {_env_kind(env)}")
    for key, value in env.items():
        if not (isinstance(value, str) or real_number(value)):  # null/true would read "None"/"True"
            kind = _env_kind(value)
            raise RenderError(f"plan sft.launcher.env.{key} must be a string or a number, got {kind}")
        if key in _OWN_ENV and str(value) != own.get(key):
            raise RenderError(
                f"plan sft.launcher.env sets {key}={value}, but ktinfra sets it "
                f"{'to ' + own[key] if key in own else 'only'} from sft.gpu_indices (sft.mig_uuids) "
                "and the stack"
            )
    return {key: str(value) for key, value in env.items()}


def _env_kind(value) -> str:
    """A wrong launcher env value as an error shows it: a scalar as it is, a list or mapping by its kind only
    (it may hold a token the plan meant to pass)."""
    if value is None or isinstance(value, (bool, int, float)):
        return shown(value)
    return f"a {type(value).__name__} (its content not shown: it may hold a secret)"


def _env_value(key: str, value: str) -> str:
    """check_word for a value of the env file, which may hold a token (the file is 0600): the error names the
    variable, never the value, which would reach the play's output and logs."""
    try:
        return check_word(f"launcher env {key}", value)
    except RenderError:
        raise RenderError(
            f"plan sft.launcher.env.{key} is empty, not UTF-8 text, or holds whitespace, a quote, a "
            "backslash, '$' or a backtick: systemd reads it as one word (the value is not shown)"
        ) from None


def _launcher(sft: dict, generation: str) -> dict:
    """The plan's sft.launcher (optional): its kind must match the stack generation's launcher."""
    launcher = sft.get("launcher") or {}
    if not isinstance(launcher, dict):
        raise RenderError("plan sft.launcher must be an object")
    expected = "accelerate" if generation == "current" else "llamafactory-cli"
    if launcher.get("kind", expected) != expected:
        raise RenderError(f"plan sft.launcher.kind {launcher['kind']!r} does not fit the {generation} stack")
    return launcher


def _sections(
    plan: dict,
    sft: dict,
    generation: str,
    model_path: str,
    dataset: str,
    dataset_dir: str,
    template: str,
    output_dir: str,
):
    cores = optional_int(host_section(plan), "physical_cores", "host", 1) or 16
    recipe = _recipe(sft, generation)
    warmup = {} if {"warmup_ratio", "warmup_steps"} & set(recipe) else WARMUP[generation]
    return {
        "model": {"model_name_or_path": model_path, "trust_remote_code": True},
        "method": {
            "stage": "sft",
            "do_train": True,
            "finetuning_type": "lora",
            **{
                k: recipe.pop(k)
                for k in ("lora_rank", "lora_alpha", "lora_dropout", "lora_target")
                if k in recipe
            },
        },
        "dataset": {
            "dataset": dataset,
            "dataset_dir": dataset_dir,
            "template": template,
            "cutoff_len": recipe.pop("cutoff_len", 2048),
            "overwrite_cache": True,
            "preprocessing_num_workers": recipe.pop("preprocessing_num_workers", min(16, cores)),
            "dataloader_num_workers": recipe.pop("dataloader_num_workers", min(4, cores)),
        },
        "output": {
            "output_dir": output_dir,
            "logging_steps": recipe.pop("logging_steps", 10),
            "save_steps": recipe.pop("save_steps", 500),
            "plot_loss": True,
            # false: a restarted unit resumes from the newest checkpoint in output_dir
            "overwrite_output_dir": False,
            "save_only_model": False,
            "report_to": "none",
        },
        "train": {
            "per_device_train_batch_size": 1,
            "gradient_accumulation_steps": 8,
            "learning_rate": 1.0e-4,
            "num_train_epochs": 3.0,
            "lr_scheduler_type": "cosine",
            **warmup,
            # transformers refuses fp16 and bf16 both true: a plan's fp16 replaces the bf16 default
            "bf16": not recipe.get("fp16"),
            "ddp_timeout": 180000000,
            **recipe,
        },
    }


def _yaml(sections: dict, header: str) -> str:
    parts = [header]
    for title, body in sections.items():
        # allow_unicode: a path such as outputs/模型-lora stays as it is, not "\u6A21…" in double quotes:
        # the unit's ExecStopPost reads output_dir with sed; ASCII recipes come out the same
        text = yaml.safe_dump(body, sort_keys=False, default_flow_style=False, allow_unicode=True)
        parts.append(f"### {title}\n" + text)
    return "\n".join(parts)


def _mixed_precision(train: dict) -> str:
    """Accelerate's mixed_precision for the recipe's fp16/bf16 (transformers reads them the same way)."""
    return "fp16" if train.get("fp16") else "bf16" if train.get("bf16") else "no"


def _accelerate_config(num_gpus: int, mixed_precision: str = "bf16") -> str:
    """FSDP2 settings as in LLaMA-Factory examples/ktransformers/accelerate/fsdp2_kt_*.yaml (no KT keys);
    mixed_precision follows the recipe's fp16/bf16, else accelerate's env would still ask for bf16.
    main_process_port 0: accelerate (utils/launch.py prepare_multi_gpu_env) takes a free port from the OS for
    torchrun's master; without it every run asks for 29500, and of two runs started together on one host
    (both find 29500 free before either binds it) the second fails to bind it."""
    config = {
        "compute_environment": "LOCAL_MACHINE",
        "distributed_type": "FSDP",
        "fsdp_config": {
            "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
            "fsdp_cpu_ram_efficient_loading": True,
            "fsdp_offload_params": False,
            "fsdp_reshard_after_forward": True,
            "fsdp_state_dict_type": "FULL_STATE_DICT",
            "fsdp_version": 2,
        },
        "mixed_precision": mixed_precision,
        "num_machines": 1,
        "num_processes": num_gpus,
        "main_process_port": 0,
        "rdzv_backend": "static",
        "same_network": True,
        "use_cpu": False,
    }
    return "# Rendered by ktinfra: Accelerate FSDP2 for a KT run\n" + yaml.safe_dump(config, sort_keys=False)


def render_train(
    plan: dict,
    *,
    name: str,
    model_path: str,
    dataset: str,
    dataset_dir: str,
    output_dir: str,
    template: str | None = None,
    weight_path: str | None = None,
    weight_format: str | None = None,
    python: str = DEFAULT_SFT_PYTHON,
    llamafactory_dir: str | None = None,
    src_dir: str = SRC_DIR,
    user: str | None = None,
    env_dir: str = ENV_DIR,
) -> Rendered:
    """llamafactory_dir: the LLaMA-Factory checkout; None: the one kt_python_env checks out under src_dir."""
    sft = plan_section(plan, "sft")
    for option, value in (
        ("--template", template),
        ("--weight-path", weight_path),
        ("--weight-format", weight_format),
    ):
        refuse_empty(option, value, "go without it")
    name = check_instance_name("--name", name)
    if name.endswith(".accelerate"):  # its recipe NAME.yaml would be run X's X.accelerate.yaml
        raise RenderError(f"--name {name!r} ends in '.accelerate', the suffix of a run's Accelerate config")
    generation = plan.get("stack_generation")
    if not isinstance(generation, str) or generation not in TEMPLATES:
        raise RenderError(f"plan stack_generation {generation!r} is not one of current, legacy")
    model_path = check_abs_path("--model-path", model_path)
    dataset = _datasets(check_word("--dataset", dataset))
    dataset_dir = check_abs_path("--dataset-dir", dataset_dir)
    output_dir = check_abs_path("--output-dir", output_dir)

    for option, path in (("--model-path", model_path), ("--dataset-dir", dataset_dir)):
        check_apart("--output-dir", output_dir, option, path, "the run writes its checkpoints there")
    llamafactory_dir = (
        check_abs_path("--llamafactory-dir", llamafactory_dir)
        if llamafactory_dir is not None
        else legacy_checkout("LLaMA-Factory", src_dir, "--llamafactory-dir")
    )
    python = check_program("--python", python)
    user = check_user(user)
    env_dir = check_env_dir(env_dir)
    given, chat_template = _template(plan, sft, generation, template)
    if why := unknown_template(chat_template, generation, python, llamafactory_dir):
        raise RenderError(f"{given} {why}")
    sections = _sections(plan, sft, generation, model_path, dataset, dataset_dir, chat_template, output_dir)
    sections["ktransformers"] = _kt_block(
        sft, generation, llamafactory_dir, weight_path, weight_format, model_path
    )
    if generation == "current":
        _dummy_image_room(
            sections["ktransformers"]["kt_config"],
            chat_template,
            sections["dataset"]["cutoff_len"],
            sections["train"]["per_device_train_batch_size"],
        )
    for key in ("kt_weight_path", "kt_non_expert_weight_path"):  # kt-kernel validates what these hold
        if sections["ktransformers"].get(key):
            check_apart("--output-dir", output_dir, key, sections["ktransformers"][key], "kt-kernel reads it")
    model_name = comment_text(model_section(plan), "name", "model.name")
    stack = comment_text(plan, "stack", "stack")
    header = f"# LLaMA-Factory + KT LoRA recipe for {model_name} ({stack}), rendered by ktinfra\n"
    gpus, mig = sft.get("gpu_indices"), sft.get("mig_uuids")
    if gpus is None and mig is None:  # plans made before sft.gpu_indices: every GPU of the host
        gpus = host_gpu_indices(plan) or None
    # [] in the plan is refused, not "every GPU"; mig_uuids: the planned MIG instance of each GPU
    visibility = gpu_visibility(gpus, "sft.gpu_indices", mig, "sft.mig_uuids")
    check_gpus_on_host(plan, gpus, "sft.gpu_indices")
    launcher = _launcher(sft, generation)
    bindir = str(PurePosixPath(python).parent)
    out = Rendered()
    out.add(f"{name}.yaml", _yaml(sections, header))
    variables = {"USE_KT": "1", "KT_TRAIN_CONFIG": f"{env_dir}/{name}.yaml"}
    if generation == "current":
        processes = optional_int(launcher, "num_processes", "sft.launcher", 1) or max(1, len(gpus or []))
        if gpus and processes != len(gpus):  # FSDP runs one process per GPU
            raise RenderError(
                f"plan sft.launcher.num_processes {processes} does not match sft.gpu_indices {gpus} "
                "(one process per GPU)"
            )
        out.add(f"{name}.accelerate.yaml", _accelerate_config(processes, _mixed_precision(sections["train"])))
        variables["ACCELERATE_USE_KT"] = "true"
        variables["KT_ACCELERATE_CONFIG"] = f"{env_dir}/{name}.accelerate.yaml"
    variables.update(visibility)
    variables.update(_launcher_env(launcher, variables))
    env = [f"# ktinfra train run {name}; install as {env_dir}/{name}.env"]
    env += [env_line(check_env_name(key), _env_value(key, value)) for key, value in variables.items()]
    out.add(f"ktinfra-train-{name}.env", "\n".join(env) + "\n", mode=0o600)
    out.add(
        "ktinfra-train@.service",
        render_template(
            "systemd/ktinfra-train@.service.j2",
            generation=generation,
            bindir=unit_literal(bindir),
            env_dir=unit_literal(env_dir),
            workdir="/var/lib/ktinfra/train/%i",  # %i: the instance, as systemd expands it
            user=user and unit_literal(user),
        ),
    )
    if generation == "current":
        argv = [f"{bindir}/accelerate", "launch", "--config_file", f"{env_dir}/{name}.accelerate.yaml"]
        argv += ["-m", "llamafactory.cli", "train", f"{env_dir}/{name}.yaml"]
    else:
        argv = [f"{bindir}/llamafactory-cli", "train", f"{env_dir}/{name}.yaml"]
    out.info = {
        "unit": f"ktinfra-train@{name}.service",
        "argv": argv,
        "env_file": f"{env_dir}/{name}.env",
        "config_file": f"{env_dir}/{name}.yaml",
        "stack_generation": generation,
    }
    return out
