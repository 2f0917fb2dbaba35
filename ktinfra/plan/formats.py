"""Which kt-kernel backend (CPU weight format) a host can run for a model."""

from __future__ import annotations

from ktinfra import sizing
from ktinfra.architecture import Architecture
from ktinfra.plan.host import (
    ISA_UNKNOWN,
    amx_blocked_by_kernel,
    amx_unknown,
    data_disk,
    gb,
    has_amx,
    isa_flag,
)

# CPU features each kt-kernel backend needs (kt-kernel README, "CPU requirements").
ISA_NEEDS = {
    "AMXINT8": ("amx_tile", "amx_int8"),
    "AMXINT4": ("amx_tile", "amx_int8"),
    "BF16": ("avx512f", "avx512bw", "avx512_bf16"),
    "FP8": ("avx512f", "avx512bw", "avx512_bf16", "avx512_vbmi"),
    "RAWINT4": ("avx512f", "avx512bw"),
    "LLAMAFILE": ("avx2",),  # every GGUF quant
}


# kt-kernel's LLAMAFILE backend (0.7.2 kt_kernel/utils/llamafile.py:90-113) splits each expert's intermediate
# dimension over the thread pools in blocks of QK_K = 256 weights: a width that is not a multiple of 256 is
# refused, and so is a pool count above width / 256 (a pool without a block).
LLAMAFILE_BLOCK = 256
# The legacy stack (stack_generation "legacy", kt-0.4-autodl): kt-kernel v0.4.4's KTMoEWrapper (python/
# experts.py) raises "Unsupported method" for any other, and its sglang fork builds that wrapper on every MoE
# layer, also with every expert on the GPU: the native BF16/FP8 backends came later.
LEGACY_KT_METHODS = frozenset({"AMXINT4", "AMXINT8", "RAWINT4", "LLAMAFILE", "MOE_INT4", "MOE_INT8"})


def llamafile_problem(arch: Architecture) -> str | None:
    """Why LLAMAFILE cannot serve this model's routed experts (None: it can)."""
    width = arch.moe_intermediate_size
    if width % LLAMAFILE_BLOCK == 0:
        return None
    return (
        f"kt-kernel's LLAMAFILE (GGUF) backend needs the expert width to be a multiple of {LLAMAFILE_BLOCK} "
        f"(QK_K; kt-kernel 0.7.2 utils/llamafile.py:94 refuses it at load), and {arch.name}'s is {width}: "
        "no GGUF serves it"
    )


