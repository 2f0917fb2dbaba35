"""`ktinfra render ...` on the command line: JSON output, modes, and bad input leaving --out untouched."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from test_render_support import PLANS, snapshot
from typer.testing import CliRunner

from ktinfra.cli import app

SEED002 = str(PLANS / "seed002-qwen3-30b-a3b-serve.json")
CAPTURE = PLANS.parent / "hosts" / "h100-xeon-amx-16c"
SERVE = ["render", "serve", "--name", "Qwen3-30B-A3B", "--model-path", "/models/Qwen3-30B-A3B"]
SERVE += ["--weight-path", "/models/Qwen3-30B-A3B-INT8"]


@pytest.fixture
def out_dir(tmp_path):
    """A --out directory that already holds an earlier render, so 'untouched' is a real check."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "ktinfra-serve@.service").write_text("# earlier render\n")
    env = out / "ktinfra-serve-Qwen3-30B-A3B.env"
    env.write_text('KT_SERVE_ARGS="--port 1"\n')
    env.chmod(0o600)
    return out


def run(args):
    return CliRunner().invoke(app, args)


def test_serve_json_output_through_the_real_entry_point(tmp_path):
    out = tmp_path / "units"
    cmd = [sys.executable, "-m", "ktinfra", *SERVE, "--plan", SEED002, "--out", str(out), "--json"]
    result = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["unit"] == "ktinfra-serve@Qwen3-30B-A3B.service"
    assert doc["health_url"] == "http://127.0.0.1:8000/health"
    assert doc["argv"][1:3] == ["-m", "sglang.launch_server"]
    assert sorted(doc["files"]) == sorted(
        [str(out / "ktinfra-serve@.service"), str(out / "ktinfra-serve-Qwen3-30B-A3B.env")]
    )
    assert (out / "ktinfra-serve-Qwen3-30B-A3B.env").stat().st_mode & 0o777 == 0o600
    assert (out / "ktinfra-serve@.service").stat().st_mode & 0o777 == 0o644
    assert doc["install"] == {
        "ktinfra-serve@.service": "/etc/systemd/system/ktinfra-serve@.service",
        "ktinfra-serve-Qwen3-30B-A3B.env": "/etc/ktinfra/serve/Qwen3-30B-A3B.env",
    }


