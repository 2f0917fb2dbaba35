"""Compare a converted SGLang adapter with the KT LoRA output it came from; prints a JSON report.

Run with the serving venv's python (torch, safetensors): adapter_math.py KT_OUTPUT_DIR CONVERTED_DIR. From
the formats (kt_kernel/sft/lora.py buffers, PEFT key names), not from the converter's code, so it checks the
converter instead of repeating it: for every layer, projection and expert e, lora_B @ lora_A of the converted
expert must equal fused_b[e] @ fused_a[e] of the input, and the non-expert PEFT tensors must pass unchanged.
"""

import json
import sys

import torch
from safetensors.torch import load_file

kt_dir, out_dir = sys.argv[1], sys.argv[2]
fused = load_file(f"{kt_dir}/fused_expert_lora.safetensors")
peft = load_file(f"{kt_dir}/adapter_model.safetensors")
out = load_file(f"{out_dir}/adapter_model.safetensors")

checked, max_diff, exact, missing = 0, 0.0, True, []
for key, tensor_a in sorted(fused.items()):
    if not key.endswith("_lora_a"):
        continue
    layer, proj = key.split(".")[1], key.split(".")[-1].removesuffix("_lora_a")
    tensor_b = fused[key.removesuffix("_lora_a") + "_lora_b"]
    for e in range(tensor_a.shape[0]):
        prefix = f"model.layers.{layer}.mlp.experts.{e}.{proj}_proj"
        a, b = out.get(f"{prefix}.lora_A.weight"), out.get(f"{prefix}.lora_B.weight")
        if a is None or b is None:
            missing.append(prefix)
            continue
        delta_out = b.float() @ a.float()
        delta_in = tensor_b[e].float() @ tensor_a[e].float()
        max_diff = max(max_diff, (delta_out - delta_in).abs().max().item())
        exact = exact and torch.equal(a, tensor_a[e]) and torch.equal(b, tensor_b[e])
        checked += 1

passthrough = sum(
    torch.equal(out.get(k.replace("base_model.model.", "", 1), torch.empty(0)), v) for k, v in peft.items()
)
e0 = "model.layers.0.mlp.experts.0"
report = {
    "keys": len(out),
    "expert_pairs_checked": checked,
    "missing": missing,
    "max_abs_diff": max_diff,
    "exact": exact,
    "nonexpert_unchanged": passthrough,
    "nonexpert_total": len(peft),
    "dtypes": sorted({str(v.dtype) for v in out.values()}),
    "expert0_shapes": {
        f"{proj}.{ab}": list(out[f"{e0}.{proj}.lora_{ab}.weight"].shape)
        for proj in ("gate_proj", "up_proj", "down_proj")
        for ab in "AB"
    },
    "expert0_vs_1_differ": not torch.equal(
        out[f"{e0}.gate_proj.lora_A.weight"], out["model.layers.0.mlp.experts.1.gate_proj.lora_A.weight"]
    ),
}
print(json.dumps(report))
