"""`ktinfra lora serve|check` on bad input: one `error:` line and exit 1, nothing converted or written first;
API keys for keyed servers (render-style --api-key-file on serve, a Bearer header on check)."""

from __future__ import annotations

import json
import struct
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from test_lora import H100, kt_dir, peft_dir, serve_args
from test_render_support import PLANS
from typer.testing import CliRunner

from ktinfra import lora
from ktinfra.cli import app

SFT_PLAN = str(PLANS / "h100-qwen3-30b-a3b-sft-current.json")
SERVE_PLAN = str(PLANS / "h100-qwen3-30b-a3b-serve.json")


def invoke(args: list[str]):
    return CliRunner().invoke(app, args)


def assert_clean_error(result, message: str) -> None:
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.output.startswith("error: ") and message in result.output


def planned_args(adapter: Path, *extra: str) -> list[str]:
    base = ["lora", "serve", "--base", "/models/Qwen3-30B-A3B", "--adapter", f"mine={adapter}"]
    return [*base, *extra]


def test_model_without_facts_plans_on_this_host(tmp_path):
    """No --facts/--from: the live host's facts. Without a GPU the plan is infeasible: a clean error."""
    result = invoke(planned_args(peft_dir(tmp_path / "a"), "--model", "Qwen3-30B-A3B", "--dry-run", "--json"))
    if result.exit_code == 0:
        assert json.loads(result.stdout)["serve"]["kt_num_gpu_experts"] == 0
    else:
        assert_clean_error(result, "")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--plan", SFT_PLAN], "needs a serve plan, got a sft plan"),
        (["--plan", SERVE_PLAN, "--model", "Qwen3-30B-A3B"], "either --plan or --model"),
        ([], "a plan is required"),
        (["--model", "Qwen3-30B-A3B", "--from", "CAPTURE"], "is not a capture folder"),
        (["--model", "Qwen3-30B-A3B", "--facts", "FACTS", "--from", str(H100)], "either --facts or --from"),
    ],
)
def test_wrong_plans_are_clean_errors(tmp_path, extra, message):
    (tmp_path / "capture").mkdir()
    extra = [e.replace("CAPTURE", str(tmp_path / "capture")).replace("FACTS", "/x.json") for e in extra]
    assert_clean_error(invoke(planned_args(peft_dir(tmp_path / "a"), *extra, "--dry-run")), message)


def test_infeasible_plan_is_a_clean_error(tmp_path):
    plan = json.loads(Path(SERVE_PLAN).read_text())
    plan.update(feasible=False, problems=["needs 450 GB RAM"])
    (tmp_path / "p.json").write_text(json.dumps(plan))
    result = invoke(planned_args(peft_dir(tmp_path / "a"), "--plan", str(tmp_path / "p.json"), "--dry-run"))
    assert_clean_error(result, "needs 450 GB RAM")


def test_api_key_file_allows_a_wildcard_bind_and_stays_out_of_the_output(tmp_path):
    adapter = peft_dir(tmp_path / "a")
    (tmp_path / "key").write_text("k-7f3a\n")
    args = [*serve_args(adapter, "--host", "0.0.0.0", "--out", str(tmp_path / "b"), "--json")]
    refused = invoke(args)
    assert_clean_error(refused, "pass --api-key-file")
    result = invoke([*args, "--api-key-file", str(tmp_path / "key")])
    assert result.exit_code == 0, result.output
    assert "k-7f3a" not in result.output and "k-7f3a" not in (tmp_path / "b" / "plan-lora.json").read_text()
    env = tmp_path / "b" / "ktinfra-serve-Qwen3-30B-A3B.env"
    assert 'KT_API_KEY="k-7f3a"' in env.read_text() and env.stat().st_mode & 0o777 == 0o600


def test_bad_api_key_is_not_echoed(tmp_path):
    (tmp_path / "key").write_text("se;cr&et|$(x)")
    args = serve_args(peft_dir(tmp_path / "a"), "--host", "0.0.0.0", "--api-key-file", str(tmp_path / "key"))
    result = invoke([*args, "--dry-run"])
    assert_clean_error(result, "contains a quote, backslash, '$' or backtick")
    assert "cr&et" not in result.output


