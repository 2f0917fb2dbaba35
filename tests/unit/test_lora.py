"""LoRA pipeline: adapter validation, conversion plumbing, serve command. A real PEFT adapter and a real
server are used in tests/integration/operate; here adapters are written byte by byte in safetensors format."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import env_layout
import pytest
from safetensors_file import write_safetensors
from typer.testing import CliRunner

from ktinfra import lora
from ktinfra.cli import app


def peft_dir(root: Path, rank: int = 4, alpha: float | None = 8, base: str = "/models/tiny") -> Path:
    root.mkdir(parents=True)
    config = {
        "peft_type": "LORA",
        "r": rank,
        "target_modules": ["q_proj", "v_proj"],
        "base_model_name_or_path": base,
    }
    if alpha is not None:
        config["lora_alpha"] = alpha
    (root / "adapter_config.json").write_text(json.dumps(config))
    write_safetensors(
        root / "adapter_model.safetensors",
        {
            "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight": [rank, 64],
            "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight": [64, rank],
        },
    )
    return root


def fused_shapes(experts=8, rank=4, hidden=64, inter=32, layers=(0,)) -> dict[str, list[int]]:
    """kt-kernel's fused expert LoRA layout (kt_kernel/sft/lora.py _create_fused_expert_lora_buffers)."""
    per_layer = {
        "gate_lora_a": [experts, rank, hidden],
        "gate_lora_b": [experts, inter, rank],
        "up_lora_a": [experts, rank, hidden],
        "up_lora_b": [experts, inter, rank],
        "down_lora_a": [experts, rank, inter],
        "down_lora_b": [experts, hidden, rank],
    }
    return {f"layers.{n}.experts.{k}": v for n in layers for k, v in per_layer.items()}


def write_manifest(root: Path, rank: int = 4, status: str = "ready") -> None:
    """kt_adapter_manifest.json as kt_kernel/sft/artifacts.py save_kt_adapter_artifacts writes it."""
    names = ("adapter_config.json", "adapter_model.safetensors", "fused_expert_lora.safetensors")
    artifacts = {n: {"size": (root / n).stat().st_size, "sha256": "0" * 64} for n in names}
    payload = {"version": 1, "status": status, "lora": {"rank": rank, "alpha": 8.0}, "artifacts": artifacts}
    (root / "kt_adapter_manifest.json").write_text(json.dumps(payload))


def kt_dir(root: Path, manifest: bool = True, **shape_args) -> Path:
    """A KT LoRA training output: PEFT's files (attention LoRA), the fused expert LoRA, the manifest."""
    peft_dir(root)
    write_safetensors(root / "fused_expert_lora.safetensors", fused_shapes(**shape_args))
    if manifest:
        write_manifest(root)
    return root


def test_peft_adapter_is_inspected(tmp_path):
    adapter = lora.inspect_adapter("a", peft_dir(tmp_path / "out"), base="/models/tiny")
    assert (adapter.kind, adapter.rank, adapter.alpha, adapter.tensors) == ("peft", 4, 8, 2)
    assert adapter.warnings == []
    assert not lora.needs_conversion(adapter, legacy=False)
    assert lora.needs_conversion(adapter, legacy=True)


def test_kt_fused_output_needs_the_kt_converter(tmp_path):
    adapter = lora.inspect_adapter("a", kt_dir(tmp_path / "kt"))
    assert adapter.kind == "kt-fused"
    assert adapter.tensors == 2 + 6
    assert adapter.warnings == []
    assert lora.needs_conversion(adapter, legacy=False)


def test_kt_output_without_peft_weights_takes_the_rank_from_the_fused_tensors(tmp_path):
    root = tmp_path / "kt"
    root.mkdir()
    write_safetensors(root / "fused_expert_lora.safetensors", fused_shapes(rank=2, layers=(0, 1)))
    adapter = lora.inspect_adapter("a", root)
    assert (adapter.kind, adapter.rank, adapter.tensors) == ("kt-fused", 2, 12)
    assert adapter.warnings == [
        "no kt_adapter_manifest.json (kt-kernel 0.7 writes it when a save completes): provenance not checked"
    ]


def _fused(root: Path, shapes: dict[str, list[int]]) -> None:
    write_safetensors(root / "fused_expert_lora.safetensors", shapes)


