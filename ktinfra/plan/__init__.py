"""Planning: from host facts and a model to the parameters a KT expert would pick (docs/planning.md)."""

from __future__ import annotations

from ktinfra import catalog, profiles
from ktinfra.plan.host import (
    FactsError,
    data_disk,
    gb,
    gb_apart,
    gpu_problems,
    has_amx,
    host_summary,
    platform_checks,
    unknown_capability_warnings,
    validate,
)
from ktinfra.plan.serve import lora_problems, plan_serve
from ktinfra.plan.sft import plan_sft

MODES = ("serve", "sft")
DISK_PARTS = (
    ("download", "download"),
    ("bf16_conversion", "BF16 copy"),
    ("cpu_weights_on_disk", "CPU weights"),
    ("outputs", "outputs"),
)


class PlanInputError(ValueError):
    """Bad input (unknown model, bad facts, bad option): `ktinfra plan` exits 1."""


def _capacity_problems(facts: dict, est, mode: str) -> tuple[list[str], list[str]]:
    problems, warnings = [], []
    b = est.breakdown
    ram = facts["memory"]["total_bytes"]
    if est.ram_bytes > ram:
        rest = "LoRA training state and runtime" if mode == "sft" else "runtime"
        parts = f"{gb(b['cpu_experts'])} of experts + {gb(est.ram_bytes - b['cpu_experts'])} {rest}"
        need, have = gb_apart(est.ram_bytes, ram)
        problems.append(f"needs {need} RAM ({parts}), host has {have}")
    disk = data_disk(facts)
    if disk is None:
        warnings.append(
            f"no data disk in the facts: cannot check the {gb(est.disk_bytes)} of disk the {mode} needs"
        )
    elif est.disk_bytes > disk["avail_bytes"]:
        parts = " + ".join(f"{gb(b[key])} {label}" for key, label in DISK_PARTS if b.get(key))
        need, have = gb_apart(est.disk_bytes, disk["avail_bytes"])
        problems.append(f"needs {need} disk ({parts}), {disk['mount']} has {have} free")
    return problems, warnings


def _gpus_used(facts: dict, mode: str, section: dict) -> dict:
    """The facts narrowed to the GPUs the plan runs on (serve and sft leave out GPUs they do not use)."""
    chosen = section.get("gpu_indices")
    if not chosen:
        return facts
    return {**facts, "gpus": [g for g in facts["gpus"] if g["index"] in chosen]}  # validate() requires index


def _weight_format(weight_path: str, cpu_format: str | None):
    """--weight-path names converted weights, so the plan must use the format they hold: a directory of GGUF
    files states its quant (ktinfra.plan.gguf_dir, returned); other weights need --cpu-format."""
    from ktinfra import sizing
    from ktinfra.plan.gguf_dir import held_gguf

    held = held_gguf(weight_path, cpu_format)
    if held is not None:
        return held
    fmt = sizing.cpu_format(cpu_format) if cpu_format else None
    if fmt is None or not (fmt.converted or fmt.gguf):
        raise PlanInputError(
            "--weight-path names converted CPU weights: give the --cpu-format they hold (AMXINT8, AMXINT4 "
            "or GGUF:<TYPE>; a directory of .gguf files states its own)"
            + (f", not {fmt.name}, which reads the checkpoint itself" if fmt else "")
        )
    return None


def _check_what_render_needs(options: dict) -> None:
    """Refuse here what `ktinfra render serve` would refuse later: a plan must be renderable as given."""
    from ktinfra.render.common import RenderError, check_abs_path, check_instance_name, check_word
    from ktinfra.render.serve import check_host, is_loopback

    host = options.get("host")
    try:
        if host is not None:
            check_host("--host", check_word("--host", host))
        if options.get("weight_path") is not None:
            check_abs_path("--weight-path", options["weight_path"])
        for name, directory in (options.get("lora") or {}).items():
            check_instance_name("--lora adapter name", name)
            check_abs_path(f"--lora {name} directory", directory)
    except RenderError as exc:
        raise PlanInputError(str(exc)) from exc
    if host is not None and not is_loopback(host) and not options.get("api_key_set"):
        raise PlanInputError(
            f"--host {host} takes requests from the network: pass --api-key-set (render then needs "
            "--api-key-file), or leave --host out for 127.0.0.1"
        )