def _write_header(path: Path, header: object) -> None:
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw)


@pytest.mark.parametrize(
    ("breaks", "message"),
    [
        (lambda a: (a / "adapter_config.json").write_text("[1, 2]"), "must hold a JSON object"),
        (lambda a: (a / "adapter_config.json").write_text('{"r": 4, "target_modules": 3}'), "target_modules"),
        (lambda a: (a / "adapter_config.json").write_text('{"r": 4, "lora_alpha": "8"}'), "lora_alpha must"),
        (lambda a: _write_header(a / "adapter_model.safetensors", [1, 2]), "header is not a JSON object"),
        (lambda a: _write_header(a / "adapter_model.safetensors", {"x": 1}), "'x' has no valid shape"),
        (
            lambda a: _write_header(a / "adapter_model.safetensors", {"q.lora_A.w": {"shape": "4"}}),
            "has no valid shape",
        ),
        (
            lambda a: _write_header(
                a / "adapter_model.safetensors", {"q.lora_A.w": {"shape": []}, "q.lora_B.w": {"shape": []}}
            ),
            "is a scalar",
        ),
    ],
)
def test_malformed_adapters_are_clean_errors(tmp_path, breaks, message):
    adapter = peft_dir(tmp_path / "a")
    breaks(adapter)
    assert_clean_error(invoke([*serve_args(adapter), "--dry-run"]), message)


def test_malformed_kt_manifest_is_a_clean_error(tmp_path):
    adapter = kt_dir(tmp_path / "kt")
    manifest = adapter / "kt_adapter_manifest.json"
    payload = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({**payload, "lora": [1]}))
    assert lora.inspect_adapter("kt", adapter).rank == 4  # no lora.rank to compare: the tensors' rank
    manifest.write_text(json.dumps({**payload, "artifacts": [1]}))
    with pytest.raises(lora.LoraError, match="artifacts do not list"):
        lora.inspect_adapter("kt", adapter)


def test_bad_out_is_refused_before_any_conversion(tmp_path):
    adapter = kt_dir(tmp_path / "kt")
    ran = tmp_path / "converter-ran"
    converter = tmp_path / "converter.py"
    converter.write_text(f"open({str(ran)!r}, 'w').close()\n")
    (tmp_path / "out-file").write_text("keep me")
    args = serve_args(adapter, "--converter", str(converter), "--converter-python", sys.executable)
    result = invoke([*args, "--out", str(tmp_path / "out-file")])
    assert_clean_error(result, "is not a directory")
    assert not ran.exists() and not (tmp_path / "kt_sglang").exists()
    assert (tmp_path / "out-file").read_text() == "keep me"


def _recording_converter(tmp_path: Path) -> tuple[Path, Path]:
    ran = tmp_path / "converter-ran"
    converter = tmp_path / "converter.py"
    converter.write_text(f"open({str(ran)!r}, 'w').close()\n")
    return converter, ran


def test_an_out_target_in_the_way_is_refused_before_any_conversion(tmp_path):
    # --out is a directory, but one of the files to write is a directory: write_bundle would refuse it
    # only after the adapters were converted, leaving kt_sglang behind and a re-run asking for --overwrite
    adapter = kt_dir(tmp_path / "kt")
    converter, ran = _recording_converter(tmp_path)
    (tmp_path / "out" / "ktinfra-serve@.service").mkdir(parents=True)
    args = serve_args(adapter, "--converter", str(converter), "--converter-python", sys.executable)
    result = invoke([*args, "--out", str(tmp_path / "out")])
    assert_clean_error(result, "ktinfra-serve@.service: a directory is in the way")
    assert not ran.exists() and not (tmp_path / "kt_sglang").exists()


