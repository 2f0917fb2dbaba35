"""Oneshot units for weight conversions: CPU expert weights (AMXINT8/4) and LoRA adapters for SGLang.

Script flags follow kvcache-ai/ktransformers kt-kernel/scripts/convert_cpu_weights.py and
convert_kt_to_sglang_adapter.py, and kvcache-ai/sglang convert_lora.py (see docs/readme/render.md).
The current stack's LoRA converter ships in the kt-kernel wheel (kt_kernel/sft/, 0.7.2) and is found in the
--python env; the other two scripts are in no wheel and default to source checkouts: convert_cpu_weights.py
in kt_model_store's ktransformers checkout under /opt/ktinfra/src, convert_lora.py in kt_python_env's sglang
checkout (profiles.checkout_dir: /opt/kt/src/sglang, or under --src-dir).
"""

from __future__ import annotations

import json
import math
import os
import posixpath
import re
from pathlib import Path, PurePosixPath

from ktinfra.int8_weights import MANIFEST_NAME
from ktinfra.profiles import SRC_DIR, checkout_dir
from ktinfra.render.common import (
    Rendered,
    RenderError,
    check_abs_path,
    check_apart,
    check_env_dir,
    check_instance_name,
    check_program,
    check_user,
    env_line,
    legacy_checkout,
    refuse_empty,
    render_template,
    unit_literal,
)
from ktinfra.render.plans import model_section, plan_section, require_int, sft_expert_pools
from ktinfra.render.serve import CONVERT_DONE_MARKER, DEFAULT_SERVE_PYTHON

CONVERT_SCRIPT = "/opt/ktinfra/src/ktransformers/kt-kernel/scripts/convert_cpu_weights.py"
KT_LORA_SCRIPT = "/opt/ktinfra/src/ktransformers/kt-kernel/scripts/convert_kt_to_sglang_adapter.py"
LEGACY_LORA_SCRIPT_NAME = "convert_lora.py"  # the sglang fork's repository root, in no wheel
LEGACY_LORA_SCRIPT = f"{checkout_dir('sglang')}/{LEGACY_LORA_SCRIPT_NAME}"
CONVERT_ENV_DIR = "/etc/ktinfra/convert"
LORA_ENV_DIR = "/etc/ktinfra/lora-convert"
QUANT_METHODS = ("int8", "int4")
# The serve plan's kt_method that reads each --quant-method's output.
PLAN_METHODS = {"AMXINT8": "int8", "AMXINT4": "int4"}
# What convert_cpu_weights.py's int8/int4 quantization reads; its awq input goes only with --quant-method awq.
INPUT_TYPES = ("bf16", "fp16", "fp8")
DONE_MARKER = CONVERT_DONE_MARKER
# kt_preflight's tool venv: `ktinfra weights manifest` finishes an int8 conversion there
DEFAULT_KTINFRA = "/opt/ktinfra/tool/bin/ktinfra"


MAX_CONVERT_THREADS = 8192  # the kernel's CPU limit (facts/cpulist.py)


def _name_from(path: str, name: str | None) -> str:
    refuse_empty("--name", name, "name the instance after the output")
    return check_instance_name("--name", name or PurePosixPath(path).name)


