"""`ktinfra lora plan` and `ktinfra render serve` plan an adapter `lora serve` serves from a copy without
added_tokens.json under that copy's path.

a6e9026 made `lora serve` serve such an adapter (every added_tokens.json entry has the same id in the served
model's tokenizer.json, lora.base_added_tokens) from a copy without the file, but `lora plan` and `render
serve` still refused it with exit 1. They write no adapter, so they now plan and render the path `lora serve`
copies it to (DIR_sglang), decided by the same lora.base_added_tokens, and say so: the plan's reason for
serve.lora, render's `copies` (made or not); a folder there that is not that copy is refused. A token the
tokenizer lacks or numbers otherwise is refused as before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_lora_cli_errors import assert_clean_error, invoke
from test_lora_review4_render_planned import current_plan
from test_lora_served_copy import QWEN_SPECIAL, _serve
from test_lora_served_copy import _base_model as base_model
from test_lora_served_copy import _llamafactory_output as llamafactory_output

from ktinfra.render import RenderError, render_serve

PLAN = Path(__file__).resolve().parents[1] / "fixtures" / "plans" / "h100-qwen3-30b-a3b-serve.json"
ONE_FOREIGN = {**QWEN_SPECIAL, "<tool_x>": 151669}
OTHER_ID = {**QWEN_SPECIAL, "<|im_end|>": 151646}


def _plan_file(tmp_path, model_path: Path | None = None) -> Path:
    plan = json.loads(PLAN.read_text())
    plan["model"]["path"] = str(model_path) if model_path else None
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    return path


def _lora_plan(plan: Path, adapter: Path, *extra: str):
    return invoke(["lora", "plan", "--plan", str(plan), "--adapter", f"mine={adapter}", *extra])


def _listing(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir())


@pytest.fixture
def setup(tmp_path):
    """The served model's folder, and a LLaMA-Factory output recording another machine's base path."""
    return base_model(tmp_path / "Qwen3-30B-A3B"), llamafactory_output(tmp_path / "out")


def test_lora_plan_plans_the_copy_lora_serve_makes(tmp_path, setup):
    base, adapter = setup
    plan = _plan_file(tmp_path, base)  # model.path: the served model, as lora serve's --base
    before = _listing(tmp_path)
    result = _lora_plan(plan, adapter, "--json")
    assert result.exit_code == 0, result.output
    planned = json.loads(result.stdout)
    copy = tmp_path / "out_sglang"
    assert planned["serve"]["lora"]["paths"] == {"mine": str(copy)}
    assert planned["reasons"]["lora"] == (
        f"mine: at most 1 per batch, triton backend; mine is served from {copy}, a copy of {adapter} without "
        "added_tokens.json (sglang-kt refuses an adapter listing added tokens, and its 3 entries have the "
        f"same ids in {base / 'tokenizer.json'}), not made yet: `ktinfra lora serve` makes it"
    )
    assert _listing(tmp_path) == before  # lora plan writes no adapter
    argv = render_serve(planned, name="q", model_path=str(base), weight_path="/w").info["argv"]
    assert f"mine={copy}" in argv


def test_lora_plan_says_when_the_copy_is_made(tmp_path, setup):
    base, adapter = setup
    assert _serve(base, adapter).exit_code == 0  # lora serve makes the copy
    result = _lora_plan(_plan_file(tmp_path, base), adapter)  # the human output prints the reasons
    assert result.exit_code == 0, result.output
    assert f"mine is served from {tmp_path / 'out_sglang'}, a copy of" in result.output
    assert "made already" in result.output and "not made yet" not in result.output


def test_lora_plan_takes_lora_serves_output_dir(tmp_path, setup):
    """`lora serve --output-dir DIR` puts the copy at DIR/NAME; before, lora plan had no --output-dir and
    planned DIR_sglang beside the adapter, a path no copy is at (render then served a missing folder)."""
    base, adapter = setup
    served = tmp_path / "served"
    assert _serve(base, adapter, "--output-dir", str(served)).exit_code == 0
    result = _lora_plan(_plan_file(tmp_path, base), adapter, "--output-dir", str(served), "--json")
    assert result.exit_code == 0, result.output
    planned = json.loads(result.stdout)
    assert planned["serve"]["lora"]["paths"] == {"mine": str(served / "mine")}
    assert "made already" in planned["reasons"]["lora"]
    assert not (tmp_path / "out_sglang").exists()


def test_lora_plan_refuses_a_folder_there_that_is_not_the_copy(tmp_path, setup):
    """The server would load what is there: a copy of an earlier training, not this adapter."""
    base, adapter = setup
    assert _serve(base, adapter).exit_code == 0
    (adapter / "adapter_config.json").write_text(
        (adapter / "adapter_config.json").read_text().replace('"r": 4', '"r": 4, "lora_dropout": 0.1')
    )
    result = _lora_plan(_plan_file(tmp_path, base), adapter)
    assert_clean_error(result, f"{tmp_path / 'out_sglang'} already exists and is not the copy of {adapter}")
    assert "(adapter_config.json differ); `ktinfra lora serve --overwrite` replaces it" in result.output


def test_lora_plan_compares_with_the_recorded_base_without_a_model_path(tmp_path):
    base = base_model(tmp_path / "Qwen3-30B-A3B")
    adapter = llamafactory_output(tmp_path / "out", base=str(base))
    result = _lora_plan(_plan_file(tmp_path), adapter, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["serve"]["lora"]["paths"] == {"mine": str(tmp_path / "out_sglang")}


def test_render_serve_renders_the_copys_path_and_says_so(tmp_path, setup):
    base, adapter = setup
    before = _listing(tmp_path)
    rendered = render_serve(current_plan({"mine": adapter}), name="q", model_path=str(base), weight_path="/w")
    copy = tmp_path / "out_sglang"
    assert f"mine={copy}" in rendered.info["argv"] and f"mine={adapter}" not in rendered.info["argv"]
    assert rendered.info["copies"] == [
        {
            "adapter": "mine",
            "source": str(adapter),
            "output": str(copy),
            "left_out": "added_tokens.json",
            "tokens": 3,
            "tokenizer": str(base / "tokenizer.json"),
            "files": ["adapter_config.json", "adapter_model.safetensors", "tokenizer_config.json"],
            "made": False,
        }
    ]
    assert _listing(tmp_path) == before  # render writes no adapter
    assert _serve(base, adapter).exit_code == 0
    rendered = render_serve(current_plan({"mine": adapter}), name="q", model_path=str(base), weight_path="/w")
    assert rendered.info["copies"][0]["made"] is True


def test_render_serve_of_an_adapter_without_the_file_says_nothing_of_copies(tmp_path, setup):
    base, adapter = setup
    (adapter / "added_tokens.json").unlink()
    rendered = render_serve(current_plan({"mine": adapter}), name="q", model_path=str(base), weight_path="/w")
    assert f"mine={adapter}" in rendered.info["argv"] and "copies" not in rendered.info


@pytest.mark.parametrize(
    ("tokens", "said"), [(ONE_FOREIGN, "(<tool_x> 151669)"), (OTHER_ID, "(<|im_end|> 151646)")]
)
def test_a_token_the_base_lacks_or_numbers_otherwise_is_still_refused_as_lora_serve_refuses_it(
    tmp_path, tokens, said
):
    base = base_model(tmp_path / "Qwen3-30B-A3B")
    adapter = llamafactory_output(tmp_path / "out", tokens, base=str(base))
    refused = _serve(base, adapter)
    assert_clean_error(refused, "1 of them the base model's tokenizer")
    assert said in refused.output and "llamafactory-cli export" in refused.output
    result = _lora_plan(_plan_file(tmp_path, base), adapter)
    assert_clean_error(result, "")
    assert result.output == refused.output  # the same message, word for word
    with pytest.raises(RenderError) as caught:
        render_serve(current_plan({"mine": adapter}), name="q", model_path=str(base), weight_path="/w")
    assert f"error: {caught.value}\n" == refused.output.replace(
        "error: ", "error: plan serve.lora.paths.mine: "
    )
    assert _listing(tmp_path) == ["Qwen3-30B-A3B", "out", "plan.json"]


def test_render_serve_says_so_without_json_too(tmp_path, setup):
    """Before, only --json named the copy: a person reading the table saw the unit, not the swapped path."""
    base, adapter = setup
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(current_plan({"mine": adapter})))
    args = ["render", "serve", "--plan", str(plan_file), "--name", "q", "--model-path", str(base)]
    result = invoke([*args, "--weight-path", "/w", "--out", str(tmp_path / "bundle")])
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())  # rich wraps at the terminal's width
    assert (
        f"adapter mine is served from {tmp_path / 'out_sglang'}, a copy of {adapter} without "
        "added_tokens.json, not made yet: `ktinfra lora serve` makes it"
    ) in said
