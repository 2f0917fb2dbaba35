"""`ktinfra bench` against servers that misbehave in ways that used to hang, crash or corrupt a run: a
dripping or huge error body, JSON nested deeper than Python's recursion limit, absurd token counts
(non-finite metrics in --json), and a --timeout too large for the socket and clock arithmetic."""

from __future__ import annotations

import json
import re
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from socks_proxy import SocksProxy
from test_bench_http import DONE, USAGE, delta, scenario, sse, whole
from typer.testing import CliRunner

from ktinfra import bench
from ktinfra.bench.client import send
from ktinfra.bench.deadline import new_session, socks_proxy_problem
from ktinfra.bench.reply import _short
from ktinfra.cli import app
from ktinfra.commands.bench import _finite

DEEP = b'{"choices": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"


def cli(*args: str):
    return CliRunner().invoke(app, ["bench", "--model", "m", *args])


def strict(text: str) -> dict:
    def refuse(name: str):
        raise ValueError(f"non-strict JSON constant {name}")

    return json.loads(text, parse_constant=refuse)


def test_dripping_error_body_is_bounded_by_the_timeout(server):
    # a 500 whose chunked body drips a byte every 0.2 s for 8 s: resp.text read it all, each read under
    # the per-read timeout, so the request took the whole 8 s whatever --timeout said
    def drip500(h, _body):
        h.send_response(500)
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()
        for _ in range(40):
            h.wfile.write(b"1\r\nx\r\n")
            h.wfile.flush()
            time.sleep(0.2)
        h.wfile.write(b"0\r\n\r\n")

    server.reply = drip500
    t0 = time.perf_counter()
    result = send(requests.Session(), scenario(server, timeout_s=1.0), "hi")
    assert time.perf_counter() - t0 < 6.0  # the body took 8 s
    # only what dripped in before the 1 s deadline (about 5 bytes), not the 40 of the whole body
    assert not result.ok and re.fullmatch(r"HTTP 500: x{1,15}", result.error), result.error
    assert result.latency_s < 6.0


def test_only_a_prefix_of_a_huge_error_body_is_read(server):
    # the 500 announces 64 MiB, sends 8 KiB, then stalls: the old client waited to read all of it (and would
    # have held all of it in memory); the message needs only the start, not the 20 s --timeout
    def huge500(h, _body):
        h.send_response(500)
        h.send_header("Content-Length", str(64 << 20))
        h.end_headers()
        h.wfile.write(b"overloaded\n" + b"a" * 8192)
        h.wfile.flush()
        time.sleep(25)

    server.reply = huge500
    t0 = time.perf_counter()
    result = send(requests.Session(), scenario(server, timeout_s=20.0), "hi")
    assert time.perf_counter() - t0 < 10.0
    assert result.error.startswith("HTTP 500: overloaded\\naaa"), result.error
    assert len(result.error) <= 210 and "\n" not in result.error


@pytest.mark.parametrize("stream", [False, True])
def test_deeply_nested_json_fails_the_request_not_the_run(server, stream):
    # json.loads raised RecursionError in a worker thread, which ended the whole run with a traceback
    reply = (b"data: " + DEEP + b"\n\ndata: [DONE]\n\n") if stream else DEEP
    server.reply = lambda h, body: whole(h, reply)
    level = bench.run_level(scenario(server, stream=stream), users=2, requests_per_user=1)
    assert (level["completed"], level["failed"]) == (0, 2)
    assert level["errors"][0].startswith("unexpected reply: JSON nested too deeply"), level["errors"]


def test_deeply_nested_reply_on_the_command_line_prints_strict_json(server):
    server.reply = lambda h, body: whole(h, DEEP)
    res = cli("--url", server.url, "--users", "1", "--requests", "1", "--no-stream", "--json")
    assert res.exit_code == 1
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    assert "Traceback" not in res.output and "RecursionError" not in res.output
    assert strict(res.stdout)["levels"][0]["failed"] == 1