def _threads(
    plan: dict | None, cpuinfer_threads: int | None, threadpool_count: int | None
) -> tuple[int, int]:
    """Converter threads: --cpuinfer-threads, else the serve plan's kt_cpuinfer or the sft plan's
    kt_num_threads. Pools: the serve plan's kt_threadpool_count, or those the sft run splits the experts over
    (the tree's layout must match: a --threadpool-count other than the plan's is refused); without a plan,
    --threadpool-count."""
    for flag, value in (("--cpuinfer-threads", cpuinfer_threads), ("--threadpool-count", threadpool_count)):
        whole = isinstance(value, int) and not isinstance(value, bool)  # True, 8.0: "True", "8.0" in the argv
        if value is not None and not (whole and 1 <= value <= MAX_CONVERT_THREADS):
            raise RenderError(f"{flag} must be from 1 to {MAX_CONVERT_THREADS}, got {str(value)[:20]}")
    planned = None
    if _is_sft(plan):
        kt_config, where = _sft_kt_config(plan), "sft.kt.kt_config"
        cpuinfer_threads = cpuinfer_threads or require_int(kt_config, "kt_num_threads", where, 1)
        pools = {"kt_threadpool_count": sft_expert_pools(kt_config)}  # 1 unless kt_tp_enabled
        planned = require_int(pools, "kt_threadpool_count", where, 1), "sft run's NUMA pools"
    elif plan is not None:
        serve = plan_section(plan, "serve")
        cpuinfer_threads = cpuinfer_threads or require_int(serve, "kt_cpuinfer", "serve", 1)
        planned = require_int(serve, "kt_threadpool_count", "serve", 1), "serve.kt_threadpool_count"
    if planned is not None:
        # the output is split over this many pools, and kt-kernel loads pool i from _numa_i (a merged tree:
        # blk.*.numa.i keys) only when the run's own count is the same: a tree over other pools is refused
        # by render serve / train and by kt-kernel, after the conversion's hours
        if threadpool_count is not None and threadpool_count != planned[0]:
            raise RenderError(
                f"--threadpool-count {threadpool_count} contradicts the plan's {planned[1]} {planned[0]}: "
                f"a tree split over {threadpool_count} NUMA pools would not load; leave it out or re-plan"
            )
        threadpool_count = planned[0]
    if not cpuinfer_threads or not threadpool_count or cpuinfer_threads < 1 or threadpool_count < 1:
        raise RenderError(
            "converter threads unknown: pass --plan (a serve plan for the target host) or both "
            "--cpuinfer-threads and --threadpool-count (the script's defaults, 60 threads on 2 NUMA "
            "pools, oversubscribe most hosts)"
        )
    if threadpool_count > cpuinfer_threads:
        raise RenderError(
            f"--threadpool-count {threadpool_count} is more thread pools than the {cpuinfer_threads} "
            "converter threads: kt-kernel gives each pool an even share of the threads"
        )
    return cpuinfer_threads, threadpool_count


def _is_sft(plan: dict | None) -> bool:
    return isinstance(plan, dict) and plan.get("mode") == "sft"


def _sft_kt_config(plan: dict) -> dict:
    """The current-stack sft plan's kt_config; a legacy-stack run reads the BF16 checkpoint itself."""
    kt_config = (plan_section(plan, "sft").get("kt") or {}).get("kt_config")
    if not isinstance(kt_config, dict):
        raise RenderError(
            "this sft plan has no kt_config (a legacy-stack run: ktransformers 0.4 trains from the BF16 "
            "checkpoint): nothing to convert for it"
        )
    return kt_config


def _method(plan: dict | None, method: str | None) -> str:
    """--method, checked against the serve plan's kt_method; taken from it when not given. An sft plan
    trains from either tree (render train --weight-format): int8 unless --method says int4."""
    if _is_sft(plan):
        _sft_kt_config(plan)
        method = "int8" if method is None else method
        if method not in QUANT_METHODS:
            raise RenderError(f"--method {method!r} is not one of {', '.join(QUANT_METHODS)}")
        return method
    planned = plan_section(plan, "serve").get("kt_method") if plan is not None else None
    if plan is not None and (not isinstance(planned, str) or planned not in PLAN_METHODS):
        raise RenderError(
            f"the plan's kt_method {planned!r} does not read convert_cpu_weights.py output "
            f"(only {', '.join(PLAN_METHODS)} do): nothing to convert for this plan"
        )
    if method is None:
        if planned is None:
            raise RenderError("--method is required without --plan (int8 for AMXINT8, int4 for AMXINT4)")
        return PLAN_METHODS[planned]
    if method not in QUANT_METHODS:
        raise RenderError(f"--method {method!r} is not one of {', '.join(QUANT_METHODS)}")
    if planned is not None and PLAN_METHODS[planned] != method:
        raise RenderError(
            f"--method {method} contradicts the plan's kt_method {planned}: "
            f"use --method {PLAN_METHODS[planned]} or re-plan"
        )
    return method