def _edit_manifest(root: Path, **changes) -> None:
    payload = json.loads((root / "kt_adapter_manifest.json").read_text())
    (root / "kt_adapter_manifest.json").write_text(json.dumps({**payload, **changes}))


@pytest.mark.parametrize(
    ("breaks", "message"),
    [
        (lambda d: _edit_manifest(d, status="writing"), "status is not 'ready'"),
        (lambda d: _edit_manifest(d, lora={"rank": 8}), "lora.rank 8 but the fused tensors have rank 4"),
        (lambda d: _fused(d, fused_shapes(layers=(0, 1))),
         "fused_expert_lora.safetensors is .* bytes, the manifest says"),
        (lambda d: (d / "adapter_model.safetensors").rename(d / "adapter_model.bin"),
         "reads only adapter_model.safetensors"),
        (lambda d: (d / "kt_full_experts.index.json").write_text("{}"), "fully trained expert weights"),
        (lambda d: _fused(d, fused_shapes(rank=8)), "r=4 but the fused expert LoRA has rank 8"),
        (lambda d: _fused(d, {**fused_shapes(), "layers.0.experts.down_lora_b": [8, 65, 4]}),
         "disagree on hidden/intermediate size"),
        (lambda d: _fused(d, {**fused_shapes(), "layers.0.experts.up_lora_a": [7, 4, 64]}),
         r"expert counts \[7, 8\]"),
        (lambda d: _fused(d, {"layers.0.experts.gate_proj": [8, 4, 4]}), "unexpected tensor names"),
    ],
)  # fmt: skip
def test_broken_kt_outputs_are_refused_before_conversion(tmp_path, breaks, message):
    root = kt_dir(tmp_path / "kt")
    breaks(root)
    with pytest.raises(lora.LoraError, match=message):
        lora.inspect_adapter("a", root)


def test_kt_lora_experts_tensors_are_refused(tmp_path):
    root = peft_dir(tmp_path / "le")
    write_safetensors(
        root / "adapter_model.safetensors",
        {"base_model.model.model.layers.0.mlp.lora_experts.0.le_gate.weight": [4, 64]},
    )
    with pytest.raises(lora.LoraError, match="LoRA-Experts"):
        lora.inspect_adapter("a", root)


def test_rank_mismatch_and_garbage_are_rejected(tmp_path):
    with pytest.raises(lora.LoraError, match="do not match r=8"):
        lora.inspect_adapter("a", _rank8(tmp_path))
    bad = peft_dir(tmp_path / "bad")
    (bad / "adapter_model.safetensors").write_bytes(b"\xff" * 20)
    with pytest.raises(lora.LoraError, match="not a"):
        lora.inspect_adapter("a", bad)
    with pytest.raises(lora.LoraError, match="directory not found"):
        lora.inspect_adapter("a", tmp_path / "missing")


def _rank8(tmp_path: Path) -> Path:
    d = peft_dir(tmp_path / "r8", rank=4)
    config = json.loads((d / "adapter_config.json").read_text())
    (d / "adapter_config.json").write_text(json.dumps({**config, "r": 8}))
    return d


def test_base_model_mismatch_is_a_warning(tmp_path):
    adapter = lora.inspect_adapter("a", peft_dir(tmp_path / "o"), base="/models/other")
    assert adapter.warnings == ["trained on '/models/tiny', serving on '/models/other'"]


@pytest.mark.parametrize("spec", ["noequals", "=x", "bad name=/x", "a="])
def test_adapter_spec_is_checked(spec):
    with pytest.raises(lora.LoraError):
        lora.parse_adapter_spec(spec)


def test_conversion_commands_follow_upstream_clis(tmp_path):
    kt = lora.inspect_adapter("a", kt_dir(tmp_path / "kt"))
    cmd = lora.conversion_command(kt, Path("/o"), "/models/tiny", False, Path("/c.py"), "py")
    assert cmd == ["py", "/c.py", str(kt.path), "/o", "--base-model-name-or-path", "/models/tiny"]
    legacy = lora.conversion_command(kt, Path("/o"), "/m", True, Path("/convert_lora.py"), "py")
    assert legacy == ["py", "/convert_lora.py", str(kt.path), "/o", "--quiet"]
    no_alpha = lora.inspect_adapter("b", peft_dir(tmp_path / "na", alpha=None))
    with pytest.raises(lora.LoraError, match="pass --lora-alpha"):
        lora.conversion_command(no_alpha, Path("/o"), "/m", False, Path("/c.py"), "py")
    with_alpha = lora.conversion_command(
        no_alpha, Path("/o"), "/m", False, Path("/c.py"), "py", lora_alpha=16
    )
    assert with_alpha[-2:] == ["--lora-alpha", "16"]


