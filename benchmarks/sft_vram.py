"""GPU memory of one LoRA SFT step on the GPU-resident part of a KT model, measured beside ktinfra's estimate.

KT fine-tuning keeps the routed experts (and their LoRA) in CPU memory and runs them in kt-kernel; the GPU
holds the embedding, attention, norms, routers, dense MLPs / shared experts, the LM head, their LoRA and the
activations (kt_kernel/sft: `move_non_experts_to_gpu`, `KTMoEFunction`). This script builds exactly that
GPU part of a catalog model at full depth with random bf16 weights, replaces each routed-expert block by a
stand-in that does to the GPU what KT's does (hidden states to the CPU, a result of the same shape back, the
backward state kept on the CPU), adds PEFT LoRA on every linear layer the way LLaMA-Factory does
(`lora_target: all`, trainable parameters in fp32, AdamW), and runs forward + backward + optimizer step at
the given batch (default 1) and sequence lengths, every token a label (the worst case `cutoff_len` allows).

Per configuration it records torch's peak allocated and reserved bytes over two steps and the CUDA context
(what nvidia-smi shows beyond the allocator), and `ktinfra.sizing.sft`'s estimate with its breakdown.

    python benchmarks/sft_vram.py --model Qwen3-30B-A3B --seq 512,1024,2048 --out q30.json
    python benchmarks/sft_vram.py --model DeepSeek-V2-Lite --no-checkpointing --seq 512   # the legacy stack
    python benchmarks/sft_vram.py --model Qwen3-30B-A3B --tiny --device cpu              # wiring check only

Needs torch, transformers (>= 5) and peft. `--tiny` shrinks every width so the wiring runs on a CPU in seconds
(nothing is measured there).
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ktinfra import catalog, sizing  # noqa: E402

GIB = 1024**3
TINY = {  # widths for --tiny: same structure, a few MB
    "hidden_size": 64,
    "intermediate_size": 128,
    "moe_intermediate_size": 32,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "vocab_size": 512,
    "q_lora_rank": 32,
    "kv_lora_rank": 16,
    "qk_nope_head_dim": 16,
    "qk_rope_head_dim": 8,
    "v_head_dim": 16,
    "num_hidden_layers": 4,
}
GPU_TERMS = ("gpu_weights", "lora_gpu_train_state", "activation_checkpoints", "layer_working_set", "logits")
DROP_KEYS = ("quantization_config", "architectures", "torch_dtype", "num_nextn_predict_layers")


def catalog_config(name: str, tiny: bool) -> tuple[dict, catalog.Architecture]:
    """The catalog entry's config.json keys (BF16: the quantization block dropped) and its Architecture."""
    arch = catalog.resolve(name)
    config = {k: v for k, v in catalog.entry_config(name).items() if k not in DROP_KEYS}
    if tiny:
        config.update({k: v for k, v in TINY.items() if config.get(k) is not None})
        config["num_hidden_layers"] = TINY["num_hidden_layers"]
        if "kv_lora_rank" in config:  # MLA: one kv head per query head
            config["num_key_value_heads"] = config["num_attention_heads"]
    arch = catalog.from_config({**config, "torch_dtype": "bfloat16"}, name=arch.name)
    return config, arch


def estimate(arch: catalog.Architecture, seq: int, checkpointing: bool, batch: int = 1) -> dict:
    est = sizing.sft(arch, cutoff_len=seq, batch_size=batch, gradient_checkpointing=checkpointing)
    return {"vram_bytes": est.vram_bytes, "breakdown": {k: est.breakdown[k] for k in GPU_TERMS}}


