"""`ktinfra lora serve` serves an adapter whose added_tokens.json holds only the base model's own tokens
from a copy without that file.

sglang-kt refuses any adapter whose added_tokens.json has entries (srt/lora/lora_config.py takes len() of
it, lora_manager.py validate_new_adapter refuses a non-zero count), and transformers 4.x writes that file for
every Qwen special token, so every LLaMA-Factory Qwen LoRA trained on 4.x was refused with a cp/rm command to
run by hand (39cb53c). Where every entry has the same id in the served model's tokenizer.json, lora serve now
makes that copy itself (DIR_sglang, or --output-dir/NAME, as conversions), built in a scratch folder and
renamed into place, kept as it is on a re-run, refused where something else is there (unless --overwrite).
A token the tokenizer lacks is still refused. lora plan and render serve plan the copy's path
(test_lora_plan_served_copy), and so does `plan --lora`."""

from __future__ import annotations

import json

import pytest
from test_lora import H100, kt_dir, peft_dir
from test_lora_cli_errors import assert_clean_error, invoke
from test_lora_input import COPYING_CONVERTER

from ktinfra import lora
from ktinfra.render import render_serve

QWEN_SPECIAL = {"<|endoftext|>": 151643, "<|im_start|>": 151644, "<|im_end|>": 151645}


def _base_model(root):
    """A Qwen-like base model directory: BPE vocabulary below 151643, the special tokens added after it."""
    root.mkdir(parents=True)
    tokenizer = {
        "model": {"type": "BPE", "vocab": {"a": 0, "b": 1}},
        "added_tokens": [{"id": i, "content": t, "special": True} for t, i in QWEN_SPECIAL.items()],
    }
    (root / "tokenizer.json").write_text(json.dumps(tokenizer))
    return root


def _llamafactory_output(root, tokens=QWEN_SPECIAL, base="/models/elsewhere"):
    """What LLaMA-Factory leaves in output_dir: the adapter, the tokenizer it saved, a checkpoint folder."""
    adapter = peft_dir(root, base=base)
    (adapter / "added_tokens.json").write_text(json.dumps(tokens))
    (adapter / "tokenizer_config.json").write_text("{}")
    (adapter / "checkpoint-10").mkdir()
    (adapter / "checkpoint-10" / "optimizer.pt").write_bytes(b"\0" * 64)
    return adapter


def _serve(base, adapter, *extra):
    return invoke(
        ["lora", "serve", "--base", str(base), "--adapter", f"mine={adapter}", "--model", "Qwen3-30B-A3B",
         "--from", str(H100), *extra]
    )  # fmt: skip


@pytest.fixture
def setup(tmp_path):
    return _base_model(tmp_path / "Qwen3-30B-A3B"), _llamafactory_output(tmp_path / "out")