def test_missing_converter_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.delenv(lora.CONVERTER_ENV, raising=False)
    monkeypatch.setitem(lora.CONVERTER_SEARCH, "legacy", [tmp_path / "nope.py"])
    with pytest.raises(lora.LoraError, match="convert_lora.py .sglang fork. not found"):
        lora.find_converter(legacy=True)


def test_the_legacy_converter_is_looked_for_first_in_kt_python_envs_sglang_checkout(monkeypatch):
    """Review repro: the legacy search began at /opt/ktinfra/src/sglang, where nothing checks sglang out;
    kt_python_env clones the legacy profile's sglang source to kt_python_env_src_dir/sglang."""
    monkeypatch.delenv(lora.CONVERTER_ENV, raising=False)
    wanted = Path(env_layout.checkout("sglang")) / "convert_lora.py"
    assert lora.CONVERTER_SEARCH["legacy"][0] == wanted
    with pytest.raises(lora.LoraError, match=f"looked in: {wanted}; "):  # named first when missing
        monkeypatch.setitem(lora.CONVERTER_SEARCH, "legacy", lora.CONVERTER_SEARCH["legacy"][:2])
        lora.find_converter(legacy=True)


def test_failed_conversion_leaves_nothing_behind(tmp_path):
    adapter = lora.inspect_adapter("a", peft_dir(tmp_path / "in"))
    out = tmp_path / "converted"
    failing = [sys.executable, "-c", "import sys; sys.exit('converter exploded')"]
    with pytest.raises(lora.LoraError, match="converter exploded"):
        lora.convert(adapter, out, lambda target: failing)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in"]


def test_lora_plan_enforces_kt_lora_constraints():
    plan_serve = {
        "kt_num_gpu_experts": 128,  # every expert of Qwen3-30B-A3B on the GPU: nothing deferred
        "kt_max_deferred_experts_per_token": 0,
        "max_running_requests": 1,
        "kt_gpu_prefill_token_threshold": 4096,
    }
    plan = {"model": {"num_experts": 128, "experts_per_token": 8}, "serve": plan_serve, "reasons": {}}
    planned = lora.lora_plan(plan, {"mylora": Path("/a/b")}, max_loras=2, backend="triton")
    serve = planned["serve"]
    assert serve["kt_num_gpu_experts"] == 0
    # the experts now on the CPU are deferred as the planner defers them for 0 GPU experts
    assert serve["kt_max_deferred_experts_per_token"] == 2
    assert serve["max_running_requests"] == 2
    assert serve["kt_gpu_prefill_token_threshold"] is None
    assert serve["lora"] == {"paths": {"mylora": "/a/b"}, "max_loras_per_batch": 2, "backend": "triton"}
    assert "raised from 1" in planned["reasons"]["max_running_requests"]
    assert plan_serve["kt_num_gpu_experts"] == 128 and plan["reasons"] == {}  # the caller's plan is kept
    with pytest.raises(lora.LoraError, match="--lora-backend"):
        lora.lora_plan({}, {}, 1, "cuda")
    # in sglang's LORA_BACKEND_CHOICES but Ascend NPU kernels only: render refuses it, so the plan (which
    # kt_serve writes before render) does too
    with pytest.raises(lora.LoraError, match="one of triton, csgmv, torch_native$"):
        lora.lora_plan({}, {}, 1, "ascend")


def test_lora_plan_keeps_the_deferral_of_a_plan_with_no_gpu_experts():
    plan = {"model": {"num_experts": 128, "experts_per_token": 8}, "serve": {"kt_num_gpu_experts": 0,
            "kt_max_deferred_experts_per_token": 1, "max_running_requests": 8}}  # fmt: skip
    serve = lora.lora_plan(plan, {"a": Path("/a")}, 1, "triton")["serve"]
    assert serve["kt_max_deferred_experts_per_token"] == 1 and serve["max_running_requests"] == 8


H100 = Path(__file__).resolve().parents[1] / "fixtures" / "hosts" / "h100-xeon-amx-16c"


