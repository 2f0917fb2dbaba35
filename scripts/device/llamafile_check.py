"""On the device host: kt-kernel's LLAMAFILE backend against the planner's rules for it.

Writes tiny GGUF files with gguf-py's own writer, then builds kt-kernel's LlamafileMoEWrapper for expert
widths and thread-pool counts the planner (ktinfra.plan.formats.llamafile_problem / llamafile_max_pools)
accepts or refuses, and loads a single .gguf file and a directory with GGUFLoader (the planner plans both).
Pool counts above 1 are only tried where kt-kernel refuses them before binding pools to NUMA nodes, so the
check is safe on a one-node host. usage: llamafile_check.py --out FILE.json
"""

from __future__ import annotations

import argparse
import json
import tempfile
import traceback
from pathlib import Path
from types import SimpleNamespace

import gguf
import numpy as np

from ktinfra.plan import formats

EXPERTS, HIDDEN = 4, 256


def write_gguf(path: Path, width: int, qtype: str = "F32") -> None:
    """Layer 0's expert tensors (random, so a quantizer has something to scale) in `qtype`."""
    kind = gguf.GGMLQuantizationType[qtype]
    writer = gguf.GGUFWriter(str(path), "qwen3moe")
    rng = np.random.default_rng(0)
    for proj, shape in (("gate", (EXPERTS, width, HIDDEN)), ("up", (EXPERTS, width, HIDDEN)),
                        ("down", (EXPERTS, HIDDEN, width))):  # fmt: skip
        data = rng.standard_normal(shape, dtype=np.float32) * 0.02
        if qtype == "F32":
            writer.add_tensor(f"blk.0.ffn_{proj}_exps.weight", data)
        else:
            writer.add_tensor(
                f"blk.0.ffn_{proj}_exps.weight", gguf.quants.quantize(data, kind), raw_dtype=kind
            )
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def planner(width: int) -> dict:
    arch = SimpleNamespace(moe_intermediate_size=width, name=f"width-{width}")  # the two fields they read
    return {"problem": formats.llamafile_problem(arch), "max_pools": formats.llamafile_max_pools(arch)}


def wrapper(weight_path: Path, width: int, pools: int, load: bool = False) -> str:
    from kt_kernel.utils.llamafile import LlamafileMoEWrapper

    try:
        moe = LlamafileMoEWrapper(
            layer_idx=0,
            num_experts=EXPERTS,
            num_experts_per_tok=2,
            hidden_size=HIDDEN,
            moe_intermediate_size=width,
            gpu_experts_mask=None,
            cpuinfer_threads=2,
            threadpool_count=pools,
            weight_path=str(weight_path),
            chunked_prefill_size=64,
        )
        if load:
            moe.load_weights()
    except ValueError as exc:
        return f"ValueError: {str(exc).splitlines()[0]}"
    except Exception as exc:  # noqa: BLE001 - reported, not hidden
        return f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}"
    return "ok"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    out = Path(parser.parse_args().out)
    from kt_kernel.utils.loader import GGUFLoader

    results: dict = {"cases": [], "loader": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for width, pools in ((768, 1), (768, 4), (1408, 1), (1024, 5), (512, 3)):
            folder = Path(tmp) / f"w{width}-p{pools}"
            folder.mkdir()
            write_gguf(folder / f"tiny-w{width}.gguf", width)
            plan = planner(width)
            refused = plan["problem"] is not None or pools > plan["max_pools"]
            got = wrapper(folder, width, pools)
            results["cases"].append({"width": width, "pools": pools, "planner_refuses": refused,
                                     "kt_kernel": got, "agree": refused == (got != "ok")})  # fmt: skip
        # the expert tensor types gguf-py can write, loaded by kt-kernel against what ktinfra plans
        from ktinfra import gguf_files, sizing

        results["types"] = []
        for qtype in ("F32", "F16", "BF16", "Q8_0", "Q4_0", "Q5_0", "MXFP4"):
            folder = Path(tmp) / f"t-{qtype}"
            folder.mkdir()
            write_gguf(folder / f"tiny-{qtype}.gguf", 768, qtype)
            read = gguf_files.read_dir(folder)
            tensor_types = sorted({t.type_name for m in read.models for t in m.expert_tensors()})
            try:  # the --cpu-format ktinfra offers, and whether it reads such tensors
                planned = sizing.cpu_format(f"GGUF:{qtype}").name
            except ValueError as exc:
                planned = f"not offered: {str(exc).split(';')[0]}"
            planned = {"cpu_format": planned, "refused": gguf_files.llamafile_failure({qtype})}
            got = wrapper(folder, 768, 1, load=True)
            results["types"].append({"type": qtype, "ktinfra_reads": tensor_types, "ktinfra_plans": planned,
                                     "kt_kernel_load": got})  # fmt: skip
        single = Path(tmp) / "w768-p1" / "tiny-w768.gguf"
        for name, path in (("file", single), ("directory", single.parent)):
            loader = GGUFLoader(str(path))
            results["loader"][name] = sorted(loader.tensor_info)
    results["all_agree"] = all(case["agree"] for case in results["cases"])
    results["file_equals_directory"] = results["loader"]["file"] == results["loader"]["directory"]
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps({k: results[k] for k in ("all_agree", "file_equals_directory")}))
    for case in results["cases"] + results["types"]:
        print(case)


if __name__ == "__main__":
    main()
