"""`ktinfra lora serve|check` on odd input: non-finite or absurd numbers, unreadable JSON, a converter python
that cannot run, a failing conversion among several, malformed URLs and timeouts, odd server replies. Each is
one `error:` line and exit 1 (or a failed check), never a traceback, never non-strict JSON, nothing left."""

from __future__ import annotations

import json
import re
import struct
import sys
import time
from pathlib import Path

import pytest
from test_bench_http import Server, whole
from test_bench_odd_servers import drip_headers, endless
from test_lora import kt_dir, merged_kt_dir, peft_dir, serve_args
from test_lora_cli_errors import _Server, assert_clean_error, invoke

from ktinfra import lora


def _strict(text: str) -> object:
    """Parse as strict JSON: NaN and Infinity are refused."""
    return json.loads(text, parse_constant=lambda name: pytest.fail(f"non-strict JSON constant {name}"))


def _config(adapter: Path, text: str) -> None:
    (adapter / "adapter_config.json").write_text(text)


# adapter_config.json


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("lora_alpha", "1e999"),
        ("lora_alpha", "NaN"),
        ("lora_alpha", "Infinity"),
        ("lora_alpha", "-Infinity"),
        ("lora_alpha", "0"),
        ("lora_alpha", "-3"),
        ("r", "1e999"),
        ("r", "NaN"),
        ("r", "0"),
        ("r", "-4"),
    ],
)
def test_non_finite_or_non_positive_alpha_and_rank_are_refused(tmp_path, field, value):
    adapter = peft_dir(tmp_path / "a")
    numbers = {"r": "4", "lora_alpha": "8", field: value}
    _config(adapter, f'{{"peft_type": "LORA", "r": {numbers["r"]}, "lora_alpha": {numbers["lora_alpha"]}}}')
    result = invoke([*serve_args(adapter), "--dry-run", "--json"])
    assert_clean_error(result, f"{adapter / 'adapter_config.json'}: {field}")
    assert result.stdout == ""


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            b'{"peft_type": "LORA", "r": 4, "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
            "nested too deeply",
        ),
        (b'{"peft_type": "LORA", "r": 4, "lora_alpha": 8, "x": "\xff\xfe"}', "not UTF-8"),
        (b'{"peft_type": "LORA", "r": ' + b"9" * 5000 + b"}", "invalid JSON"),
    ],
)
def test_unreadable_adapter_config_is_a_clean_error_naming_the_file(tmp_path, content, message):
    adapter = peft_dir(tmp_path / "a")
    (adapter / "adapter_config.json").write_bytes(content)
    with pytest.raises(lora.LoraError, match=message) as caught:
        lora.inspect_adapter("a", adapter)
    assert str(adapter / "adapter_config.json") in str(caught.value)
    assert_clean_error(invoke([*serve_args(adapter), "--dry-run"]), message)


def test_deeply_nested_safetensors_header_is_a_clean_error(tmp_path):
    adapter = peft_dir(tmp_path / "a")
    raw = b"[" * 100_000 + b"]" * 100_000
    (adapter / "adapter_model.safetensors").write_bytes(struct.pack("<Q", len(raw)) + raw)
    assert_clean_error(invoke([*serve_args(adapter), "--dry-run"]), "not a readable safetensors file (nested")
    (adapter / "adapter_model.safetensors").write_bytes(struct.pack("<Q", 0))
    with pytest.raises(lora.LoraError, match=r"safetensors file \(header size 0\)$"):
        lora.inspect_adapter("a", adapter)