def serve_args(adapter: Path, *extra: str) -> list[str]:
    return [
        "lora", "serve", "--base", "/models/Qwen3-30B-A3B", "--adapter", f"mine={adapter}",
        "--model", "Qwen3-30B-A3B", "--from", str(H100), *extra,
    ]  # fmt: skip


def test_cli_renders_unit_with_lora_flags(tmp_path):
    adapter = peft_dir(tmp_path / "out")
    res = CliRunner().invoke(app, serve_args(adapter, "--out", str(tmp_path / "bundle"), "--json"))
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    line = " ".join(data["command"])
    assert "--kt-num-gpu-experts 0" in line
    assert (
        f"--enable-lora --lora-paths mine={adapter.resolve()} --max-loras-per-batch 1 --lora-backend triton"
        in line
    )
    assert data["unit"] == "ktinfra-serve@Qwen3-30B-A3B.service"
    written = sorted(p.name for p in (tmp_path / "bundle").iterdir())
    assert written == ["ktinfra-serve-Qwen3-30B-A3B.env", "ktinfra-serve@.service", "plan-lora.json"]
    env = (tmp_path / "bundle" / "ktinfra-serve-Qwen3-30B-A3B.env").read_text()
    assert "--kt-num-gpu-experts 0" in env and "--enable-lora" in env


def test_cli_dry_run_writes_nothing(tmp_path):
    adapter = peft_dir(tmp_path / "out")
    res = CliRunner().invoke(
        app,
        serve_args(adapter, "--out", str(tmp_path / "bundle"), "--dry-run", "--json"),
    )
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["conversions"] == [] and data["serve"]["lora"]["paths"] == {"mine": str(adapter.resolve())}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_cli_legacy_without_converter_fails_before_writing(tmp_path, monkeypatch):
    monkeypatch.delenv(lora.CONVERTER_ENV, raising=False)
    adapter = peft_dir(tmp_path / "out")
    res = CliRunner().invoke(
        app,
        serve_args(
            adapter, "--legacy", "--converter", str(tmp_path / "none.py"), "--out", str(tmp_path / "b")
        ),
    )
    assert res.exit_code == 1
    assert "not found" in res.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_output_inside_the_training_output_is_refused_before_anything_runs(tmp_path):
    adapter = lora.inspect_adapter("a", kt_dir(tmp_path / "kt"))
    for bad in (tmp_path / "kt" / "sglang", tmp_path / "kt", tmp_path):
        with pytest.raises(lora.LoraError, match="must be outside its input"):
            lora.convert(adapter, bad, lambda target: [sys.executable, "-c", "raise SystemExit('ran')"])
    assert sorted(p.name for p in (tmp_path / "kt").iterdir()) == [
        "adapter_config.json", "adapter_model.safetensors", "fused_expert_lora.safetensors",
        "kt_adapter_manifest.json",
    ]  # fmt: skip


def test_a_symlinked_output_is_refused_before_the_converter_runs(tmp_path):
    # rmtree() refuses symlinks: with --overwrite it failed after the conversion, as an OSError
    adapter = lora.inspect_adapter("a", kt_dir(tmp_path / "kt"))
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere")
    ran = tmp_path / "ran"
    cmd = [sys.executable, "-c", f"open({str(ran)!r}, 'w').close()"]
    with pytest.raises(lora.LoraError, match="link is a symlink: a converted adapter is a directory"):
        lora.convert_all([(adapter, tmp_path / "link", lambda target: cmd)], overwrite=True)
    assert not ran.exists() and (tmp_path / "link").is_symlink()


def merged_kt_dir(root: Path) -> Path:
    """kt-kernel's converter output: one PEFT adapter whose tensors include per-expert LoRA."""
    peft_dir(root)
    write_safetensors(
        root / "adapter_model.safetensors",
        {
            "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight": [4, 64],
            "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight": [64, 4],
            "base_model.model.model.layers.0.mlp.experts.0.gate_proj.lora_A.weight": [4, 64],
            "base_model.model.model.layers.0.mlp.experts.0.gate_proj.lora_B.weight": [32, 4],
        },
    )
    return root


def test_expert_lora_is_told_apart_as_sglang_kt_does(tmp_path):
    assert lora.inspect_adapter("a", kt_dir(tmp_path / "kt")).expert_lora
    assert lora.inspect_adapter("b", merged_kt_dir(tmp_path / "merged")).expert_lora
    assert not lora.inspect_adapter("c", peft_dir(tmp_path / "peft")).expert_lora
    assert [lora.carries_expert_lora(tmp_path / d) for d in ("kt", "merged", "peft", "none")] == [
        True,
        True,
        False,
        None,
    ]