def build(config: dict, device: str):
    """The model, each routed-expert block replaced by the CPU stand-in; only the GPU part is allocated."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = AutoConfig.for_model(config["model_type"], **{k: v for k, v in config.items() if k != "model_type"})
    cfg.use_cache = False
    block = cpu_experts_block_class()
    replaced = 0
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16, attn_implementation="sdpa")
        for layer in model.model.layers:
            if getattr(layer.mlp, "experts", None) is not None:
                layer.mlp = block(cfg, getattr(layer.mlp, "shared_experts", None))
                replaced += 1
    model.to_empty(device=device)
    _init(model, cfg, device)
    return model, replaced


def _init(model, cfg, device: str) -> None:
    import torch

    torch.manual_seed(0)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("norm.weight"):
                param.fill_(1.0)
            else:
                param.normal_(0.0, 0.02)
        for name, module in model.named_modules():
            if type(module).__name__.endswith("RotaryEmbedding"):
                parent_name, _, attr = name.rpartition(".")
                parent = model.get_submodule(parent_name) if parent_name else model
                with torch.device(device):  # inv_freq is a non-persistent buffer: to_empty left it garbage
                    setattr(parent, attr, type(module)(config=cfg))


def cpu_experts_block_class():
    """The stand-in for a routed-expert block (built here so the module imports without torch)."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    class CpuExperts(torch.autograd.Function):
        """Routed experts as KT runs them: the GPU sends hidden states and routing weights to the CPU and gets
        one hidden-size result back; what backward needs stays in CPU memory (ctx attributes, not saved
        tensors, so checkpointing neither keeps nor moves it)."""

        @staticmethod
        def forward(ctx, hidden, weights):
            x = hidden.detach().to("cpu")
            w = weights.detach().float().to("cpu")
            ctx.cpu_state = (x, w)
            return (x.float() * w.sum(-1, keepdim=True)).to(hidden.dtype).to(hidden.device)

        @staticmethod
        def backward(ctx, grad):
            x, w = ctx.cpu_state
            g = grad.to("cpu").float()
            grad_hidden = (g * w.sum(-1, keepdim=True)).to(grad.dtype).to(grad.device)
            grad_w = (g * x.float()).sum(-1, keepdim=True).expand_as(w)
            return grad_hidden, grad_w.to(grad.dtype).to(grad.device)

    class CpuExpertsBlock(nn.Module):
        def __init__(self, cfg, shared):
            super().__init__()
            experts = getattr(cfg, "num_experts", None) or cfg.n_routed_experts
            self.topk = cfg.num_experts_per_tok
            self.gate = nn.Linear(cfg.hidden_size, experts, bias=False, dtype=torch.bfloat16)
            self.shared_experts = shared

        def forward(self, hidden_states):
            b, s, h = hidden_states.shape
            flat = hidden_states.reshape(-1, h)
            probs = F.softmax(self.gate(flat), dim=-1, dtype=torch.float32)
            weights, _ = torch.topk(probs, self.topk, dim=-1)
            weights = (weights / weights.sum(-1, keepdim=True)).to(hidden_states.dtype)
            out = CpuExperts.apply(flat, weights).view(b, s, h)
            if self.shared_experts is not None:
                out = out + self.shared_experts(hidden_states)
            return out

    return CpuExpertsBlock


def add_lora(model, rank: int):
    """PEFT LoRA as LLaMA-Factory sets it up: every linear layer but the LM head, alpha 2r, no dropout,
    trainable parameters cast to fp32; non-reentrant gradient checkpointing is enabled separately."""
    import peft.utils.transformers_weight_conversion as conversion
    import torch
    from peft import LoraConfig, get_peft_model

    # PEFT rewrites the targets of transformers-5 MoE models to their fused expert parameters (gate_proj ->
    # gate_up_proj), for adapters trained on transformers 4. The routed experts are not on the GPU here, so
    # that rewrite would only take the shared experts and dense MLPs out of the LoRA: turn it off.
    conversion.convert_peft_config_for_transformers = lambda *args, **kwargs: None
    targets = sorted(
        {
            n.rsplit(".", 1)[-1]
            for n, m in model.named_modules()
            if isinstance(m, torch.nn.Linear) and not n.endswith("lm_head")
        }
    )
    peft_model = get_peft_model(
        model,
        LoraConfig(
            r=rank, lora_alpha=2 * rank, lora_dropout=0.0, target_modules=targets, task_type="CAUSAL_LM"
        ),
    )
    for param in peft_model.parameters():
        if param.requires_grad:
            param.data = param.data.float()
    return peft_model