def test_error_message_of_a_deeply_nested_value_does_not_recurse():
    value: list = []
    for _ in range(5000):
        value = [value]
    assert _short(value) == "<list nested too deeply to show>"
    assert _short({"a": 1}) == '{"a": 1}'


@pytest.mark.parametrize("count", [10**308, 10**400], ids=["1e308", "1e400"])
def test_absurd_token_counts_fail_the_request_and_json_stays_strict(server, count):
    # 10**308 tokens made output_throughput and user_tps inf ("Infinity" in --json); 10**400 raised
    # OverflowError in the metrics after the load
    body = b'{"choices": [{"message": {"content": "hi"}}], "usage": {"completion_tokens": %d}}' % count
    server.reply = lambda h, _body: whole(h, body)
    res = cli("--url", server.url, "--users", "1", "--requests", "1", "--no-stream", "--json")
    assert "Traceback" not in res.output
    level = strict(res.stdout)["levels"][0]
    assert (level["completed"], level["failed"]) == (0, 1)
    assert "usage.completion_tokens is not a token count" in level["errors"][0]
    assert res.exit_code == 1


def test_non_finite_numbers_become_null_in_json_output():
    result = {"a": [float("nan"), 1.5, {"b": float("inf")}], "c": -float("inf"), "d": "NaN", "e": 3}
    assert json.dumps(_finite(result), allow_nan=False) == (
        '{"a": [null, 1.5, {"b": null}], "c": null, "d": "NaN", "e": 3}'
    )


@pytest.mark.parametrize(
    ("timeout", "message"),
    [
        ("1e10", "--timeout must be at most 86400 s (one day), not 1e+10"),
        ("86401", "--timeout must be at most 86400 s (one day), not 86401"),
        ("1e308", "--timeout must be at most 86400 s (one day), not 1e+308"),
    ],
)
def test_timeouts_beyond_a_day_are_refused_before_any_request(server, timeout, message):
    # 1e10 raised OverflowError ("timestamp out of range for platform time_t") with a traceback
    res = cli("--url", server.url, "--users", "1", "--requests", "1", "--timeout", timeout)
    assert res.exit_code == 1
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    lines = [line for line in res.output.splitlines() if line.startswith("error: ")]
    assert lines == [f"error: {message}"], res.output
    assert server.requests == 0
    with pytest.raises(ValueError, match="at most 86400 s"):
        bench.Scenario(url=server.url, model="m", timeout_s=float(timeout))


def test_a_day_long_timeout_still_works(server):
    server.reply = lambda h, _body: whole(
        h, b'{"choices": [{"message": {"content": "hi"}}], "usage": {"completion_tokens": 2}}'
    )
    res = cli("--url", server.url, "--users", "1", "--requests", "1", "--no-stream", "--timeout", "86400")
    assert res.exit_code == 0, res.output


def endless(h, _body, line: bytes) -> None:
    """A 200 whose chunked body never ends (until the client hangs up)."""
    h.send_response(200)
    h.send_header("Transfer-Encoding", "chunked")
    h.end_headers()
    piece = b"%x\r\n%s\r\n" % (len(line), line)
    try:
        while True:
            h.wfile.write(piece)
    except OSError:
        pass


@pytest.mark.parametrize(
    ("stream", "line", "message"),
    [
        (False, b'{"text": "' + b"a" * 4096, "unexpected reply: the reply ran past 1 MiB"),
        (True, b"data: " + b"a" * 4096, "unexpected reply: a streamed line ran past 1 MiB without a newline"),
    ],
)
def test_an_endless_reply_fails_the_request_once_it_is_too_big(server, monkeypatch, stream, line, message):
    # the whole reply (or one SSE line) was gathered without bound: an endless 200 filled memory until the
    # --timeout, and a day-long timeout meant gigabytes
    monkeypatch.setattr("ktinfra.bench.client.MAX_REPLY_BYTES", 1 << 20)
    server.reply = lambda h, body: endless(h, body, line)
    t0 = time.perf_counter()
    result = send(requests.Session(), scenario(server, stream=stream, timeout_s=60.0), "hi")
    assert time.perf_counter() - t0 < 30.0  # not held until the 60 s timeout
    assert not result.ok and result.error == message, result.error