def test_two_kt_adapters_in_one_server_are_refused_before_converting(tmp_path):
    """sglang-kt 0.7.2 server_args.py: "Merged KT composite LoRA cannot be mixed with other LoRA adapters";
    before, both were converted and the unit failed at every start."""
    one, two = kt_dir(tmp_path / "one"), peft_dir(tmp_path / "two")
    out = tmp_path / "conv"
    args = serve_args(one, "--adapter", f"b={two}", "--output-dir", str(out), "--converter", "/bin/false")
    res = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "bundle")])
    assert res.exit_code == 1
    assert res.stderr == (
        "error: adapter mine carries LoRA on the routed experts (a KT adapter), which sglang-kt serves only "
        "alone: serve each of mine, b from its own instance (--name)\n"
    )
    assert not out.exists() and not (tmp_path / "bundle").exists()


def test_two_plain_adapters_share_a_server(tmp_path):
    one, two = peft_dir(tmp_path / "one"), peft_dir(tmp_path / "two")
    args = serve_args(one, "--adapter", f"b={two}", "--max-loras-per-batch", "2")
    res = CliRunner().invoke(app, [*args, "--dry-run", "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    paths = {"mine": str(one.resolve()), "b": str(two.resolve())}
    assert data["serve"]["lora"] == {"paths": paths, "max_loras_per_batch": 2, "backend": "triton"}
    command = data["command"]
    at = command.index("--lora-paths")
    assert command[at + 1 : at + 3] == [f"mine={one.resolve()}", f"b={two.resolve()}"]
    assert command[at + 3 : at + 5] == ["--max-loras-per-batch", "2"]


def test_a_kt_adapter_on_a_backend_without_sft_kernels_is_refused(tmp_path):
    """kt_ep_wrapper.py _map_kt_method_to_sft_method: LLAMAFILE has no SFT backend to run expert LoRA."""
    plan = tmp_path / "plan.json"
    h200x2 = H100.parent / "2xh200-xeon-amx-32c"  # room on disk for the GGUF
    planned = ["plan", "--model", "Qwen3-30B-A3B", "--from", str(h200x2), "--cpu-format", "GGUF:Q4_K_M"]
    plan.write_text(CliRunner().invoke(app, [*planned, "--json"]).stdout)
    adapter = f"m={merged_kt_dir(tmp_path / 'm')}"
    args = ["lora", "serve", "--base", "/models/Qwen3-30B-A3B", "--adapter", adapter]
    res = CliRunner().invoke(app, [*args, "--plan", str(plan), "--weight-path", "/w", "--dry-run"])
    assert res.exit_code == 1
    assert res.stderr.startswith(
        "error: adapter m carries LoRA on the routed experts, which sglang-kt runs on an SFT backend: "
        "kt_method LLAMAFILE has none (AMXBF16, AMXFP8, AMXINT4, AMXINT8, BF16, FP8, MXFP4, RAWINT4 have)"
    )


def test_plan_lora_states_the_kt_adapter_rules_it_can_check(tmp_path):
    kt, plain = merged_kt_dir(tmp_path / "kt"), peft_dir(tmp_path / "plain")
    base = ["plan", "--model", "Qwen3-30B-A3B", "--from", str(H100), "--json"]
    alone = json.loads(CliRunner().invoke(app, [*base, "--lora", f"kt={kt}"]).stdout)
    assert alone["feasible"] and alone["serve"]["lora"]["paths"] == {"kt": str(kt)}
    mixed = CliRunner().invoke(app, [*base, "--lora", f"kt={kt}", "--lora", f"plain={plain}"])
    assert mixed.exit_code == 2
    assert any("serves only alone" in p for p in json.loads(mixed.stdout)["problems"])
    gguf = CliRunner().invoke(app, [*base, "--lora", f"kt={kt}", "--cpu-format", "GGUF:Q4_K_M"])
    assert gguf.exit_code == 2
    assert any("kt_method LLAMAFILE has none" in p for p in json.loads(gguf.stdout)["problems"])
    elsewhere = json.loads(CliRunner().invoke(app, [*base, "--lora", "far=/srv/adapters/far"]).stdout)
    assert elsewhere["feasible"] and any("far not readable here" in w for w in elsewhere["warnings"])