def test_api_key_file_allows_a_wildcard_bind(out_dir, tmp_path):
    key = tmp_path / "key"
    key.write_text("k-123\n")
    result = run([*SERVE, "--plan", SEED002, "--out", str(out_dir), "--json", "--host", "0.0.0.0"]
                 + ["--api-key-file", str(key)])  # fmt: skip
    assert result.exit_code == 0, result.output
    env = (out_dir / "ktinfra-serve-Qwen3-30B-A3B.env").read_text()
    assert 'KT_API_KEY="k-123"' in env
    assert "--host 0.0.0.0" in env
    assert "k-123" not in " ".join(json.loads(result.stdout)["argv"])
    assert not [p for p in out_dir.iterdir() if p.name.startswith(".")], "temp files left behind"


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("malformed", "is not valid JSON"),
        ("not-object", "must be a JSON object"),
        ("unknown-mode", "unknown mode 'infer'"),
        ("missing-model-path", "model path is required"),
        ("wildcard-no-key", "refusing to bind the server to 0.0.0.0 without an API key"),
        ("missing-plan-file", "cannot read plan"),
        ("no-plan", "a plan is required"),
        ("empty-key", "is empty"),
        ("key-with-dollar", "contains a quote, backslash, '$' or backtick"),
        ("key-with-space", "contains whitespace or a control character"),
        ("key-with-nbsp", "contains whitespace or a control character"),
        ("not-a-capture", "is not a capture folder"),
        ("missing-capture", "capture folder not found"),
    ],
)
def test_bad_input_fails_clearly_and_leaves_out_untouched(out_dir, tmp_path, case, message):
    plan = json.loads(open(SEED002).read())
    args = [*SERVE, "--out", str(out_dir)]
    if case == "malformed":
        args += ["--plan", _write(tmp_path, "p.json", '{"mode": "serve", "serve": {')]
    elif case == "not-object":
        args += ["--plan", _write(tmp_path, "p.json", "[1, 2]")]
    elif case == "unknown-mode":
        plan["mode"] = "infer"
        args += ["--plan", _write(tmp_path, "p.json", json.dumps(plan))]
    elif case == "missing-model-path":
        args = ["render", "serve", "--name", "q", "--out", str(out_dir), "--plan", SEED002]
        args += ["--weight-path", "/w"]
    elif case == "wildcard-no-key":
        args += ["--plan", SEED002, "--host", "0.0.0.0"]
    elif case == "missing-plan-file":
        args += ["--plan", str(tmp_path / "nope.json")]
    elif case == "empty-key":
        args += ["--plan", SEED002, "--api-key-file", _write(tmp_path, "key", "\n")]
    elif case.startswith("key-with"):
        secrets = {
            "key-with-dollar": "se;cr&et|$(x)",
            "key-with-space": "se cr-et",
            "key-with-nbsp": "se\u00a0cr",
        }
        secret = secrets[case]
        args += ["--plan", SEED002, "--host", "0.0.0.0", "--api-key-file", _write(tmp_path, "key", secret)]
    elif case == "not-a-capture":
        args += ["--model", "Qwen3-30B-A3B", "--from", str(tmp_path)]
    elif case == "missing-capture":
        args += ["--model", "Qwen3-30B-A3B", "--from", str(tmp_path / "nope")]
    before = snapshot(out_dir)
    result = run(args)
    assert result.exit_code == 1
    assert message in result.output
    assert result.output.startswith("error: ") and result.output.count("\n") == 1
    assert "cr&et" not in result.output and "cr-et" not in result.output
    assert snapshot(out_dir) == before


@pytest.mark.parametrize("out", ["/proc/ktinfra-test", "/sys/ktinfra-test", "/proc/self/ktinfra/x"])
def test_out_where_nothing_can_be_created_is_a_clear_error(out):
    result = run([*SERVE, "--plan", SEED002, "--out", out])
    assert result.exit_code == 1
    assert result.output.startswith("error: ") and out.rsplit("/", 1)[0] in result.output


def test_out_that_is_a_file_is_refused(tmp_path):
    target = tmp_path / "file"
    target.write_text("keep me")
    result = run([*SERVE, "--plan", SEED002, "--out", str(target)])
    assert result.exit_code == 1
    assert "is not a directory" in result.output
    assert target.read_text() == "keep me"