def test_a_conversion_target_that_is_a_file_is_refused_even_with_overwrite(tmp_path):
    # rmtree() of a file raised NotADirectoryError as a traceback, after the converter had run
    adapter = kt_dir(tmp_path / "kt")
    converter, ran = _recording_converter(tmp_path)
    (tmp_path / "kt_sglang").write_text("keep me")
    args = serve_args(adapter, "--converter", str(converter), "--converter-python", sys.executable)
    result = invoke([*args, "--overwrite"])
    assert_clean_error(result, f"{tmp_path / 'kt_sglang'} is not a directory")
    assert not ran.exists() and (tmp_path / "kt_sglang").read_text() == "keep me"


def test_start_without_systemd_as_init_is_refused_before_anything(tmp_path, monkeypatch):
    from ktinfra.commands import lora as lora_command

    monkeypatch.setattr(lora_command, "SYSTEMD_BOOTED", tmp_path / "no-systemd-here")
    monkeypatch.setattr(lora_command.shutil, "which", lambda name: f"/usr/bin/{name}")
    adapter = kt_dir(tmp_path / "kt")
    converter, ran = _recording_converter(tmp_path)
    args = serve_args(adapter, "--converter", str(converter), "--converter-python", sys.executable)
    result = invoke([*args, "--out", str(tmp_path / "out"), "--start"])
    assert_clean_error(result, "--start needs systemd as init")
    assert not ran.exists() and not (tmp_path / "out").exists() and not (tmp_path / "kt_sglang").exists()


class _Server:
    """A real local HTTP server answering POST /v1/chat/completions with a fixed body."""

    def __init__(self, body: bytes):
        seen = self.headers = {}

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's naming)
                self.rfile.read(int(self.headers["Content-Length"]))
                seen.update(self.headers)
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def serve_body():
    servers = []

    def start(body: object) -> _Server:
        servers.append(_Server(json.dumps(body).encode()))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


@pytest.mark.parametrize("body", [{"choices": None}, [1], {"choices": [None]}, {"choices": [{"message": 3}]}])
def test_check_reports_an_unexpected_reply_shape(serve_body, body):
    server = serve_body(body)
    result = invoke(["lora", "check", "--url", server.url, "--model", "m", "--json"])
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit)
    data = json.loads(result.stdout)
    assert data["ok"] is False and data["error"].startswith("unexpected response")


def test_check_sends_the_api_key_as_bearer(serve_body, tmp_path):
    server = serve_body({"choices": [{"message": {"content": "hi"}}], "usage": {"completion_tokens": 1}})
    (tmp_path / "key").write_text("k-42\n")
    args = ["lora", "check", "--url", server.url, "--model", "m", "--json"]
    result = invoke([*args, "--api-key-file", str(tmp_path / "key")])
    assert result.exit_code == 0, result.output
    assert server.headers["Authorization"] == "Bearer k-42"
    assert "k-42" not in result.output  # stdout and stderr (click 8.2+)
    assert_clean_error(
        invoke([*args, "--api-key-file", str(tmp_path / "none")]), "cannot read --api-key-file"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--url", "http://127.0.0.1:9", "--api-key-file", "KEY"], "contains a character outside ASCII"),
        (["--url", "http://a..b:8000"], "host 'a..b' has an empty or over-long (> 63 characters) label"),
        (["--url", "http://127.0.0.1:9", "--adapter", ""], "--adapter is empty"),  # checked the base model
    ],
)
def test_check_refuses_what_no_http_client_can_send(tmp_path, args, message):
    """Before: UnicodeEncodeError ('latin-1' codec) and urllib3's LocationParseError tracebacks."""
    (tmp_path / "key").write_text("ключ123")
    args = [str(tmp_path / "key") if a == "KEY" else a for a in args]
    result = invoke(["lora", "check", "--model", "m", "--timeout", "2", *args])
    assert_clean_error(result, message)
    assert "ключ" not in result.output and result.output.count("\n") == 1


def test_check_refuses_a_socks_proxy_without_pysocks(monkeypatch):
    # requests failed the chat request "InvalidSchema: Missing dependencies for SOCKS support."
    monkeypatch.setitem(sys.modules, "socks", None)  # PySocks not installed
    monkeypatch.setenv("ALL_PROXY", "socks5://user:secret@127.0.0.1:1080")
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    result = invoke(["lora", "check", "--url", "http://10.0.0.9:30000", "--model", "m", "--timeout", "2"])
    assert_clean_error(result, "through the SOCKS proxy socks5://127.0.0.1:1080 and PySocks is not installed")
    assert "secret" not in result.output


