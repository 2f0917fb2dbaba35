"""Bad input the CLI review (2026-11-29) found accepted or misreported; each case failed before its fix."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ktinfra.cli import app

HERE = Path(__file__).resolve().parent
LOG = HERE.parent / "fixtures" / "logs" / "prefill-oom.log"
PLAN = HERE.parent / "fixtures" / "plans" / "seed002-qwen3-30b-a3b-serve.json"


def cli(*args):
    return CliRunner().invoke(app, list(map(str, args)))


@pytest.mark.parametrize("via_link", [False, True])
def test_tune_does_not_write_its_vars_over_the_log_it_reads(tmp_path, via_link):
    """Before: rc 0 and the server log was replaced by kt_serve_overrides YAML."""
    log = tmp_path / "server.log"
    shutil.copy(LOG, log)
    target = log
    if via_link:
        target = tmp_path / "vars.yml"
        target.symlink_to(log)
    res = cli("tune", "--log", log, "--ansible-vars", target)
    assert res.exit_code == 1 and "is the --log file" in res.stderr and res.stdout == ""
    assert log.read_bytes() == LOG.read_bytes()


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["render", "serve", "--plan", "", "--name", "q", "--out", "OUT"], "--plan"),
        (
            ["render", "serve", "--model", "Qwen3-30B-A3B", "--facts", "", "--name", "q", "--out", "OUT"],
            "--facts",
        ),
        (
            ["render", "convert", "--plan", "", "--model-path", "/m", "--output", "/w", "--out", "OUT"],
            "--plan",
        ),
        (["plan", "--model", "Qwen3-30B-A3B", "--from", ""], "--from"),
        (["plan", "--model", "Qwen3-30B-A3B", "--facts", ""], "--facts"),
        (["tune", "--log", ""], "--log"),
        (["tune", "--log", str(LOG), "--ansible-vars", ""], "--ansible-vars"),
        (["bench", "--url", "http://127.0.0.1:9", "--model", "m", "--users", "1", "--plot", ""], "--plot"),
        (["lora", "plan", "--plan", "", "--adapter", "a=/x"], "--plan"),
        # with a profile that does not exist: should the check go, the build stops there instead of starting
        (["image", "build", "--profile", "no-such-profile", "--out", ""], "--out"),
        (["image", "build", "--profile", "no-such-profile", "--playbook", ""], "--playbook"),
    ],
)
def test_an_empty_path_is_refused_not_taken_as_the_current_directory(tmp_path, args, option):
    """Before: "" became "." (plan --from "" read the working directory as a capture; image build --out ""
    would have built into it), or an error about '.'."""
    args = [str(tmp_path / "out") if a == "OUT" else a for a in args]
    res = cli(*args)
    assert res.exit_code == 1 and f"error: {option} is empty" in res.stderr, res.output
    assert res.stdout == "" and not (tmp_path / "out").exists()


def test_lora_check_refuses_an_openai_base_url_like_bench():
    """Before: the chat went to /v1/v1/chat/completions and failed with the server's 404 body."""
    res = cli("lora", "check", "--url", "http://127.0.0.1:9/v1", "--model", "m")
    assert res.exit_code == 1
    assert "ends in /v1: give the server's base URL without it (lora check appends" in res.stderr


@pytest.mark.parametrize("name", ["-x", ".x"])
def test_an_instance_name_message_states_the_rule_it_breaks(tmp_path, name):
    """Before: "'-x' must be 1-64 characters of letters, digits, '.', '_' or '-'", which -x is."""
    res = cli(
        "render", "serve", "--plan", PLAN, "--name", name, "--model-path", "/m", "--out", tmp_path / "o"
    )
    assert res.exit_code == 1 and "starting with a letter or digit" in res.stderr, res.output


@pytest.mark.parametrize("section", ["serve", "sft"])
def test_gpu_indices_must_be_gpus_of_the_plans_host(tmp_path, section):
    """Before: a 1-GPU plan edited to gpu_indices [3] rendered CUDA_VISIBLE_DEVICES="3" (rc 0)."""
    import json

    name = "seed002-qwen3-30b-a3b-serve.json" if section == "serve" else "h100-qwen3-30b-a3b-sft-current.json"
    plan = json.loads((PLAN.parent / name).read_text())
    assert [g["index"] for g in plan["host"]["gpus"]] == [0]
    plan[section]["gpu_indices"] = [3]
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    command = ["render", section if section == "serve" else "train", "--plan", path, "--out", tmp_path / "o"]
    command += ["--name", "q", "--model-path", "/m"]
    command += [] if section == "serve" else ["--dataset", "d", "--dataset-dir", "/d", "--output-dir", "/o"]
    res = cli(*command)
    assert res.exit_code == 1, res.output
    assert f"plan {section}.gpu_indices names GPU 3, which the plan's host does not have" in res.stderr
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (["--facts", "FACTS"], "--facts"),
        (["--from", "CAPTURE"], "--from"),
        (["--facts", "FACTS", "--from", "CAPTURE"], "--facts and --from"),
    ],
)
@pytest.mark.parametrize("command", ["serve", "train"])
def test_render_with_a_plan_refuses_planning_inputs_it_would_ignore(tmp_path, command, extra, named):
    """Before: render --plan P --facts F used P and dropped F without a word."""
    facts = tmp_path / "facts.json"
    facts.write_text("{}")
    capture = tmp_path / "capture"
    capture.mkdir()
    extra = [{"FACTS": facts, "CAPTURE": capture}.get(arg, arg) for arg in extra]
    if command == "serve":
        args = ["render", "serve", "--plan", PLAN, "--name", "q", "--model-path", "/m", "--weight-path", "/w"]
    else:
        train_plan = PLAN.with_name("h100-qwen3-30b-a3b-sft-current.json")
        args = ["render", "train", "--plan", train_plan, "--name", "r", "--model-path", "/m",
                "--dataset", "identity", "--dataset-dir", "/d", "--output-dir", "/o"]  # fmt: skip
    res = cli(*args, *extra, "--out", tmp_path / "out")
    assert res.exit_code == 1 and f"{named} plan with --model" in res.stderr
    assert not (tmp_path / "out").exists()


def test_lora_serve_with_a_plan_refuses_stack(tmp_path):
    """Before: lora serve --plan P --stack S served P's stack and dropped --stack."""
    from ktinfra.render import RenderError
    from ktinfra.render.plans import resolve_plan

    with pytest.raises(RenderError, match="--stack plan with --model"):
        resolve_plan(PLAN, None, None, None, "serve", "kt-0.7")
