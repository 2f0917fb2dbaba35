"""`ktinfra doctor`'s sglang check: the build must take every --kt-* flag `ktinfra render serve` writes."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from test_doctor_envs import make_env

from ktinfra import doctor
from ktinfra.render.serve import sglang_argv

ROOT = Path(__file__).parents[2]
PLANS = ROOT / "tests" / "fixtures" / "plans"
sys.path.insert(0, str(ROOT / "tests" / "infra"))

from test_envs import KT_SERVER_FLAGS  # noqa: E402

# kvcache-ai/sglang between 7e6191c09 (2025-10-21, the first --kt-* flags) and 627bac649 (2025-11-06,
# expert deferral): every --kt-* flag of the plan but --kt-max-deferred-experts-per-token
OCTOBER_FLAGS = (
    "--kt-weight-path",
    "--kt-method",
    "--kt-cpuinfer",
    "--kt-threadpool-count",
    "--kt-num-gpu-experts",
)


def sglang_env(tmp_path: Path, flags: tuple[str, ...]) -> Path:
    """A real venv with kt_kernel and an sglang whose launch_server --help lists `flags`."""
    python = make_env(tmp_path / "kt", {"kt-kernel": "0.7.2", "sglang-kt": "0.7.2"}, ("kt_kernel", "sglang"))
    package = next(python.parents[1].glob("lib/python*/site-packages/sglang"))
    help_text = "usage: launch_server.py [-h] --model-path MODEL_PATH " + " ".join(f"[{f} X]" for f in flags)
    (package / "launch_server.py").write_text(f"import sys\nprint({help_text!r})\nsys.exit(0)\n")
    return python


def test_an_sglang_without_the_deferral_flag_the_plan_renders_fails(tmp_path):
    report = doctor.run(["local://"], "any", python=str(sglang_env(tmp_path, OCTOBER_FLAGS)), select="sglang")
    [check] = report.checks
    assert check.status == "failed", check
    assert check.message.endswith("lacks --kt-max-deferred-experts-per-token: not the sglang-kt build"), check


def test_an_sglang_with_every_flag_passes(tmp_path):
    report = doctor.run(
        ["local://"], "any", python=str(sglang_env(tmp_path, KT_SERVER_FLAGS)), select="sglang"
    )
    assert [c.status for c in report.checks] == ["passed"], report.checks


@pytest.mark.parametrize("plan", sorted(p.name for p in PLANS.glob("*-serve.json")))
def test_every_kt_flag_rendered_for_a_serve_plan_is_checked(plan):
    argv = sglang_argv(json.loads((PLANS / plan).read_text()), model_path="/data/m", weight_path="/data/w")
    rendered = [arg for arg in argv if arg.startswith("--kt-")]
    assert rendered and set(rendered) <= set(KT_SERVER_FLAGS), sorted(set(rendered) - set(KT_SERVER_FLAGS))