def run_steps(
    model, optimizer, seq: int, vocab: int, device: str, batch: int = 1, steps: int = 2, trace: bool = False
) -> dict:
    import torch

    cuda = device.startswith("cuda")
    trace = trace and cuda
    peaks, reserved, losses, times = [], [], [], []
    forward_peaks, saved = [], []  # peak during forward; what forward leaves for backward
    for step in range(steps):
        ids = torch.randint(0, vocab, (batch, seq), device=device)
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        if trace and step == steps - 1:
            torch.cuda.memory._record_memory_history(max_entries=1_000_000)
        start = time.perf_counter()
        out = model(input_ids=ids, attention_mask=torch.ones_like(ids), labels=ids)
        loss = out.loss
        del out  # the Trainer keeps only the loss (compute_loss without return_outputs)
        if cuda:
            forward_peaks.append(torch.cuda.max_memory_allocated())
            saved.append(torch.cuda.memory_allocated())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if cuda:
            torch.cuda.synchronize()
            peaks.append(torch.cuda.max_memory_allocated())
            reserved.append(torch.cuda.max_memory_reserved())
        times.append(time.perf_counter() - start)
        losses.append(loss.item())
        del loss
    result = {"loss": losses, "step_s": [round(t, 3) for t in times]}
    if trace:
        result["peak_live_by_site"] = peak_live_by_site(torch.cuda.memory._snapshot())
        torch.cuda.memory._record_memory_history(enabled=None)
    if cuda:
        free, total = torch.cuda.mem_get_info()
        result.update(
            peak_allocated_bytes=max(peaks),
            forward_peak_bytes=max(forward_peaks),
            after_forward_bytes=max(saved),
            peak_reserved_bytes=max(reserved),
            device_used_bytes_after=total - free,
            reserved_bytes_after=torch.cuda.memory_reserved(),
        )
    return result


def peak_live_by_site(snapshot: dict, top: int = 25) -> list[dict]:
    """Replay the recorded step's allocations and frees; at its peak, the live blocks allocated during the
    step grouped by the innermost frame in transformers / peft / torch.nn / this script (weights, LoRA
    parameters and optimizer state allocated before the step are not in the trace)."""
    live, current, peak, at_peak = {}, 0, 0, {}
    for event in snapshot["device_traces"][0]:
        if event["action"] == "alloc":
            live[event["addr"]] = event
            current += event["size"]
            if current > peak:
                peak, at_peak = current, dict(live)
        elif event["action"] == "free_completed" and event["addr"] in live:
            current -= live.pop(event["addr"])["size"]
    sites: dict[str, list[int]] = {}
    for event in at_peak.values():
        frames = event.get("frames") or []
        site = next(
            (
                f"{f['filename'].rsplit('site-packages/', 1)[-1]}:{f['line']} {f['name']}"
                for f in frames
                if any(k in f["filename"] for k in ("transformers/", "peft/", "torch/nn/", "sft_vram"))
            ),
            "?",
        )
        entry = sites.setdefault(site, [0, 0])
        entry[0] += event["size"]
        entry[1] += 1
    ranked = sorted(sites.items(), key=lambda kv: -kv[1][0])[:top]
    return [{"site": k, "bytes": v[0], "blocks": v[1], "peak_step_bytes": peak} for k, v in ranked]