def _check_max_running(value, mode: str) -> None:
    if value is None:
        return
    if mode != "serve":
        raise PlanInputError("--max-running-requests applies to serve")
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise PlanInputError(f"--max-running-requests must be a positive integer, got {value!r}")


def plan(facts: dict, model: str, mode: str, **options) -> dict:
    """Plan `mode` ("serve" | "sft") of `model` on the host `facts` describes.

    options: stack (profile name, default kt-0.7); serve: cpu_format, lora ({name: dir}), port, host,
    api_key_set, max_running_requests, weight_path; sft: cutoff_len, expert_format ("bf16" | "fp8", the
    routed experts LoRA trains on). Raises PlanInputError on bad input, an option of the other mode included;
    infeasible plans come back with feasible=False.
    """
    if mode not in MODES:
        raise PlanInputError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    early_warnings: list[str] = []
    try:
        validate(facts)
        arch = catalog.resolve(model)
        caveats = (catalog.unverified_architecture(arch), catalog.unsized_encoders(arch))
        early_warnings += [caveat for caveat in caveats if caveat]
        profile = profiles.load_profile(options.get("stack") or profiles.DEFAULT_PROFILE)
        if options.get("cpu_format") and mode == "sft":
            raise PlanInputError(
                "--cpu-format applies to serve; SFT trains BF16 experts, or an FP8 model's FP8 experts "
                "as published with --expert-format fp8"
            )
        _check_max_running(options.get("max_running_requests"), mode)
        for key in ("cutoff_len", "expert_format"):  # the CLI refuses them the same way, before the facts
            if options.get(key) is not None and mode != "sft":
                flag = "--" + key.replace("_", "-")
                raise PlanInputError(f"{flag} applies to --mode sft, not --mode {mode}")
        if mode == "serve":
            _check_what_render_needs(options)
        if options.get("weight_path") is not None and mode == "serve":
            options["gguf"] = _weight_format(options["weight_path"], options.get("cpu_format"))
            if options["gguf"] is not None:  # its one folder of .gguf files, where that is what it holds
                options["weight_path"] = options["gguf"].path
        if mode == "serve":
            options["generation"] = profile["generation"]
            section, est, reasons, problems = plan_serve(arch, facts, options, early_warnings)
            problems += lora_problems(section, profile["generation"], early_warnings)
            purpose = "KT serving"
            amx_kernel = has_amx(facts) and section["kt_method"].startswith("AMX")
        else:
            section, est, reasons, problems = plan_sft(arch, facts, options, profile, early_warnings)
            purpose = "KT fine-tuning"
            amx_kernel = has_amx(facts)
    except (
        FactsError,
        catalog.UnknownModelError,
        catalog.ModelConfigError,
        profiles.UnknownProfileError,
    ) as exc:
        raise PlanInputError(str(exc)) from exc
    except ValueError as exc:  # e.g. an unknown --cpu-format
        raise PlanInputError(str(exc)) from exc

    used = _gpus_used(facts, mode, section)
    problems = gpu_problems(used, purpose) + problems
    if mode == "sft":
        early_warnings += unknown_capability_warnings(used["gpus"], "KT's minimum of 8.0 (bf16 tensor cores)")
    more, warnings = _capacity_problems(facts, est, mode)
    problems += more
    warnings = early_warnings + warnings
    platform, platform_warnings = platform_checks(facts, profile, needs_amx_kernel=amx_kernel)
    problems += platform
    warnings += platform_warnings
    reasons["requirements"] = ", ".join(f"{k} {gb(v)}" for k, v in est.breakdown.items() if v)
    return {
        "schema": 1,
        "feasible": not problems,
        "mode": mode,
        "stack": profile["name"],
        "stack_generation": profile["generation"],
        "model": arch.summary(),
        "host": host_summary(facts),
        mode: section,
        "requirements": {k: est.to_dict()[k] for k in ("vram_bytes", "ram_bytes", "disk_bytes")},
        "requirements_breakdown": est.breakdown,
        "reasons": reasons,
        "problems": problems,
        "warnings": warnings,
    }