def test_a_long_stream_of_short_lines_is_not_cut(server, monkeypatch):
    # the cap is per line for streams: many events adding up past it still count
    monkeypatch.setattr("ktinfra.bench.client.MAX_REPLY_BYTES", 1024)
    event = b'data: {"choices": [{"delta": {"content": "tok "}}]}\n\n'
    body = event * 200 + b"data: [DONE]\n\n"
    assert len(body) > 8 * 1024
    server.reply = lambda h, _body: whole(h, body)
    result = send(requests.Session(), scenario(server, stream=True), "hi")
    assert result.ok and result.output_tokens == 200, result.error


def drip_headers(h, _body, seconds: float = 10.0) -> None:
    """A 200 whose header lines come one every 0.3 s: each read is inside any per-read timeout."""
    try:
        h.wfile.write(b"HTTP/1.1 200 OK\r\n")
        for i in range(int(seconds / 0.3)):
            h.wfile.write(b"X-Slow-%d: y\r\n" % i)
            h.wfile.flush()
            time.sleep(0.3)
        h.wfile.write(b"Content-Length: 2\r\n\r\n{}")
    except OSError:
        pass


def test_dripping_headers_end_at_the_deadline(server):
    # requests' timeout is per read: header lines 0.3 s apart held a 1 s request for all their 10 s
    server.reply = drip_headers
    t0 = time.perf_counter()
    with new_session() as session:
        result = send(session, scenario(server, timeout_s=1.0), "hi")
    assert time.perf_counter() - t0 < 5.0  # the headers took 10 s
    assert not result.ok and result.error == "timed out after 1 s (no answer)", result.error


def test_a_run_level_reads_headers_under_the_deadline(server):
    server.reply = drip_headers
    t0 = time.perf_counter()
    level = bench.run_level(scenario(server, timeout_s=1.0), users=2, requests_per_user=1)
    assert time.perf_counter() - t0 < 5.0  # the headers took 10 s
    assert level["failed"] == 2 and set(level["errors"]) == {"timed out after 1 s (no answer)"}, level[
        "errors"
    ]


def test_the_deadline_does_not_touch_later_requests_on_the_connection(server):
    # the timer of a request that got its headers in time is cancelled: the kept-alive connection serves on
    with new_session() as session:
        server.reply = lambda h, _body: whole(h, b'{"choices": [{"message": {"content": "hi there"}}]}')
        for _ in range(3):
            result = send(session, scenario(server, timeout_s=0.5, stream=False), "hi")
            assert result.ok, result.error
            time.sleep(0.7)  # past the first requests' deadlines
    assert server.connections == 1  # one kept-alive connection served all three


def test_headers_through_an_http_proxy_end_at_the_deadline(server):
    # the dripping server is the proxy: requests sends it the absolute URL of a host that does not exist
    server.reply = drip_headers
    target = bench.Scenario(url="http://ktinfra-proxy-test.invalid:9/api", model="m", timeout_s=1.0)
    t0 = time.perf_counter()
    with new_session() as session:
        session.proxies = {"http": server.url}
        result = send(session, target, "hi")
    assert time.perf_counter() - t0 < 5.0  # the headers took 10 s
    assert not result.ok and result.error == "timed out after 1 s (no answer)", result.error
    assert server.connections == 1  # it went through the proxy, not to the .invalid host


@pytest.fixture
def socks_proxy() -> Iterator[SocksProxy]:
    proxy = SocksProxy()
    yield proxy
    proxy.stop()


