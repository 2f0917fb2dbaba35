"""A server whose weights ran out of GPU memory while loading, run with --kt-gpu-experts-ratio (sglang-kt then
places the GPU experts by the ratio and ignores --kt-num-gpu-experts): tune said "--kt-gpu-experts-ratio 0.5
is set: lower it", as advice without a value, next to "with no GPU experts to move" although half of them sat
on the GPU. It now halves the ratio, as the capped-pool OOM rule does (05e81b0), and says that
--ansible-vars does not write it (the plan has no ratio key). A ratio of 0 keeps every expert on the CPU:
nothing to lower there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_tune_bounds import advise, args
from test_tune_startup import BEGIN, LOAD_TRACEBACK
from typer.testing import CliRunner

from ktinfra.cli import app


def load_oom_log(ratio: str) -> list[str]:
    traceback = [line.format(rank="TP0") for line in LOAD_TRACEBACK]
    return [args(kt_num_gpu_experts=32, kt_gpu_experts_ratio=ratio), BEGIN.format(rank="TP0"), *traceback]


@pytest.mark.parametrize(("ratio", "halved"), [("0.5", 0.25), ("1.0", 0.5), ("0.3", 0.15)])
def test_a_load_oom_with_an_experts_ratio_halves_the_ratio(ratio, halved):
    changes, advice = advise(*load_oom_log(ratio))
    rec = changes["--kt-gpu-experts-ratio"]
    assert (rec["current"], rec["suggested"]) == (float(ratio), halved)
    assert "while loading the weights" in rec["reason"]
    assert "sglang-kt then ignores --kt-num-gpu-experts" in rec["reason"]
    assert "--ansible-vars does not write it" in rec["reason"]
    assert rec["evidence"][0].startswith("torch.OutOfMemoryError")
    # the ignored count is neither changed nor said to have no GPU experts
    assert "--kt-num-gpu-experts" not in changes and "--kt-num-gpu-experts" not in advice


def test_a_load_oom_with_ratio_zero_has_nothing_to_lower():
    changes, advice = advise(*load_oom_log("0.0"))
    assert changes == {}
    reason = advice["--kt-num-gpu-experts"]["reason"]
    assert "smaller weight format or more GPUs" in reason
    assert "lower it" not in reason  # 0 cannot go lower


def test_ansible_vars_leave_the_ratio_out(tmp_path: Path):
    log = tmp_path / "sglang.log"
    log.write_text("\n".join(load_oom_log("0.5")) + "\n")
    vars_file = tmp_path / "tune.yml"
    res = CliRunner().invoke(app, ["tune", "--log", str(log), "--ansible-vars", str(vars_file), "--json"])
    assert res.exit_code == 0, res.output
    (rec,) = json.loads(res.stdout)["recommendations"]
    assert (rec["parameter"], rec["suggested"]) == ("--kt-gpu-experts-ratio", 0.25)
    assert "ratio" not in vars_file.read_text()