def test_human_output_names_the_unit_and_the_install_steps(tmp_path):
    result = run([*SERVE, "--plan", SEED002, "--out", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    assert "ktinfra-serve@Qwen3-30B-A3B.service" in result.output
    assert "systemctl daemon-reload" in result.output
    assert "ktinfra-serve-Qwen3-30B-A3B.env -> /etc/ktinfra/serve/Qwen3-30B-A3B.env" in result.output


def test_a_key_file_that_is_not_utf8_is_refused_without_quoting_the_key(tmp_path):
    # UnicodeDecodeError's message quotes the offending byte, which is part of the secret
    key = tmp_path / "key"
    key.write_bytes(b"\xfesecret\xff")
    args = [*SERVE, "--plan", SEED002, "--api-key-file", str(key), "--out", str(tmp_path / "out")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1 and "is not UTF-8 text (the key is not shown)" in result.output
    assert "0xfe" not in result.output and "0xff" not in result.output and "secret" not in result.output


@pytest.mark.parametrize("port", ["0", "65536", "-1"])
def test_a_port_out_of_range_names_both_places_it_can_come_from(tmp_path, port):
    args = [*SERVE, "--plan", SEED002, "--port", port, "--out", str(tmp_path / "out")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1 and result.output.startswith("error: port must be an integer 1-65535")
    assert "(--port or plan serve.port)" in result.output and not (tmp_path / "out").exists()


def test_an_out_below_a_file_says_the_file_is_no_directory(tmp_path):
    (tmp_path / "plan.json").write_text("{}")
    args = [*SERVE, "--plan", SEED002, "--out", str(tmp_path / "plan.json" / "sub")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1 and result.output.count("\n") == 1
    assert f"{tmp_path / 'plan.json'} is not a directory" in result.output  # was "is not writable"


@pytest.mark.parametrize(
    "args",
    [
        [*SERVE, "--plan", SEED002],
        [
            "render",
            "convert",
            "--model-path",
            "/models/q",
            "--output",
            "/models/q-int8",
            "--method",
            "AMXINT8",
        ],
        ["lora", "serve", "--base", "/models/q", "--adapter", "a=/runs/a", "--plan", SEED002],
    ],
    ids=["serve", "convert", "lora-serve"],
)
def test_an_empty_out_is_refused_not_read_as_the_current_directory(tmp_path, monkeypatch, args):
    """Before: --out "" (an unset variable) rendered into the directory the command ran in."""
    monkeypatch.chdir(tmp_path)
    result = run([*args, "--out", ""])
    assert result.exit_code == 1 and result.output == "error: --out is empty\n"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("source", ["/dev/zero", "big"])
def test_a_key_file_longer_than_any_key_is_refused_after_a_bounded_read(tmp_path, source):
    """Before: /dev/zero was read until memory ran out; a 64 MB file went into the env file."""
    path = tmp_path / "big"
    path.write_text("k" * 5000)
    key = source if source.startswith("/") else str(path)
    result = run([*SERVE, "--plan", SEED002, "--api-key-file", key, "--out", str(tmp_path / "o")])
    assert result.exit_code == 1 and "is longer than 4096 bytes: not a key file" in result.output
    assert not (tmp_path / "o").exists()


def test_a_tilde_the_shell_left_alone_is_the_home_directory(tmp_path, monkeypatch):
    """`--out=~/units` (bash expands no ~ after `=`) and quoted '~/…' made a literal ./~/units folder."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    plan = tmp_path / "home" / "plan.json"
    plan.parent.mkdir()
    plan.write_text((PLANS / "seed002-qwen3-30b-a3b-serve.json").read_text())
    args = ["render", "serve", "--plan=~/plan.json", "--name", "q", "--model-path", "/models/q"]
    res = CliRunner().invoke(app, [*args, "--weight-path", "/models/q-INT8", "--out=~/units"])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "home" / "units" / "ktinfra-serve-q.env").is_file()
    assert not (tmp_path / "~").exists()


def test_a_facts_document_given_as_a_plan_is_named(tmp_path):
    """Before: "plan has unknown mode None" for `render serve --plan facts.json`."""
    facts = tmp_path / "facts.json"
    res = CliRunner().invoke(app, ["facts", "--from", str(CAPTURE), "--json"])
    facts.write_text(res.stdout)
    res = CliRunner().invoke(
        app,
        [
            "render",
            "serve",
            "--plan",
            str(facts),
            "--name",
            "q",
            "--model-path",
            "/m",
            "--out",
            str(tmp_path / "o"),
        ],
    )
    assert res.exit_code == 1
    assert "this is a facts document (`ktinfra facts --json`), not a plan" in res.stderr
    assert not (tmp_path / "o").exists()


def test_a_capture_folder_given_as_facts_points_to_from():
    res = CliRunner().invoke(app, ["plan", "-m", "Qwen3-30B-A3B", "--mode", "serve", "--facts", str(CAPTURE)])
    assert res.exit_code == 1
    assert "is a directory: a capture folder (`ktinfra facts --capture`) goes to --from" in res.stderr
