"""More GPU experts are never suggested beyond the model's experts per MoE layer (sglang-kt's
--kt-num-gpu-experts is per layer): the H100 plan already places all 128 of Qwen3-30B-A3B's."""

from __future__ import annotations

import json

from test_tune_bounds import CAPPED, advise, args

from ktinfra import catalog


def test_doubling_stops_at_the_models_experts_per_layer():
    """Before: 100 -> 200 and 128 -> 256 on a 128-expert model, which sglang-kt cannot place."""
    changes, _ = advise(args(max_total_tokens=60000, kt_num_gpu_experts=100), CAPPED.format(free=20.0))
    experts = changes["--kt-num-gpu-experts"]
    assert (experts["current"], experts["suggested"]) == (100, 128)
    assert "not above 128: the model has 128 experts per MoE layer" in experts["reason"]
    # all on the GPU already: no expert change, the spare memory is left to the pool's rules
    changes, advice = advise(args(max_total_tokens=60000, kt_num_gpu_experts=128), CAPPED.format(free=20.0))
    assert "--kt-num-gpu-experts" not in changes and "--kt-num-gpu-experts" not in advice
    # below half the count the rule doubles as before
    changes, _ = advise(args(max_total_tokens=60000, kt_num_gpu_experts=32), CAPPED.format(free=20.0))
    assert changes["--kt-num-gpu-experts"]["suggested"] == 64


def test_a_local_model_folder_gives_its_own_expert_count(tmp_path):
    """The log's model_path read here when it exists; its folder name is no catalog model."""
    config = catalog.entry_config("Qwen3-30B-A3B")
    config["num_experts"] = 48
    model = tmp_path / "my-moe"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(config))
    line = args(max_total_tokens=60000, kt_num_gpu_experts=32, model_path=repr(str(model)))
    changes, _ = advise(line, CAPPED.format(free=20.0))
    assert changes["--kt-num-gpu-experts"]["suggested"] == 48


def test_an_unknown_model_keeps_the_plain_doubling(tmp_path):
    line = args(
        max_total_tokens=60000, kt_num_gpu_experts=100, model_path=repr(str(tmp_path / "nowhere-moe"))
    )
    changes, _ = advise(line, CAPPED.format(free=20.0))
    assert changes["--kt-num-gpu-experts"]["suggested"] == 200