def _distinct_dirs(source_opt: str, source: str, output: str) -> tuple[str, str]:
    """Both paths normalized ('..', '//', trailing '/'); the output neither is nor nests with the source,
    since the converter walks its input while it writes the output."""
    source = posixpath.normpath(check_abs_path(source_opt, source))
    output = posixpath.normpath(check_abs_path("--output", output))
    check_apart("--output", output, source_opt, source, "the converter writes a new directory")
    return source, output


def _input_type(plan: dict | None, input_type: str | None) -> str:
    refuse_empty("--input-type", input_type, "take the plan's native dtype, or bf16")
    if input_type is None and plan is not None:
        input_type = model_section(plan).get("native_dtype")
    input_type = input_type or "bf16"
    if input_type == "awq":
        raise RenderError(
            "--input-type awq: convert_cpu_weights.py converts AWQ input only with --quant-method awq; its "
            f"int8/int4 quantization reads {', '.join(INPUT_TYPES)}"
        )
    if input_type not in INPUT_TYPES:
        raise RenderError(f"--input-type {input_type!r} is not one of {', '.join(INPUT_TYPES)}")
    return input_type


# convert_cpu_weights.py's int8/int4 read routed experts as model.layers.L.mlp.experts.E.{gate,up,down}_proj
# .weight and take their dtype from --input-type alone: bf16 tensors as they are, fp16 cast to bf16, fp8
# dequantized with weight_scale_inv. A dtype the flag does not name is handed to the kernel as bf16 bytes.
EXPERT_WEIGHT = re.compile(r"\.mlp\.experts\.\d+\.gate_proj\.weight$")
SAFETENSORS_INPUT_TYPES = {"BF16": "bf16", "F16": "fp16", "F8_E4M3": "fp8", "F8_E5M2": "fp8"}


def _expert_dtype(model_path: str) -> tuple[str, str] | None:
    """(safetensors dtype, tensor name) of a routed expert weight of the checkpoint where it is on this
    machine; None where it is not here, or its files name no such tensor (rendering for another host)."""
    from ktinfra.lora import safetensors_header

    root = Path(model_path)
    try:
        index = root / "model.safetensors.index.json"
        if index.is_file():
            weight_map = json.loads(index.read_text()).get("weight_map") or {}
            name = next((key for key in sorted(weight_map) if EXPERT_WEIGHT.search(key)), None)
            shards = [root / weight_map[name]] if name else []
        else:
            shards = sorted(root.glob("*.safetensors")) if root.is_dir() else []
        for shard in shards:
            header = safetensors_header(shard)
            name = next((key for key in sorted(header) if EXPERT_WEIGHT.search(key)), None)
            if name and isinstance(header[name], dict) and isinstance(header[name].get("dtype"), str):
                return header[name]["dtype"], name
    except (OSError, ValueError, TypeError, AttributeError):  # unreadable here: the converter will say so
        return None
    return None


def _check_input_dtype(model_path: str, input_type: str) -> None:
    found = _expert_dtype(model_path)
    if found is None or SAFETENSORS_INPUT_TYPES.get(found[0]) == input_type:
        return
    dtype, name = found
    fits = SAFETENSORS_INPUT_TYPES.get(dtype)
    raise RenderError(
        f"input type {input_type} (--input-type, else the plan's native dtype) does not fit "
        f"{model_path}: its expert weight {name} is {dtype}; "
        + (
            f"pass --input-type {fits}"
            if fits
            else f"convert_cpu_weights.py's int8/int4 read only {', '.join(INPUT_TYPES)} experts"
        )
    )