def test_deeply_nested_kt_manifest_is_a_clean_error(tmp_path):
    adapter = kt_dir(tmp_path / "kt")
    (adapter / "kt_adapter_manifest.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(lora.LoraError, match="kt_adapter_manifest.json: invalid JSON .nested too deeply"):
        lora.inspect_adapter("kt", adapter)


# --lora-alpha


def _recording_converter(tmp_path: Path) -> tuple[Path, Path]:
    ran = tmp_path / "converter-ran"
    converter = tmp_path / "converter.py"
    converter.write_text(f"open({str(ran)!r}, 'w').close()\n")
    return converter, ran


@pytest.mark.parametrize("alpha", ["nan", "inf", "-inf", "0", "-3"])
def test_bad_lora_alpha_is_refused_before_anything_runs(tmp_path, alpha):
    adapter = kt_dir(tmp_path / "kt", manifest=False)
    _config(adapter, json.dumps({"peft_type": "LORA", "r": 4, "target_modules": ["q_proj"]}))  # no alpha
    converter, ran = _recording_converter(tmp_path)
    args = serve_args(adapter, "--converter", str(converter), "--converter-python", sys.executable)
    result = invoke([*args, f"--lora-alpha={alpha}", "--output-dir", str(tmp_path / "conv"), "--json"])
    assert_clean_error(result, "--lora-alpha must be a finite number above 0")
    assert len(result.output.splitlines()) == 1 and result.stdout == ""
    assert not ran.exists() and not (tmp_path / "conv").exists()
    no_alpha = lora.inspect_adapter("kt", adapter)
    with pytest.raises(lora.LoraError, match="--lora-alpha must be"):
        lora.conversion_command(no_alpha, Path("/o"), "/m", False, converter, "py", lora_alpha=float(alpha))


# lora.convert


@pytest.mark.parametrize("python", ["/nonexistent/python", "", "{dir}"])
def test_converter_python_that_cannot_run_is_a_clean_error_and_leaves_nothing(tmp_path, python):
    python = python.format(dir=tmp_path)  # a directory: not executable as a program
    adapter = kt_dir(tmp_path / "kt")
    converter, ran = _recording_converter(tmp_path)
    out = tmp_path / "conv" / "deeper"
    args = serve_args(adapter, "--converter", str(converter), "--converter-python", python)
    result = invoke([*args, "--output-dir", str(out)])
    assert_clean_error(result, "not found or not executable")
    assert not ran.exists() and not (tmp_path / "conv").exists()
    with pytest.raises(lora.LoraError, match="not found or not executable"):
        lora.convert(
            lora.inspect_adapter("kt", adapter), out / "kt", lambda target: [python, "x", str(target)]
        )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["converter.py", "kt"]


def test_converter_writing_non_utf8_is_reported_and_leaves_nothing(tmp_path):
    adapter = lora.inspect_adapter("a", peft_dir(tmp_path / "in"))
    noisy = [sys.executable, "-c", "import sys; sys.stderr.buffer.write(b'\\xff\\xfe boom\\n'); sys.exit(3)"]
    with pytest.raises(lora.LoraError, match=r"converter failed \(exit 3\): .* boom"):
        lora.convert(adapter, tmp_path / "new" / "out", lambda target: noisy)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in"]


def test_converter_that_cannot_start_is_a_clean_error(tmp_path):
    adapter = lora.inspect_adapter("a", peft_dir(tmp_path / "in"))
    not_a_program = tmp_path / "in" / "adapter_config.json"
    not_a_program.chmod(0o755)  # executable bit, but no interpreter line: exec fails with ENOEXEC
    with pytest.raises(lora.LoraError, match="cannot run the converter"):
        lora.convert(adapter, tmp_path / "new" / "out", lambda target: [str(not_a_program), str(target)])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in"]


# Copies the PEFT files of its input to its output, like a converter would; fails for an input named two*.
COPYING_CONVERTER = """\
import pathlib, shutil, sys
src, dst = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
if src.name.startswith("two"):
    sys.exit("second fails")
dst.mkdir(parents=True)
for name in ("adapter_config.json", "adapter_model.safetensors"):
    shutil.copy(src / name, dst / name)
"""


def _two_adapter_args(tmp_path: Path, converter: Path, out: Path) -> list[str]:
    """Two adapters with expert LoRA in one server: the legacy stack's sglang fork serves them (sglang-kt only
    one); converted ones, per-expert tensors (the fork has no kt-kernel fused expert LoRA)."""
    one, two = merged_kt_dir(tmp_path / "one"), merged_kt_dir(tmp_path / "two")
    args = serve_args(one, "--adapter", f"b={two}", "--converter", str(converter), "--legacy")
    return [*args, "--converter-python", sys.executable, "--output-dir", str(out), "--json"]


def test_a_failed_conversion_removes_the_outputs_this_run_made_for_the_others(tmp_path):
    converter = tmp_path / "converter.py"
    converter.write_text(COPYING_CONVERTER)
    out = tmp_path / "conv" / "adapters"
    args = _two_adapter_args(tmp_path, converter, out)
    assert_clean_error(invoke(args), "second fails")
    assert not (tmp_path / "conv").exists()  # mine/ converted, then removed with the folders made for it
    converter.write_text(COPYING_CONVERTER.replace('startswith("two")', 'startswith("none")'))
    result = invoke(args)  # a re-run needs no --overwrite
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == ["b", "mine"]
    assert [c["output"] for c in _strict(result.stdout)["conversions"]] == [str(out / "mine"), str(out / "b")]


def test_a_failed_conversion_keeps_what_existed_before(tmp_path):
    converter = tmp_path / "converter.py"
    converter.write_text(COPYING_CONVERTER)
    out = tmp_path / "conv"
    (out / "mine").mkdir(parents=True)
    (out / "keep.txt").write_text("mine")
    assert_clean_error(invoke([*_two_adapter_args(tmp_path, converter, out), "--overwrite"]), "second fails")
    assert sorted(p.name for p in out.iterdir()) == ["keep.txt", "mine"]
    assert sorted(p.name for p in (out / "mine").iterdir()) == [
        "adapter_config.json",
        "adapter_model.safetensors",
    ]


# lora check


@pytest.fixture
def serve_raw():
    servers = []

    def start(body: bytes) -> _Server:
        servers.append(_Server(body))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


@pytest.mark.parametrize(
    "tokens", [b"NaN", b"Infinity", b"-Infinity", b"1e999", b"-5", b"1.5", b'"3"', b"true", b"10000000000"]
)
def test_check_refuses_a_usage_count_bench_refuses(serve_raw, tokens):
    """Before: -5 (or 1.5, "3") passed as completion_tokens with ok true, NaN became null; bench refused
    them all. Both read usage with bench.reply.token_counts now."""
    server = serve_raw(
        b'{"choices": [{"message": {"content": "hello"}}], "usage": {"completion_tokens": %s}}' % tokens
    )
    result = invoke(["lora", "check", "--url", server.url, "--model", "m", "--json"])
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), repr(result.exception)
    data = _strict(result.stdout)
    assert data["ok"] is False
    assert data["error"].startswith("unexpected response: usage.completion_tokens is not a token count: ")


