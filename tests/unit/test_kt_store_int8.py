"""kt_model_store's converter wrapper (roles/kt_model_store/files/kt_store_convert.py) for int8: the layer
tree kt-kernel 0.7.2 trains from, finished by the real `ktinfra weights manifest`, its marker beside it. The
converter is a stand-in (tests/unit/int8_tree.py; the real one needs kt-kernel on an AMX CPU and ran on the
lent host, docs/results/2026-11-29-h200-int8-sft-layout)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
from int8_tree import CONVERTER, TINY, moe_model

from ktinfra.int8_weights import MANIFEST_NAME

HERE = Path(__file__).resolve().parent
WRAPPER = HERE.parents[1] / "roles" / "kt_model_store" / "files" / "kt_store_convert.py"
KTINFRA = str(Path(sys.executable).parent / "ktinfra")
MARKER = ".ktinfra-complete.json"


@pytest.fixture
def setup(tmp_path):
    src = moe_model(tmp_path / "src")
    (src / "model.safetensors").write_bytes(b"WEIGHTS-1")
    script = tmp_path / "kt-kernel" / "scripts" / "convert_cpu_weights.py"
    script.parent.mkdir(parents=True)
    script.write_text(CONVERTER)
    (tmp_path / "cpu").mkdir()
    return src, script, tmp_path / "cpu" / "tiny-INT8"


def run(setup, *extra, env=None):
    src, script, out = setup
    argv = [sys.executable, str(WRAPPER), "--python", sys.executable, "--script", str(script), "--input-path",
            str(src), "--quant-method", "int8", "--output", str(out), "--threadpool-count", "2",
            "--ktinfra", KTINFRA, *extra]  # fmt: skip
    record = out.parent.parent / "argv.jsonl"
    proc = subprocess.run(
        argv, capture_output=True, text=True, env={"STANDIN_RECORD": str(record)} | (env or {})
    )
    return proc.returncode, json.loads(proc.stdout.strip().splitlines()[-1]), record


def test_int8_is_a_layer_tree_with_the_manifest_and_the_marker_beside_it(setup):
    src, _, out = setup
    rc, result, record = run(setup)
    assert (rc, result["changed"]) == (0, True), result
    argv = json.loads(record.read_text().splitlines()[0])
    assert "--no-merge-safetensor" in argv and argv[argv.index("--input-type") + 1] == "bf16"
    assert sorted(p.name for p in out.iterdir()) == ["_layer_0", "_layer_1", MANIFEST_NAME]
    manifest = json.loads((out / MANIFEST_NAME).read_text())
    assert manifest["threadpool_count"] == 2 and len(manifest["layers"]) == 2
    assert manifest["layers"][0]["files"][0]["path"].startswith("_layer_0/_numa_0/INT8_")  # relative: renamed
    marker = json.loads((out.parent / f".tiny-INT8{MARKER}").read_text())
    assert marker["request"]["quant"] == "int8" and marker["request"]["input_type"] == "bf16"
    assert sorted(p.name for p in out.parent.iterdir()) == [f".tiny-INT8{MARKER}", "tiny-INT8"]
    # complete: looked at, not converted again
    rc, result, record = run(setup, "--check")
    assert (rc, result["complete"]) == (0, True)
    assert (run(setup)[1]["changed"], len(record.read_text().splitlines())) == (False, 1)
    subprocess.run([KTINFRA, "weights", "check", str(out), "--model-path", str(src)], check=True)


def test_an_output_removed_by_hand_is_converted_again_despite_its_marker(setup):
    _, _, out = setup
    assert run(setup)[0] == 0
    subprocess.run(["rm", "-r", str(out)], check=True)
    rc, result, _ = run(setup, "--check")
    assert (rc, result["complete"]) == (3, False)
    assert run(setup)[1]["changed"] is True and (out / MANIFEST_NAME).is_file()


def test_a_merged_int8_output_of_an_older_ktinfra_is_converted_again(setup):
    """Its marker inside the directory is not looked at for int8: that tree cannot be trained from."""
    _, _, out = setup
    out.mkdir()
    (out / "model-00001-of-00001.safetensors").write_bytes(b"merged")
    (out / MARKER).write_text(json.dumps({"request": {}}))
    rc, result, _ = run(setup, "--check")
    assert rc == 3
    assert run(setup)[1]["changed"] is True
    assert sorted(p.name for p in out.iterdir()) == ["_layer_0", "_layer_1", MANIFEST_NAME]


def test_a_tree_the_manifest_refuses_is_not_put_in_place(setup):
    """A converter that exits 0 with a file short (here: one left out) leaves no output and no marker."""
    _, _, out = setup
    rc, result, _ = run(setup, env={"STANDIN_CUT": "1"})
    assert rc == 1 and result["complete"] is False
    assert "ktinfra weights manifest" in result["error"] and "lacks 1 of its .kt files" in result["error"]
    assert list(out.parent.iterdir()) == []


def test_int8_without_ktinfra_is_refused_before_converting(setup):
    _, _, out = setup
    rc, result, record = run(setup, "--ktinfra", str(out.parent / "no-ktinfra"))
    assert rc == 1 and any("writes the int8 manifest" in p for p in result["problems"])
    assert not record.exists() and list(out.parent.iterdir()) == []


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}}, "fp8"),
        ({"torch_dtype": "float16"}, "fp16"),
        ({"torch_dtype": None, "dtype": "bfloat16"}, "bf16"),
        (
            {"hidden_size": None, "text_config": TINY | {"quantization_config": {"quant_method": "fp8"}}},
            "fp8",
        ),
    ],
)
def test_the_input_type_is_the_checkpoints(setup, config, expected):
    """Before: --input-type was always bf16, so an FP8 model (DeepSeek-V3) was quantized from its raw FP8
    bytes, without its weight_scale_inv."""
    src = setup[0]
    moe_model(src, **config)
    rc, result, _ = run(setup, "--dry-run")
    assert rc == 0, result
    assert result["command"][result["command"].index("--input-type") + 1] == expected


def test_a_checkpoint_read_in_place_is_not_converted(setup):
    src = setup[0]
    moe_model(src, quantization_config={"quant_method": "compressed-tensors"})
    rc, result, record = run(setup)
    assert rc == 1 and "quantization compressed-tensors is read in place" in result["problems"][0]
    assert not record.exists()


def _store_convert_module():
    spec = importlib.util.spec_from_file_location("kt_store_convert", WRAPPER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


FULL = TINY | {"num_attention_heads": 4, "num_experts_per_tok": 2, "vocab_size": 128}
WRAPPED = {"model_type": "qwen3_5_moe", "vision_config": {}}
FP8 = {"quant_method": "fp8", "weight_block_size": [128, 128]}
CONFIGS = {
    "bf16": FULL | {"torch_dtype": "bfloat16"},
    "fp16": FULL | {"torch_dtype": "float16"},
    "dtype key": FULL | {"dtype": "float16"},
    "no dtype": FULL,
    "fp32": FULL | {"torch_dtype": "float32"},
    "fp8": FULL | {"quantization_config": FP8},
    "int4": FULL | {"quantization_config": {"quant_method": "compressed-tensors"}},
    # before: the wrapper's top-level FP8 quantization_config was missed (text_config was read alone)
    "wrapper, fp8 at the top": WRAPPED
    | {"text_config": FULL, "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}},
    "wrapper, fp8 inside": WRAPPED
    | {
        "text_config": FULL
        | {"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}}
    },
    "wrapper, fp16 text": WRAPPED
    | {"text_config": FULL | {"torch_dtype": "float16"}, "torch_dtype": "bfloat16"},
}


@pytest.mark.parametrize("case", CONFIGS)
def test_the_store_reads_the_dtype_as_the_catalog_does(tmp_path, case):
    """kt_store_convert.py runs on the target without ktinfra's package, so it reads the checkpoint dtype
    itself; it must agree with the catalog (what plans and `render convert` use): the same dtype, or a
    refusal where the converter has no --input-type for it (before: float32 was passed on as bf16)."""
    from ktinfra.catalog import ModelConfigError, from_config

    config = CONFIGS[case]
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(config))
    try:
        native = from_config(config, name="m").native_dtype
    except ModelConfigError:
        native = None
    converted = native if native in ("bf16", "fp16", "fp8") else None
    store = _store_convert_module()
    if converted is None:
        with pytest.raises(ValueError):
            store.native_input_type(model)
    else:
        assert store.native_input_type(model) == converted