def _check_existing_output(output: str, method: str, pools: int, model_path: str) -> None:
    """An --output on this machine that already holds another conversion (the other kernel, or a split over
    other NUMA pools): with its done marker there the unit's ExecCondition skips the conversion and the old
    tree stays, else the converter writes its layers beside the old ones (an int8 tree then gets no manifest,
    after the conversion's hours). A tree of this very conversion (finished, or cut off) is converted on."""
    from ktinfra.render.serve import _tree_pools, _weight_kind

    folder = Path(output)
    try:
        if method == "int8" and folder.is_symlink():
            raise RenderError(
                f"--output {output} is a symlink, which kt-kernel refuses as an INT8 weight root (so does "
                "the finishing `ktinfra weights manifest`): give the directory it points to"
            )
        if not folder.is_dir():
            return
    except OSError:
        return
    kind, told_by = _weight_kind(output)
    wanted = {"int8": "INT8", "int4": "INT4"}[method]
    if told_by == "files" and kind in ("INT8", "INT4", "GGUF") and kind != wanted:
        raise RenderError(
            f"--output {output} already holds {kind} weights: converting {method} into it keeps them (its "
            "done marker skips the conversion) or mixes two conversions; remove it or pick another --output"
        )
    tree = _tree_pools(folder)
    if tree is not None and tree != pools:
        raise RenderError(
            f"--output {output} already holds a conversion split over {tree} NUMA pool"
            f"{'s' if tree != 1 else ''}, this one is over {pools}: its done marker would skip the "
            "conversion (or the two splits would mix); remove it or pick another --output"
        )
    if method == "int8":
        _check_int8_root(folder, output)
    else:
        _check_marker_source(folder / DONE_MARKER, output, model_path)


def _check_marker_source(marker: Path, output: str, model_path: str) -> None:
    """A finished int4 output records the model it was converted from in its done marker (KT_CONVERT_SOURCE):
    another model's conversion there (Qwen3-30B-A3B's tree, now rendered for Qwen3-30B-A3B-Instruct-2507, of
    the very same shapes) made the unit skip the conversion and the server load the old model's experts. An
    empty marker (ktinfra before this) tells nothing and is kept as before."""
    try:
        source = marker.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return
    # realpath normalizes as well: the same path however written, or the same model through a link
    if not source or os.path.realpath(source) == os.path.realpath(model_path):
        return
    raise RenderError(
        f"--output {output} holds a finished conversion of {source} (its {DONE_MARKER} says so), not of "
        f"{model_path}: the done marker would skip this conversion and the server would load {source}'s "
        f"experts; remove it or pick another --output (if {model_path} is that model moved, write "
        f"{model_path} into {marker})"
    )


def _check_int8_root(folder: Path, output: str) -> None:
    """The int8 conversion ends with `ktinfra weights manifest` (KT_CONVERT_FINISH), which takes only real
    _layer_N folders in the directory, as kt-kernel trains from nothing else (ktinfra/int8_weights.py):
    anything else there fails that step, after the conversion's hours."""
    layer = re.compile(r"_layer_(0|[1-9]\d*)")
    try:
        stray = [
            child.name
            for child in sorted(folder.iterdir())
            if child.name != MANIFEST_NAME
            and not (layer.fullmatch(child.name) and child.is_dir() and not child.is_symlink())
        ]
    except OSError:  # unreadable here: the converter and the manifest step will say so
        return
    if stray:
        raise RenderError(
            f"--output {output} holds {', '.join(stray[:3])}{' ...' if len(stray) > 3 else ''}: an int8 "
            "conversion ends with `ktinfra weights manifest`, which takes only the converter's _layer_N "
            "folders there (kt-kernel trains from nothing else), so it would fail after the conversion; "
            "remove them or pick another --output"
        )