def port_of(server) -> int:
    return server.httpd.server_address[1]


def test_a_reply_comes_through_a_socks_proxy(server, socks_proxy):
    server.reply = lambda h, _body: whole(h, b'{"choices": [{"message": {"content": "hi there"}}]}')
    # socks5h: the proxy resolves the name
    target = bench.Scenario(url=f"http://localhost:{port_of(server)}", model="m", stream=False)
    with new_session() as session:
        session.proxies = {"http": socks_proxy.url}
        result = send(session, target, "hi")
    assert result.ok and result.output_tokens == 2, result.error
    assert socks_proxy.tunnels == [("localhost", port_of(server))]


def serve_tls(server, tmp_path: Path, monkeypatch) -> str:
    """Turns the test server into an HTTPS one for localhost; returns the CA file that trusts it."""
    for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):  # requests lets these override session.verify
        monkeypatch.delenv(name, raising=False)
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.httpd.socket = context.wrap_socket(server.httpd.socket, server_side=True)
    return str(cert)


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_headers_through_a_socks_proxy_end_at_the_deadline(
    server, socks_proxy, scheme, tmp_path, monkeypatch
):
    # urllib3's SOCKS pools bring their own connection classes: the deadline did not watch them, and
    # header lines 0.3 s apart held a 1 s request for all their 10 s
    server.reply = drip_headers
    target = bench.Scenario(url=f"{scheme}://localhost:{port_of(server)}", model="m", timeout_s=1.0)
    t0 = time.perf_counter()
    with new_session() as session:
        if scheme == "https":
            session.verify = serve_tls(server, tmp_path, monkeypatch)
        session.proxies = {scheme: socks_proxy.url}
        result = send(session, target, "hi")
    assert time.perf_counter() - t0 < 5.0  # the headers took 10 s
    assert not result.ok and result.error == "timed out after 1 s (no answer)", result.error
    assert len(socks_proxy.tunnels) == 1


def test_a_socks_proxy_without_pysocks_is_refused_before_any_request(server, monkeypatch):
    # requests failed every request "InvalidSchema: Missing dependencies for SOCKS support." one by one
    monkeypatch.setitem(sys.modules, "socks", None)  # PySocks not installed
    monkeypatch.setenv("ALL_PROXY", "socks5h://user:secret@127.0.0.1:1080")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    target = "http://ktinfra-socks-test.invalid:8000"
    result = cli("--url", target, "--users", "1")
    assert result.exit_code == 1 and server.requests == 0
    message = " ".join(result.output.split())
    assert (
        f"error: the environment routes {target} through the SOCKS proxy socks5h://127.0.0.1:1080 and "
        "PySocks is not installed: pip install 'ktinfra[socks]'" in message
    ), message
    assert "secret" not in result.output
    monkeypatch.setenv("NO_PROXY", "ktinfra-socks-test.invalid")
    assert socks_proxy_problem(target) is None


def test_empty_data_keep_alives_in_a_stream_are_not_events(server):
    # a proxy's `data:` keep-alive between the chunks of a slow reply: before, its empty JSON failed the
    # request ("not JSON"); comment keep-alives (`: ping`) were already skipped
    events = [b"data:\n\n", delta("a"), b"data: \n\n", b": ping\n\n", delta("b"), USAGE, b"data:\n\n", DONE]
    server.reply = lambda h, body: sse(h, events)
    result = send(requests.Session(), scenario(server), "hi")
    assert (result.ok, result.output_tokens, result.tokens_estimated) == (True, 7, False), result.error
    assert len(result.itl_s) == 1  # two text chunks, one gap: the keep-alives are no tokens
    server.reply = lambda h, body: sse(h, [b"data:\n\n", b"data:\n\n"])
    result = send(requests.Session(), scenario(server), "hi")
    assert not result.ok and "no 'data:' event" in result.error, result.error