def test_the_base_models_own_tokens_are_served_from_a_copy_without_the_file(tmp_path, setup):
    base, adapter = setup
    result = _serve(base, adapter, "--out", str(tmp_path / "bundle"), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    copy = tmp_path / "out_sglang"
    assert data["copies"] == [
        {
            "adapter": "mine",
            "source": str(adapter.resolve()),
            "output": str(copy),
            "left_out": "added_tokens.json",
            "tokens": 3,
            "tokenizer": str(base / "tokenizer.json"),
            "files": ["adapter_config.json", "adapter_model.safetensors", "tokenizer_config.json"],
            "action": "create",
        }
    ]
    assert sorted(p.name for p in copy.iterdir()) == data["copies"][0]["files"]
    assert (adapter / "added_tokens.json").is_file()  # the training output is left as it was
    for name in data["copies"][0]["files"]:  # real copies: a retrain rewriting the source in place
        assert not (copy / name).is_symlink()  # does not change what is served
        assert (copy / name).stat().st_ino != (adapter / name).stat().st_ino
        assert (copy / name).read_bytes() == (adapter / name).read_bytes()
    assert data["serve"]["lora"]["paths"] == {"mine": str(copy)}
    assert f"mine={copy}" in data["command"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["Qwen3-30B-A3B", "bundle", "out", "out_sglang"]
    planned = json.loads((tmp_path / "bundle" / "plan-lora.json").read_text())
    render_serve(planned, name="q", model_path=str(base), weight_path="/w")  # the copy passes render's checks


def test_a_rerun_keeps_the_copy_as_it_is(tmp_path, setup):
    base, adapter = setup
    assert _serve(base, adapter).exit_code == 0
    weights = tmp_path / "out_sglang" / "adapter_model.safetensors"
    before = weights.stat()
    result = _serve(base, adapter, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["copies"][0]["action"] == "keep"
    after = weights.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_a_copy_that_differs_is_refused_and_replaced_only_with_overwrite(tmp_path, setup):
    base, adapter = setup
    assert _serve(base, adapter).exit_code == 0
    (adapter / "adapter_config.json").write_text(
        (adapter / "adapter_config.json").read_text().replace('"r": 4', '"r": 4, "lora_dropout": 0.1')
    )
    copy = tmp_path / "out_sglang"
    result = _serve(base, adapter)
    assert_clean_error(result, f"{copy} already exists and is not the copy of {adapter.resolve()} without")
    assert "(adapter_config.json differ); pass --overwrite to replace it" in result.output
    assert "lora_dropout" not in (copy / "adapter_config.json").read_text()
    result = _serve(base, adapter, "--overwrite")
    assert result.exit_code == 0, result.output
    assert f"replaced {copy} (--overwrite) with the copy of mine without added_tokens.json" in result.output
    assert (copy / "adapter_config.json").read_bytes() == (adapter / "adapter_config.json").read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["Qwen3-30B-A3B", "out", "out_sglang"]


def test_a_folder_with_other_files_is_not_taken_for_the_copy(tmp_path, setup):
    base, adapter = setup
    peft_dir(tmp_path / "out_sglang")
    result = _serve(base, adapter)
    assert_clean_error(result, "(it lacks tokenizer_config.json); pass --overwrite to replace it")


def test_the_human_output_and_the_dry_run_say_what_is_done(tmp_path, setup):
    base, adapter = setup
    copy = tmp_path / "out_sglang"
    said = (
        f"mine -> {copy} without added_tokens.json: sglang-kt refuses an adapter listing added tokens, "
        f"and its 3 entries have the same ids in {base / 'tokenizer.json'}"
    )
    result = _serve(base, adapter, "--dry-run")
    assert result.exit_code == 0, result.output
    assert f"would copy {said}" in result.output
    assert not copy.exists()
    result = _serve(base, adapter)
    assert f"copied {said}" in result.output
    assert f"kept {copy}: already the copy of mine without" in _serve(base, adapter).output


def test_the_served_models_tokenizer_decides_not_only_the_recorded_base(tmp_path, setup):
    """base_model_name_or_path names a folder of another machine; --base holds the tokenizer served."""
    base, adapter = setup
    assert json.loads(adapter.joinpath("adapter_config.json").read_text())["base_model_name_or_path"] == (
        "/models/elsewhere"
    )
    assert _serve(base, adapter).exit_code == 0


def test_a_token_the_base_lacks_is_still_refused_and_nothing_is_copied(tmp_path):
    base = _base_model(tmp_path / "Qwen3-30B-A3B")
    adapter = _llamafactory_output(tmp_path / "out", {**QWEN_SPECIAL, "<tool_x>": 151669})
    result = _serve(base, adapter, "--json")
    assert_clean_error(result, "1 of them the base model's tokenizer")
    assert "(<tool_x> 151669)" in result.output and "llamafactory-cli export" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["Qwen3-30B-A3B", "out"]


def test_an_id_that_differs_from_the_base_is_refused(tmp_path):
    base = _base_model(tmp_path / "Qwen3-30B-A3B")
    adapter = _llamafactory_output(tmp_path / "out", {**QWEN_SPECIAL, "<|im_end|>": 151646})
    assert_clean_error(_serve(base, adapter), "(<|im_end|> 151646)")
    assert not (tmp_path / "out_sglang").exists()


def test_without_a_tokenizer_to_compare_with_it_is_still_refused(tmp_path):
    adapter = _llamafactory_output(tmp_path / "out")
    result = _serve(tmp_path / "no-such-base", adapter)
    assert_clean_error(result, "same id in the served model's own tokenizer")
    assert not (tmp_path / "out_sglang").exists()


def test_a_copy_that_fails_half_way_leaves_nothing(tmp_path, setup, monkeypatch):
    base, adapter = setup
    real_copy = lora.shutil.copy2

    def copy2(src, dst, **kwargs):
        if str(src).endswith("adapter_model.safetensors"):
            raise OSError(28, "No space left on device")
        return real_copy(src, dst, **kwargs)

    monkeypatch.setattr(lora.shutil, "copy2", copy2)
    result = _serve(base, adapter, "--output-dir", str(tmp_path / "served" / "adapters"))
    assert_clean_error(
        result, f"cannot copy {adapter.resolve()} into {tmp_path / 'served' / 'adapters' / 'mine'}"
    )
    assert "No space left on device" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["Qwen3-30B-A3B", "out"]


def test_a_failed_conversion_takes_the_copy_made_before_it_away(tmp_path, setup):
    """convert_all is all or nothing for copies too: a re-run needs no --overwrite."""
    base, adapter = setup
    copy = lora.plan_served_copy(
        lora.inspect_adapter("mine", adapter), tmp_path / "out_sglang", (base / "tokenizer.json", 3), False
    )
    converter = tmp_path / "converter.py"
    converter.write_text(COPYING_CONVERTER)
    kt = lora.inspect_adapter("two", kt_dir(tmp_path / "two"))
    step = (kt, tmp_path / "two_sglang", lambda dest: ["python3", str(converter), str(kt.path), str(dest)])
    with pytest.raises(lora.LoraError, match="second fails"):
        lora.convert_all([step], copies=[copy])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["Qwen3-30B-A3B", "converter.py", "out", "two"]


def test_plan_lora_plans_the_copy_lora_serve_makes(tmp_path):
    """`plan --lora` writes no adapter: like lora plan it plans the path lora serve copies the adapter to,
    against the recorded base's tokenizer (a catalog model has no path here); before: refused, exit 1."""
    adapter = _llamafactory_output(tmp_path / "recorded", base=str(_base_model(tmp_path / "base")))
    args = ["plan", "--model", "Qwen3-30B-A3B", "--from", str(H100), "--lora", f"mine={adapter}"]
    result = invoke([*args, "--json"])
    assert result.exit_code == 0, result.output
    planned = json.loads(result.stdout)
    copy = tmp_path / "recorded_sglang"
    assert planned["serve"]["lora"]["paths"] == {"mine": str(copy)}
    assert (
        f"mine is served from {copy}, a copy of {adapter} without added_tokens.json"
        in planned["reasons"]["lora"]
    )
    assert "not made yet: `ktinfra lora serve` makes it" in planned["reasons"]["lora"]
    assert not copy.exists()


def test_plan_lora_refuses_a_token_the_base_lacks_as_lora_serve_does(tmp_path):
    base = _base_model(tmp_path / "base")
    tokens = {**QWEN_SPECIAL, "<tool_x>": 151669}
    adapter = _llamafactory_output(tmp_path / "recorded", tokens, base=str(base))
    result = invoke(["plan", "--model", "Qwen3-30B-A3B", "--from", str(H100), "--lora", f"mine={adapter}"])
    assert_clean_error(result, "--lora mine: ")
    assert "1 of them the base model's tokenizer" in result.output and "(<tool_x> 151669)" in result.output