def measure(
    name: str,
    seqs: list[int],
    checkpointing: bool,
    rank: int,
    device: str,
    tiny: bool,
    batch: int = 1,
    trace: bool = False,
) -> dict:
    import torch

    config, arch = catalog_config(name, tiny)
    cuda = device.startswith("cuda")
    if cuda:
        torch.cuda.init()
        torch.zeros(1, device=device)
        free, total = torch.cuda.mem_get_info()
        context = total - free  # the CUDA context (and whatever else holds this GPU) before any tensor
    t0 = time.perf_counter()
    model, replaced = build(config, device)
    model = add_lora(model, rank)
    if checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    params = sum(p.numel() for p in model.parameters())
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=1e-4)
    report = {
        "model": arch.name,
        "device": device,
        "tiny": tiny,
        "gradient_checkpointing": checkpointing,
        "lora_rank": rank,
        "layers": arch.num_layers,
        "expert_blocks_on_cpu": replaced,
        "gpu_params": params,
        "estimate_non_expert_params": arch.non_expert_params,
        "estimate_lora_params": sizing.lora_params_gpu(arch, rank),
        "trainable_params": sum(p.numel() for p in trainable),
        "build_s": round(time.perf_counter() - t0, 1),
        "torch": torch.__version__,
        "transformers": __import__("transformers").__version__,
        "peft": __import__("peft").__version__,
        "runs": [],
    }
    if cuda:
        report["gpu"] = torch.cuda.get_device_name(device)
        report["context_bytes"] = context
        report["weights_allocated_bytes"] = torch.cuda.memory_allocated()
    for seq in seqs:
        run = {"seq": seq, "batch": batch, "estimate": estimate(arch, seq, checkpointing, batch)}
        try:
            run.update(run_steps(model, optimizer, seq, config["vocab_size"], device, batch, trace=trace))
        except torch.OutOfMemoryError as exc:
            run["oom"] = str(exc).splitlines()[0]
            optimizer.zero_grad(set_to_none=True)
            gc.collect()
            torch.cuda.empty_cache()
        report["runs"].append(run)
        print(json.dumps({"model": arch.name, "checkpointing": checkpointing, **_short(run)}), flush=True)
    return report


def _short(run: dict) -> dict:
    out = {
        "seq": run["seq"],
        "batch": run.get("batch", 1),
        "estimate_gib": round(run["estimate"]["vram_bytes"] / GIB, 2),
    }
    if "peak_allocated_bytes" in run:
        out["peak_allocated_gib"] = round(run["peak_allocated_bytes"] / GIB, 2)
        out["peak_reserved_gib"] = round(run["peak_reserved_bytes"] / GIB, 2)
    for key in ("oom", "loss"):
        if key in run:
            out[key] = run[key]
    return out


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The options, all checked before the model is built and the GPU minutes are spent: an unknown model,
    `--seq 512,x` or a length, batch or rank of 0 failed with a traceback, and an --out in a missing
    directory failed only after every run, losing the report."""
    sys.path.insert(0, str(Path(__file__).parent))
    from stream import _positive, check_out

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="catalog name (Qwen3-30B-A3B, DeepSeek-V3, ...)")
    parser.add_argument(
        "--seq",
        type=lambda text: [_positive(int)(s.strip()) for s in text.split(",") if s.strip()],
        default=[2048],
        help="comma-separated sequence lengths",
    )
    parser.add_argument("--batch", type=_positive(int), default=1, help="sequences per step")
    parser.add_argument("--trace", action="store_true", help="what is live at the last step's peak, by site")
    parser.add_argument("--rank", type=_positive(int), default=sizing.SFT_LORA_RANK)
    parser.add_argument("--no-checkpointing", action="store_true", help="the legacy KT DeepSeek model's way")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--tiny", action="store_true", help="shrunken widths: checks the wiring on a CPU")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    if not args.seq:
        parser.error("argument --seq: no sequence length")
    try:
        catalog.entry_config(args.model)
    except catalog.UnknownModelError as exc:
        parser.error(f"argument --model: {exc}")
    if args.out is not None:
        check_out(parser, args.out)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    for module in ("torch", "transformers", "peft"):
        try:
            __import__(module)
        except ImportError as exc:
            sys.exit(f"error: sft_vram.py needs {module} (torch, transformers >= 5, peft): {exc}")
    report = measure(
        args.model,
        args.seq,
        not args.no_checkpointing,
        args.rank,
        args.device,
        args.tiny,
        args.batch,
        args.trace,
    )
    if args.out:
        from stream import write_json

        write_json(args.out, report)
    else:
        print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