def test_lora_serve_refuses_a_key_no_http_client_can_send(tmp_path):
    (tmp_path / "key").write_text("ключ123")
    args = serve_args(peft_dir(tmp_path / "a"), "--host", "0.0.0.0", "--api-key-file", str(tmp_path / "key"))
    assert_clean_error(invoke([*args, "--dry-run"]), "contains a character outside ASCII")


def test_check_refuses_an_empty_model_name():
    result = invoke(["lora", "check", "--url", "http://127.0.0.1:9", "--model", " ", "--timeout", "2"])
    assert_clean_error(result, "--model is empty")


@pytest.mark.parametrize(
    ("swap", "message"),
    [
        ({"--base": ""}, "error: --base is empty"),  # served the directory the command ran in
        ({"--output-dir": ""}, "error: --output-dir is empty"),
        ({"--converter": ""}, "error: --converter is empty"),
    ],
)
def test_serve_refuses_empty_paths(tmp_path, monkeypatch, swap, message):
    monkeypatch.chdir(tmp_path)
    args = serve_args(
        peft_dir(tmp_path / "a"), "--output-dir", str(tmp_path / "conv"), "--converter", "/x/c.py"
    )
    for flag, value in swap.items():
        args[args.index(flag) + 1] = value
    result = invoke([*args, "--dry-run"])
    assert result.exit_code == 1 and result.output.startswith(message), result.output


def test_serve_turns_a_path_too_long_into_one_error_line(tmp_path):
    long = str(tmp_path / ("x" * 300))
    args = serve_args(peft_dir(tmp_path / "a"))
    args[args.index("--adapter") + 1] = f"x={long}"
    result = invoke([*args, "--dry-run"])
    assert_clean_error(result, "File name too long")
    assert "Traceback" not in result.output


@pytest.mark.parametrize("name", ["..", ".", "-x", "a\n", "a" * 65])
def test_adapter_names_that_are_no_instance_names_are_refused_first(tmp_path, name):
    """Before: '..' with --output-dir first said the parent 'already exists; pass --overwrite'."""
    args = serve_args(peft_dir(tmp_path / "a"), "--output-dir", str(tmp_path / "conv"))
    args[args.index("--adapter") + 1] = f"{name}={tmp_path / 'a'}"
    result = invoke([*args, "--dry-run"])
    assert_clean_error(result, "must start with a letter or digit")


def test_start_refuses_to_repoint_an_installed_serve_template(tmp_path, monkeypatch):
    """The serve unit template is shared by every instance: kt_serve renders it with its
    kt_serve_config_dir (render --env-dir). Before, `lora serve --start` installed its own with
    /etc/ktinfra/serve, and every kt_serve instance of a moved config directory lost its EnvironmentFile."""
    from ktinfra.commands import lora as lora_cmd
    from ktinfra.lora import LoraError
    from ktinfra.render import render_serve
    from ktinfra.render.plans import load_plan

    plan = load_plan(
        Path(__file__).resolve().parents[1] / "fixtures" / "plans" / "seed002-qwen3-30b-a3b-serve.json"
    )
    args = {"name": "q", "model_path": "/m", "weight_path": "/w"}
    installed = render_serve(plan, **args, env_dir="/srv/lab/serve")
    monkeypatch.setattr(lora_cmd, "UNIT_DIR", tmp_path)
    lora_cmd._check_template(installed)  # nothing installed yet: nothing to keep
    (tmp_path / "ktinfra-serve@.service").write_text(installed.files["ktinfra-serve@.service"][0])
    lora_cmd._check_template(render_serve(plan, **args, env_dir="/srv/lab/serve"))  # the same directory
    with pytest.raises(
        LoraError, match="reads its instances' env files from /srv/lab/serve .*--env-dir /srv/lab/serve"
    ):
        lora_cmd._check_template(render_serve(plan, **args))
