"""KT LoRA output -> SGLang adapter with kt-kernel's real converter (from the kt-kernel 0.7.2 wheel, installed
into the serving venv), through `ktinfra lora serve` and the unit `ktinfra render lora-convert` writes.
The input is scripts/tiny_model.py --kt-lora-out: real PEFT files plus constructed (random) fused expert LoRA
tensors in kt-kernel's layout."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ktinfra import lora
from ktinfra.cli import app

HERE = Path(__file__).resolve().parent
H100 = HERE.parents[1] / "fixtures" / "hosts" / "h100-xeon-amx-16c"
LAYERS, EXPERTS, RANK, ALPHA = 2, 8, 4, 8  # scripts/tiny_model.py defaults
ATTENTION = ["q_proj", "k_proj", "v_proj", "o_proj"]


@pytest.fixture(scope="module")
def converter(serve_python) -> Path:
    found = lora.installed_converter(serve_python)
    assert found is not None, f"kt-kernel's converter is not installed in {serve_python}'s env"
    return found


def test_converter_comes_from_the_kt_kernel_wheel(converter, serve_python):
    assert converter.parts[-3:] == ("kt_kernel", "sft", "convert_kt_to_sglang_adapter.py")
    assert Path(serve_python).parent.parent.resolve() in converter.parents  # inside the serving venv


def test_real_kt_output_is_valid(tiny_kt_lora, tiny_model):
    adapter = lora.inspect_adapter("kt", tiny_kt_lora, base=str(tiny_model))
    assert (adapter.kind, adapter.rank, adapter.alpha) == ("kt-fused", RANK, ALPHA)
    assert adapter.tensors == LAYERS * len(ATTENTION) * 2 + LAYERS * 6
    assert adapter.warnings == []


@pytest.fixture(scope="module")
def converted(tiny_kt_lora, tiny_model, serve_python, tmp_path_factory):
    root = tmp_path_factory.mktemp("lora")
    res = CliRunner().invoke(
        app,
        [
            "lora", "serve", "--base", str(tiny_model), "--adapter", f"kt={tiny_kt_lora}",
            "--converter-python", str(serve_python), "--output-dir", str(root / "loras"),
            "--model", "Qwen3-30B-A3B", "--from", str(H100), "--name", "tiny", "--out", str(root / "bundle"),
            "--json",
        ],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    return root, json.loads(res.stdout)


def test_ktinfra_lora_serve_runs_the_real_converter(converted, converter, tiny_model):
    root, result = converted
    (conversion,) = result["conversions"]
    out = root / "loras" / "kt"
    assert conversion["output"] == str(out) and conversion["command"][1] == str(converter)
    assert conversion["seconds"] > 0
    assert sorted(p.name for p in (root / "loras").iterdir()) == ["kt"]  # no scratch left beside it
    assert sorted(p.name for p in out.iterdir()) == ["adapter_config.json", "adapter_model.safetensors"]
    config = json.loads((out / "adapter_config.json").read_text())
    assert config["target_modules"] == [*ATTENTION, "gate_proj", "up_proj", "down_proj"]
    assert (config["r"], config["lora_alpha"], config["peft_type"]) == (RANK, ALPHA, "LORA")
    assert config["base_model_name_or_path"] == str(tiny_model)
    env = (root / "bundle" / "ktinfra-serve-tiny.env").read_text()
    assert f"--enable-lora --lora-paths kt={out} " in env and "--kt-num-gpu-experts 0" in env


def test_converted_experts_equal_the_fused_slices(converted, tiny_kt_lora, serve_python):
    out = converted[0] / "loras" / "kt"
    proc = subprocess.run(
        [str(serve_python), str(HERE / "adapter_math.py"), str(tiny_kt_lora), str(out)],
        capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    report = json.loads(proc.stdout)
    assert report["keys"] == LAYERS * len(ATTENTION) * 2 + LAYERS * EXPERTS * 6
    assert report["expert_pairs_checked"] == LAYERS * EXPERTS * 3 and report["missing"] == []
    assert report["max_abs_diff"] == 0.0 and report["exact"]
    assert report["nonexpert_unchanged"] == report["nonexpert_total"] == LAYERS * len(ATTENTION) * 2
    assert report["dtypes"] == ["torch.bfloat16", "torch.float32"]  # fused bf16 (KT), PEFT fp32
    assert report["expert0_shapes"] == {
        "gate_proj.A": [RANK, 64], "gate_proj.B": [32, RANK],
        "up_proj.A": [RANK, 64], "up_proj.B": [32, RANK],
        "down_proj.A": [RANK, 32], "down_proj.B": [64, RANK],
    }  # fmt: skip
    assert report["expert0_vs_1_differ"]


def rendered_convert_argv(tiny_kt_lora, tiny_model, serve_python, tmp_path, out, *extra) -> list[str]:
    """The argv the rendered ktinfra-lora-convert@ unit runs (ExecStart with its env file's arguments)."""
    units = tmp_path / "units"
    res = CliRunner().invoke(
        app,
        [
            "render", "lora-convert", "--adapter", str(tiny_kt_lora), "--output", str(out),
            "--model-path", str(tiny_model), "--python", str(serve_python), "--name", "tiny",
            "--out", str(units), "--json", *extra,
        ],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["converter_source"] == "installed"
    env = (units / "ktinfra-lora-convert-tiny.env").read_text()
    value = next(x for x in env.splitlines() if x.startswith("KT_LORA_CONVERT_ARGS=")).split("=", 1)[1]
    args = shlex.split(value)[0].split()  # systemd splits an unbraced $VAR on whitespace
    unit = (units / "ktinfra-lora-convert@.service").read_text()
    exec_start = next(x for x in unit.splitlines() if x.startswith("ExecStart=")).removeprefix("ExecStart=")
    return [*shlex.split(exec_start.replace("$KT_LORA_CONVERT_ARGS", "")), *args]


def test_rendered_unit_command_runs_the_installed_converter(tiny_kt_lora, tiny_model, serve_python, tmp_path):
    """`ktinfra render lora-convert` finds the converter in --python's env; its ExecStart line runs as is.
    The converter deletes a non-empty output only with --overwrite, so the unit passes it only when asked."""
    out = tmp_path / "sglang-adapter"
    argv = rendered_convert_argv(tiny_kt_lora, tiny_model, serve_python, tmp_path, out)
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    again = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert again.returncode != 0 and "Output directory is not empty" in again.stderr
    argv = rendered_convert_argv(tiny_kt_lora, tiny_model, serve_python, tmp_path, out, "--overwrite")
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"rank={RANK}" in proc.stdout
    converted = lora.inspect_adapter("tiny", out, base=str(tiny_model))
    assert (converted.kind, converted.rank, converted.alpha) == ("peft", RANK, ALPHA)
    assert converted.tensors == LAYERS * len(ATTENTION) * 2 + LAYERS * EXPERTS * 6