@pytest.mark.parametrize(("tokens", "count"), [(b"0", 0), (b"7", 7), (b"null", None)])
def test_check_reports_a_usage_count_it_accepts(serve_raw, tokens, count):
    server = serve_raw(
        b'{"choices": [{"message": {"content": "hello"}}], "usage": {"completion_tokens": %s}}' % tokens
    )
    result = invoke(["lora", "check", "--url", server.url, "--model", "m", "--json"])
    assert result.exit_code == 0, result.output
    data = _strict(result.stdout)
    assert data["ok"] is True and data["reply"] == "hello" and data["completion_tokens"] == count


@pytest.mark.parametrize(
    "body",
    [
        b'{"choices": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        b'{"choices": [{"message": {"content": "x", "extra": ' + b"[" * 100_000 + b"]" * 100_000 + b"}}]}",
        b"\xff\xfe\x00garbage",
    ],
)
def test_check_treats_an_unreadable_reply_as_a_failed_check(serve_raw, body):
    server = serve_raw(body)
    result = invoke(["lora", "check", "--url", server.url, "--model", "m", "--json"])
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), repr(result.exception)
    data = _strict(result.stdout)
    assert data["ok"] is False and data["error"].startswith("unexpected response")


def test_a_reply_too_deep_to_show_is_still_a_one_line_message():
    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    assert lora._shown({"choices": deep}) == "<dict nested too deeply to show>"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--timeout", "inf"], "--timeout must be a finite number"),
        (["--timeout", "1e300"], "at most 86400"),
        (["--timeout", "86401"], "at most 86400"),
        (["--url", "ftp://x"], "url must be http:// or https://"),
        (["--url", "http://[::1"], "is not a valid URL"),
        (["--url", "http://h:99999"], "is not a valid URL"),
        (["--url", "http://h/?q=1"], "without ?query"),
        (["--url", "http://"], "followed by a host"),
    ],
)
def test_check_refuses_bad_url_or_timeout_as_bad_input(args, message):
    base = {"--url": "http://127.0.0.1:9", "--timeout": "5"}
    base.update(dict(zip(args[::2], args[1::2], strict=True)))
    argv = ["lora", "check", "--model", "m", "--json", *[x for kv in base.items() for x in kv]]
    result = invoke(argv)
    assert_clean_error(result, message)
    assert result.stdout == "" and len(result.output.splitlines()) == 1
    with pytest.raises(lora.LoraError, match=message.replace("?", r"\?")):
        lora.chat_check(base["--url"], "m", timeout_s=float(base["--timeout"]))


@pytest.fixture
def misbehaving():
    server = Server()
    yield server
    server.httpd.shutdown()
    server.httpd.server_close()


def _drip(h, code: int, seconds: float) -> None:
    h.send_response(code)
    h.send_header("Transfer-Encoding", "chunked")
    h.end_headers()
    for _ in range(int(seconds / 0.2)):
        h.wfile.write(b"1\r\nx\r\n")
        h.wfile.flush()
        time.sleep(0.2)
    h.wfile.write(b"0\r\n\r\n")


@pytest.mark.parametrize("code", [500, 200])
def test_check_of_a_dripping_reply_ends_at_the_timeout(misbehaving, code):
    # requests read the whole body with its timeout applied per read, so a byte every 0.2 s for 8 s held
    # the check for 8 s whatever --timeout said
    misbehaving.reply = lambda h, _body: _drip(h, code, 8.0)
    t0 = time.perf_counter()
    result = lora.chat_check(misbehaving.url, "m", timeout_s=1.0)
    assert time.perf_counter() - t0 < 6.0  # the body took 8 s
    assert result["ok"] is False and result["status"] == code
    if code == 500:
        # what arrived before the 1 s deadline (about 5 bytes), not the 40 of the whole body
        assert re.fullmatch(r"x{1,15}", result["error"]), result
    else:
        assert result["error"] == "timed out after 1 s"


def test_check_stops_reading_an_endless_reply(misbehaving, monkeypatch):
    monkeypatch.setattr("ktinfra.bench.client.MAX_REPLY_BYTES", 1 << 20)
    misbehaving.reply = lambda h, body: endless(h, body, b'{"choices": "' + b"a" * 4096)
    result = lora.chat_check(misbehaving.url, "m", timeout_s=60.0)
    assert result == {
        "ok": False,
        "request": result["request"],
        "status": 200,
        "error": "unexpected response: the reply ran past 1 MiB",
    }


def test_check_error_body_is_one_bounded_line(misbehaving):
    misbehaving.reply = lambda h, _body: whole(h, b"bad adapter\n" + b"y" * 100_000, code=400)
    result = lora.chat_check(misbehaving.url, "m", timeout_s=5.0)
    assert result["status"] == 400 and result["error"].startswith("bad adapter\\nyyy")
    assert len(result["error"]) <= 200 and "\n" not in result["error"]


def test_check_of_dripping_headers_ends_at_the_timeout(misbehaving):
    misbehaving.reply = drip_headers
    t0 = time.perf_counter()
    result = lora.chat_check(misbehaving.url, "m", timeout_s=1.0)
    assert time.perf_counter() - t0 < 5.0  # the headers took 10 s (drip_headers)
    assert result == {"ok": False, "request": result["request"], "error": "timed out after 1 s"}


@pytest.mark.parametrize("value", ["0", "false", "[]", "5"])
def test_a_base_model_name_that_is_no_string_is_refused(tmp_path, value):
    """Before: a falsy one (0, false, []) passed the check and came out as "base_model": 0."""
    adapter = peft_dir(tmp_path / "a")
    _config(adapter, f'{{"peft_type": "LORA", "r": 4, "lora_alpha": 8, "base_model_name_or_path": {value}}}')
    result = invoke([*serve_args(adapter), "--dry-run", "--json"])
    assert_clean_error(result, "base_model_name_or_path must be a string")