def llamafile_max_pools(arch: Architecture) -> int:
    """The most thread pools LLAMAFILE can split one expert over: one QK_K block of its width each."""
    return max(1, arch.moe_intermediate_size // LLAMAFILE_BLOCK)


def isa_needs(fmt: sizing.CpuFormat) -> tuple[str, ...]:
    return ISA_NEEDS[fmt.kt_method if fmt.gguf else fmt.name]


def isa_missing(facts: dict, fmt: sizing.CpuFormat) -> list[str]:
    """Flags the backend needs that the facts say the CPU lacks (unknown flags are not counted)."""
    return [flag for flag in isa_needs(fmt) if isa_flag(facts, flag) is False]


def isa_unknown(facts: dict, fmt: sizing.CpuFormat) -> list[str]:
    """Flags the backend needs that the facts do not know about."""
    return [flag for flag in isa_needs(fmt) if isa_flag(facts, flag) is None]


def checkpoint_dtype(arch: Architecture, fmt: sizing.CpuFormat) -> str:
    """BF16-native serving of an FP8 model reads a BF16 conversion; everything else the published dtype."""
    return "bf16" if fmt.native_dtype == "bf16" else arch.native_dtype


def estimate(arch: Architecture, fmt: sizing.CpuFormat) -> sizing.Estimate:
    return sizing.serve(arch, fmt, checkpoint_dtype=checkpoint_dtype(arch, fmt))


def ram_holds(facts: dict, est: sizing.Estimate) -> bool:
    return est.ram_bytes <= facts["memory"]["total_bytes"]


def fits(facts: dict, est: sizing.Estimate) -> bool:
    disk = data_disk(facts)
    disk_ok = disk is None or est.disk_bytes <= disk["avail_bytes"]
    return disk_ok and ram_holds(facts, est)


def _requested(arch: Architecture, facts: dict, requested: str):
    """An explicit format: a checkpoint it cannot read is bad input (ValueError, whatever the host: `plan`
    exits 1 before any output); CPU flags the host lacks (or the facts do not know) are problems."""
    fmt = sizing.cpu_format(requested)
    if not fmt.serves(arch.native_dtype):
        if arch.native_dtype == "int4":
            needed = "an FP8" if fmt.native_dtype == "fp8" else "a BF16"
            raise ValueError(
                f"{arch.name} ships int4 experts, which only kt-kernel's RAWINT4 reads; --cpu-format "
                f"{fmt.name} would need {needed} checkpoint"
            )
        raise ValueError(
            f"--cpu-format {fmt.name} needs an {fmt.native_dtype.upper()} checkpoint; "
            f"{arch.name} ships {arch.native_dtype}"
        )
    missing, unknown = isa_missing(facts, fmt), isa_unknown(facts, fmt)
    problems = []
    if missing:
        problems.append(f"--cpu-format {fmt.name} needs CPU flags {', '.join(missing)}, missing here")
    elif unknown:
        problems.append(f"--cpu-format {fmt.name} needs CPU flags {', '.join(unknown)}; {ISA_UNKNOWN}")
    reason = f"{fmt.kt_method} as requested (--cpu-format {requested})"
    if fmt.name == "AMXINT4":
        reason += "; INT4 can cost accuracy (the kt-kernel README warns about Qwen3-30B-A3B)"
    return fmt, reason, problems


# Without AVX-512, kt-kernel 0.7.2 runs RAWINT4 on its AVX-VNNI-256 backend; its last fallback, the plain
# AVX2 one, segfaulted on a Kimi-K2-shaped layer (docs/results/2026-11-22-h100-rawint4).
RAWINT4_VNNI_FALLBACK = ("avx2", "fma", "avx_vnni")


def _int4(arch: Architecture, facts: dict) -> tuple[sizing.CpuFormat, str, list]:
    """An int4 checkpoint (compressed-tensors groups) is served by RAWINT4 on the CPU and the GPU alike; no
    other backend reads it, so a CPU without AVX-512 needs the AVX-VNNI-256 backend."""
    fmt = sizing.CPU_FORMATS["RAWINT4"]
    reason = (
        f"{arch.name} ships int4 experts (compressed-tensors, groups of {arch.quant_group_size}): RAWINT4 "
        "reads them in place for the CPU and the GPU (kt-kernel's Kimi-K2-Thinking tutorial); AMX is not "
        "needed"
    )
    missing, unknown = isa_missing(facts, fmt), isa_unknown(facts, fmt)
    if not missing and not unknown:
        return fmt, reason, []
    fallback = {flag: isa_flag(facts, flag) for flag in RAWINT4_VNNI_FALLBACK}
    lacking = ", ".join(missing) or f"{', '.join(unknown)} (unknown)"
    if all(fallback.values()):
        return fmt, f"{reason}; without {lacking} kt-kernel runs its slower AVX-VNNI-256 RAWINT4 backend", []
    needs = (
        "RAWINT4 needs AVX512F+AVX512BW, or AVX2+FMA+AVX-VNNI for kt-kernel's AVX-VNNI-256 backend (its "
        "plain AVX2 backend crashed, docs/results/2026-11-22-h100-rawint4)"
    )
    if None in fallback.values() or unknown:
        return fmt, reason, [f"{needs}; {ISA_UNKNOWN}"]
    absent = ", ".join(flag for flag, value in fallback.items() if value is False)
    return fmt, reason, [f"{needs}; this CPU lacks {lacking} and {absent}"]


# kt-kernel 0.7.2 _cpu_detect.py: the library it loads, best first, and the flags each needs; it reads them
# from /proc/cpuinfo alone, so AMX flags on a kernel that cannot grant the tiles still load the amx library
# (its BF16 method then runs AMXBF16_MOE, utils/amx.py:1012-1013), unless KT_KERNEL_CPU_VARIANT names one.
CPU_VARIANT_ENV = "KT_KERNEL_CPU_VARIANT"
NON_AMX_VARIANTS = (
    ("avx512_bf16", ("avx512f", "avx512bw", "avx512_vnni", "avx512_vbmi", "avx512_bf16")),
    ("avx512_vbmi", ("avx512f", "avx512bw", "avx512_vnni", "avx512_vbmi")),
    ("avx512_vnni", ("avx512f", "avx512bw", "avx512_vnni")),
    ("avx512_base", ("avx512f", "avx512bw")),
    ("avx2", ("avx2",)),
)
CPU_VARIANTS = ("amx", *(name for name, _ in NON_AMX_VARIANTS))


# kt-kernel v0.4.4 (the legacy stack) knows three names only (_cpu_detect.py:39-40, read lower-cased); any
# other value is ignored and its own detection picks amx from the flags. A name selects the multi-variant
# wheel's _kt_kernel_ext_<name> library; the single library `pip install .` builds (the legacy stack's, for
# this CPU, with AMX compiled in wherever the flags show it: setup.py) is loaded whatever the name.
LEGACY_CPU_VARIANTS = ("amx", "avx512", "avx2")


def _legacy_tiles(kt_method: str | None) -> str:
    """Whether the legacy library's AMX kernels (kt-kernel v0.4.4 operators/amx) run for `kt_method`."""
    if kt_method == "LLAMAFILE":
        return "LLAMAFILE, this plan's CPU method, runs none of its AMX kernels (operators/amx)"
    method = kt_method or "the CPU method"
    return f"{method} runs from that library as built, with the AMX kernels the flags compiled in"


def forced_cpu_variant(
    facts: dict, legacy: bool = False, kt_method: str | None = None
) -> tuple[str | None, str | None]:
    """(the kt-kernel library to force, why): only where the CPU shows AMX flags that its kernel (< 5.16)
    cannot grant; kt-kernel would otherwise load its amx library and fault on the first tile instruction.
    `legacy`: kt-kernel v0.4.4's names (LEGACY_CPU_VARIANTS); its reason names what `kt_method` runs."""
    old_kernel = amx_blocked_by_kernel(facts) if has_amx(facts) else None
    if not old_kernel:
        return None, None
    if legacy:
        variant = "avx512" if isa_flag(facts, "avx512f") else "avx2"
        return variant, (
            f"{variant}: kernel {old_kernel} does not grant AMX tiles, but kt-kernel v0.4.4 picks amx from "
            f"the CPU flags alone; {CPU_VARIANT_ENV}={variant} (v0.4.4 takes amx, avx512 or avx2) is set "
            f"in the server's environment and selects _kt_kernel_ext_{variant} of a multi-variant build. "
            "The legacy stack builds one library for this CPU (pip install ., AMX compiled in from the "
            "flags), which "
            f"loads whatever the variable says; {_legacy_tiles(kt_method)}"
        )
    variant = next(
        (name for name, needs in NON_AMX_VARIANTS if all(isa_flag(facts, f) for f in needs)), "avx2"
    )
    return variant, (
        f"{variant}: kernel {old_kernel} does not grant AMX tiles, but kt-kernel picks its library from "
        f"the CPU flags alone and would load the amx one; {CPU_VARIANT_ENV}={variant} (the best library "
        "these flags run) is set in the server's environment"
    )


def native_backend(arch: Architecture, facts: dict) -> sizing.CpuFormat | None:
    """The checkpoint's own BF16/FP8 format where this CPU runs its backend."""
    if arch.native_dtype not in ("bf16", "fp8"):
        return None
    native = sizing.CPU_FORMATS["FP8" if arch.native_dtype == "fp8" else "BF16"]
    if isa_missing(facts, native) or isa_unknown(facts, native):
        return None
    return native


def usable_native(arch: Architecture, facts: dict) -> sizing.CpuFormat | None:
    """The checkpoint's own BF16/FP8 format where this CPU runs its backend and RAM and disk hold it."""
    native = native_backend(arch, facts)
    return native if native and fits(facts, estimate(arch, native)) else None


def choose(
    arch: Architecture, facts: dict, requested: str | None, legacy: bool = False
) -> tuple[sizing.CpuFormat, str, list]:
    """(format, reason, problems). AMXINT8 on AMX unless only a native format fits the disk/RAM; without
    AMX the native BF16/FP8 backend where the ISA has it, else LLAMAFILE with GGUF Q4_K_M. `legacy`: the
    legacy stack, which has no native backend (LEGACY_KT_METHODS)."""
    if requested:
        fmt, reason, problems = _requested(arch, facts, requested)
        if legacy and fmt.kt_method not in LEGACY_KT_METHODS:
            problems.append(
                f"--cpu-format {fmt.name}: the legacy stack's kt-kernel v0.4.4 has no {fmt.kt_method} method "
                f"(it runs {', '.join(sorted(LEGACY_KT_METHODS))}); serve it on the current stack"
            )
        return fmt, reason, problems
    if arch.native_dtype == "int4":
        return _int4(arch, facts)
    native = None if legacy else usable_native(arch, facts)
    old_kernel = amx_blocked_by_kernel(facts) if has_amx(facts) else None
    if has_amx(facts) and not old_kernel:
        int8 = sizing.CPU_FORMATS["AMXINT8"]
        int8_est = estimate(arch, int8)
        if fits(facts, int8_est) or native is None:
            return int8, "host has AMX (amx_tile, amx_int8): AMXINT8 keeps accuracy at half BF16's RAM", []
        parts = "download + converted experts" if int8_est.breakdown["download"] else "converted experts"
        reason = (
            f"host has AMX, but AMXINT8 needs {gb(int8_est.disk_bytes)} disk and "
            f"{gb(int8_est.ram_bytes)} RAM ({parts}); {native.kt_method} reads the "
            f"{native.native_dtype} checkpoint in place, without a conversion"
        )
        return native, reason, []
    if old_kernel:
        no_amx = f"AMX unusable (kernel {old_kernel} < 5.16 cannot grant AMX tiles)"
    else:
        no_amx = "AMX flags unknown" if amx_unknown(facts) else "no AMX"
    if native:
        flags = ", ".join(isa_needs(native))
        return native, f"{no_amx}; the CPU has {flags} for the native {native.kt_method} backend", []
    gguf = sizing.CPU_FORMATS[sizing.DEFAULT_GGUF]
    if isa_missing(facts, gguf):
        return gguf, "no AMX, no AVX-512 BF16", ["CPU lacks AVX2: no kt-kernel backend runs on it"]
    if isa_unknown(facts, gguf):
        # Planning LLAMAFILE for what may be an AMX host would be a wrong plan, so refuse instead of guessing.
        reason = f"{ISA_UNKNOWN}: LLAMAFILE on GGUF Q4_K_M shown, the backend that needs the fewest flags"
        return gguf, reason, [f"{ISA_UNKNOWN}: cannot tell which kt-kernel backend runs on this CPU"]
    reason = f"{no_amx} (seed 000: 8352V-class hosts serve only): LLAMAFILE backend on GGUF Q4_K_M experts"
    return gguf, reason, []