def render_convert(
    *,
    model_path: str,
    output: str,
    method: str | None = None,
    plan: dict | None = None,
    name: str | None = None,
    input_type: str | None = None,
    cpuinfer_threads: int | None = None,
    threadpool_count: int | None = None,
    python: str = DEFAULT_SERVE_PYTHON,
    script: str = CONVERT_SCRIPT,
    user: str | None = None,
    ktinfra: str = DEFAULT_KTINFRA,
    env_dir: str = CONVERT_ENV_DIR,
) -> Rendered:
    """int8 is converted to the layer-folder layout (--no-merge-safetensor) and finished by a
    kt-weight-manifest.json, which is then the done marker: kt-kernel 0.7.2 trains from INT8 experts (and
    sglang-kt serves a LoRA on them) only so, refusing merged safetensors and anything else in the directory
    (ktinfra/int8_weights.py); plain AMXINT8 serving reads that layout too."""
    method = _method(plan, method)
    model_path, output = _distinct_dirs("--model-path", model_path, output)
    name = _name_from(output, name)
    threads, pools = _threads(plan, cpuinfer_threads, threadpool_count)
    input_type = _input_type(plan, input_type)
    _check_input_dtype(model_path, input_type)
    _check_existing_output(output, method, pools, model_path)
    args = ["--input-path", model_path, "--input-type", input_type]
    args += ["--output", output, "--quant-method", method]
    args += ["--cpuinfer-threads", str(threads), "--threadpool-count", str(pools)]
    python = check_program("--python", python)
    script = check_program("--script", script)
    user = check_user(user)
    env_dir = check_env_dir(env_dir)
    post = []
    if method == "int8":
        args.append("--no-merge-safetensor")
        post = [
            check_program("--ktinfra", ktinfra),
            "weights",
            "manifest",
            output,
            "--model-path",
            model_path,
        ]
    marker = f"{output}/{MANIFEST_NAME if post else DONE_MARKER}"
    env = [
        env_line("KT_CONVERT_ARGS", " ".join(args)),
        env_line("KT_CONVERT_FINISH", " ".join(post)),
        env_line("KT_CONVERT_MARKER", marker),
        # int8's marker is the manifest kt-kernel reads: it stays as `ktinfra weights manifest` wrote it
        env_line("KT_CONVERT_SOURCE", "" if post else model_path),
    ]
    out = _oneshot_job("convert", name, env, python=python, script=script, env_dir=env_dir, user=user)
    out.info = {
        "unit": f"ktinfra-convert@{name}.service",
        "argv": [python, script, *args],
        "finish_argv": post,
        "env_file": f"{env_dir}/{name}.env",
        "done_marker": marker,
        "kt_weight_path": output,
    }
    return out


def _oneshot_job(
    job: str,
    name: str,
    env: list[str],
    *,
    python: str,
    script: str,
    env_dir: str,
    user: str | None,
    **unit_vars: str,
) -> Rendered:
    """A job's bundle: the ktinfra-JOB@.service template (python runs script; the other template values
    come in unit_vars) and instance NAME's EnvironmentFile (0600) of the env lines under one header."""
    out = Rendered()
    out.add(
        f"ktinfra-{job}@.service",
        render_template(
            f"systemd/ktinfra-{job}@.service.j2",
            python=unit_literal(python),
            script=unit_literal(script),
            env_dir=unit_literal(env_dir),
            user=user and unit_literal(user),
            **unit_vars,
        ),
    )
    header = f"# ktinfra {job} instance {name}; install as {env_dir}/{name}.env"
    out.add(f"ktinfra-{job}-{name}.env", "\n".join([header, *env]) + "\n", mode=0o600)
    return out


def _current_lora_script(python: str, script: str | None) -> tuple[str, str]:
    """--script, else kt-kernel's converter installed in --python's env, else the checkout path. The checkout
    is only taken blind when --python is not on this machine (rendering for another host)."""
    from ktinfra.lora import INSTALLED_CONVERTER, installed_converter

    if script is not None:
        return check_program("--script", script), "explicit"
    installed = installed_converter(python)
    if installed is not None:  # a path from the env (an editable install's checkout): checked like --script
        return check_program(f"the converter installed in {python}", str(installed)), "installed"
    if not Path(python).exists() or Path(KT_LORA_SCRIPT).is_file():
        return KT_LORA_SCRIPT, "checkout"
    raise RenderError(
        f"kt-kernel's LoRA converter not found: {python} has no {INSTALLED_CONVERTER} (kt-kernel >= 0.7.2) "
        f"and there is no checkout at {KT_LORA_SCRIPT}; install kt-kernel into that env or pass --script PATH"
    )


def _check_lora_input(adapter: str, legacy: bool, lora_alpha: float | None) -> None:
    """What `ktinfra lora serve` refuses of a training output before converting it, where this host can
    read it (one function for both)."""
    from ktinfra.lora import LoraError, check_conversion_input

    try:
        check_conversion_input(Path(adapter), legacy, lora_alpha)
    except LoraError as exc:
        raise RenderError(str(exc)) from None
    except OSError as exc:  # a path the checks could not look at (EACCES on a parent)
        raise RenderError(f"--adapter {adapter}: {exc.strerror or exc}") from None


def render_lora_convert(
    *,
    adapter: str,
    output: str,
    legacy: bool = False,
    model_path: str | None = None,
    lora_alpha: float | None = None,
    name: str | None = None,
    python: str = DEFAULT_SERVE_PYTHON,
    script: str | None = None,
    src_dir: str = SRC_DIR,
    user: str | None = None,
    overwrite: bool = False,
    env_dir: str = LORA_ENV_DIR,
) -> Rendered:
    """script: the converter; None: kt-kernel's (current), or convert_lora.py of the sglang checkout that
    kt_python_env makes under src_dir (legacy)."""
    adapter, output = _distinct_dirs("--adapter", adapter, output)
    name = _name_from(output, name)
    python = check_program("--python", python)
    user = check_user(user)
    env_dir = check_env_dir(env_dir)
    converter_source = "explicit" if script else "checkout"
    if legacy:
        # sglang fork's convert_lora.py: positional adapter_path [output_path]; strips PEFT key prefixes.
        if lora_alpha is not None or overwrite or model_path is not None:
            raise RenderError(
                "--model-path, --lora-alpha and --overwrite apply to the current converter only "
                "(drop --legacy, or them)"
            )
        if script:
            script = check_program("--script", script)
        else:
            script = f"{legacy_checkout('sglang', src_dir, '--script')}/{LEGACY_LORA_SCRIPT_NAME}"
        args = [adapter, output]
        documentation = "https://github.com/kvcache-ai/sglang/blob/main/convert_lora.py"
    else:
        base = check_abs_path("--model-path (the base model, for adapter_config.json)", model_path)
        args = [adapter, output, "--base-model-name-or-path", base]
        if lora_alpha is not None:
            if not math.isfinite(lora_alpha) or lora_alpha <= 0:
                raise RenderError(f"--lora-alpha must be a finite number above 0, got {lora_alpha}")
            args += ["--lora-alpha", format(lora_alpha, "g")]
        if overwrite:
            # kt-kernel's converter then rmtree's a non-empty --output before writing (_prepare_output_dir)
            args.append("--overwrite")
        script, converter_source = _current_lora_script(python, script)
        documentation = (
            "https://github.com/kvcache-ai/ktransformers/blob/main/doc/en/SFT/Qwen3.5-SGLang-LoRA-Serving.md"
        )
    _check_lora_input(adapter, legacy, lora_alpha)
    script_name = PurePosixPath(script).name
    marker = f"{output}/{DONE_MARKER}"
    env = [
        env_line("KT_LORA_CONVERT_ARGS", " ".join(args)),
        env_line("KT_LORA_MARKER", marker),
    ]
    out = _oneshot_job(
        "lora-convert",
        name,
        env,
        python=python,
        script=script,
        env_dir=env_dir,
        user=user,
        script_name=unit_literal(script_name),
        generation="legacy" if legacy else "current",
        documentation=unit_literal(documentation),
    )
    out.info = {
        "unit": f"ktinfra-lora-convert@{name}.service",
        "argv": [python, script, *args],
        "env_file": f"{env_dir}/{name}.env",
        "done_marker": marker,
        "lora_path": output,
        "converter_source": converter_source,
    }
    return out
