"""`ktinfra bench`'s HTTP path against a real local server (threaded http.server on 127.0.0.1) that answers
the way SGLang / OpenAI servers do, or the way broken ones do."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests
from typer.testing import CliRunner

from ktinfra import bench
from ktinfra.bench.client import send
from ktinfra.cli import app

Reply = Callable[[BaseHTTPRequestHandler, dict], None]


def delta(text: str) -> bytes:
    return b"data: " + json.dumps({"choices": [{"delta": {"content": text}}]}).encode() + b"\n\n"


USAGE = b'data: {"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":7}}\n\n'
DONE = b"data: [DONE]\n\n"


def sse(h: BaseHTTPRequestHandler, events: list[bytes], gap_s: float = 0.0, chunked: bool = False) -> None:
    """Events sent one by one as the server produces them: the first at once, the next gap_s apart."""
    h.send_response(200)
    h.send_header("Content-Type", "text/event-stream")
    if chunked:
        h.send_header("Transfer-Encoding", "chunked")
    else:
        h.send_header("Connection", "close")  # body ends with the connection, no length (like uvicorn 1.0)
    h.end_headers()
    for i, event in enumerate(events):
        if i and gap_s:
            time.sleep(gap_s)
        h.wfile.write(b"%x\r\n%s\r\n" % (len(event), event) if chunked else event)
        h.wfile.flush()
    if chunked:
        h.wfile.write(b"0\r\n\r\n")
    h.close_connection = True


def whole(h: BaseHTTPRequestHandler, body: bytes, code: int = 200) -> None:
    h.send_response(code)
    h.send_header("Content-Type", "application/json")
    h.send_header("Content-Length", str(len(body)))
    h.end_headers()
    h.wfile.write(body)


class Server:
    def __init__(self, port: int = 0) -> None:
        self.reply: Reply = lambda h, body: whole(h, b"{}")
        self.requests = 0
        self.connections = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def setup(self):  # once per connection (HTTP/1.1 keeps it alive between requests)
                super().setup()
                server.connections += 1

            def do_POST(self):  # noqa: N802 (http.server's naming)
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                server.requests += 1
                try:
                    server.reply(self, body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeouts, an error body read only in part)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


def scenario(srv: Server, **kw) -> bench.Scenario:
    return bench.Scenario(url=srv.url, model="m", prompt_tokens=4, gen_tokens=7, **kw)


@pytest.mark.parametrize("chunked", [False, True])
def test_ttft_and_itl_follow_the_events_as_they_arrive(server, chunked):
    # 7 events of ~50 bytes: the old iter_lines() waited for 512 bytes, so TTFT came out as the whole 3 s
    # and the inter-token latencies as ~0 with one 3 s outlier.
    events = [delta("tok ") for _ in range(7)]
    server.reply = lambda h, body: sse(h, [*events, USAGE, DONE], gap_s=0.5, chunked=chunked)
    result = send(requests.Session(), scenario(server), "hi")
    assert result.ok, result.error
    assert result.latency_s >= 4.0  # the server took 4 s: 9 events (usage and [DONE] included) 0.5 s apart
    # the first event left at once and the others were spread over the 4 s: measured as they arrived, the
    # wait for the first is the smaller part of the request and the gaps between tokens the larger
    assert result.ttft_s < result.latency_s / 2
    assert len(result.itl_s) == 6 and sum(result.itl_s) > result.latency_s / 2, result.itl_s
    level = bench.summarize([result], concurrency=1, wall_s=result.latency_s)
    assert level["tpot_ms"]["median"] > 1000 * result.latency_s / 2 / 6, level["tpot_ms"]
    assert level["itl_ms"]["mean"] > 1000 * result.latency_s / 2 / 6, level["itl_ms"]


def test_timeout_bounds_the_whole_streamed_request(server):
    # one event every 0.2 s for 8 s: each read is quick, so a per-read timeout never fired and the
    # request ran 8 s and counted as completed
    server.reply = lambda h, body: sse(h, [delta("tok ") for _ in range(40)] + [USAGE, DONE], gap_s=0.2)
    t0 = time.perf_counter()
    result = send(requests.Session(), scenario(server, timeout_s=1.0), "hi")
    assert time.perf_counter() - t0 < 6.0
    assert (result.ok, result.error) == (False, "timed out after 1 s")


def test_timeout_bounds_a_slowly_sent_whole_reply(server):
    body = json.dumps({"choices": [{"message": {"content": "a b c"}}], "usage": {"completion_tokens": 3}})

    def drip(h, _body):
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        for ch in body.encode():  # ~80 bytes, 0.1 s apart: 8 s
            h.wfile.write(bytes([ch]))
            h.wfile.flush()
            time.sleep(0.1)

    server.reply = drip
    t0 = time.perf_counter()
    result = send(requests.Session(), scenario(server, stream=False, timeout_s=1.0), "hi")
    assert time.perf_counter() - t0 < 6.0  # the body took 8 s
    assert result.error == "timed out after 1 s"


@pytest.mark.parametrize(
    ("stream", "reply", "message"),
    [
        (True, b"data: [1,2]\n\n", "event is list, not an object: [1, 2]"),
        (True, b'data: "hello"\n\n', 'event is str, not an object: "hello"'),
        (True, b'data: {"choices":[null]}\n\n', "choices[0] is NoneType, not an object: null"),
        (True, b'data: {"choices":{"a":1}}\n\n', "choices is dict, not a list"),
        (True, b'data: {"choices":[{"delta":{"content":5}}]}\n\n', "delta.content is int, not a string"),
        (
            True,
            b'data: {"choices":[],"usage":{"completion_tokens":"8"}}\n\n',
            'usage.completion_tokens is not a token count: "8"',
        ),
        (True, b'data: {"choices":[],"usage":[1]}\n\n', "usage is list, not an object"),
        (True, b"data: {oops\n\n", "not JSON: {oops"),
        (True, b'{"choices":[{"message":{"content":"x"}}]}', "no 'data:' event in the streamed reply"),
        (False, b"[1,2,3]", "reply is list, not an object: [1, 2, 3]"),
        (False, b'{"choices":[null]}', "choices[0] is NoneType, not an object"),
        (False, b"not json\n{{{", "not JSON: not json\\n{{{"),
    ],
)
def test_odd_replies_fail_their_request_not_the_run(server, stream, reply, message):
    # these raised AttributeError in a worker thread, which ended the whole run with a traceback
    server.reply = lambda h, body: sse(h, [reply, DONE]) if stream else whole(h, reply)
    level = bench.run_level(scenario(server, stream=stream), users=2, requests_per_user=1)
    assert (level["completed"], level["failed"]) == (0, 2)
    assert len(level["errors"]) == 1 and level["errors"][0].startswith(f"unexpected reply: {message}")


def test_sglang_native_stream_with_a_non_string_text_is_an_unexpected_reply(server):
    server.reply = lambda h, body: sse(h, [b'data: {"text": ["a"]}\n\n', DONE])
    result = send(requests.Session(), scenario(server, api="sglang"), "hi")
    assert result.error == 'unexpected reply: text is list, not a string: ["a"]'


def test_whole_reply_without_usage_counts_tokens_from_the_content(server):
    # it was "server returned no tokens" and a failed request, although the answer came back
    content = "The quick brown fox jumps over the lazy dog."  # 44 characters: ~11 tokens
    server.reply = lambda h, body: whole(
        h, json.dumps({"choices": [{"message": {"content": content}}]}).encode()
    )
    level = bench.run_level(scenario(server, stream=False), users=1, requests_per_user=2)
    assert (level["completed"], level["failed"]) == (2, 0)
    assert level["total_output_tokens"] == 2 * 11
    assert level["output_tokens_estimated"] == 2


def test_streamed_reply_without_usage_counts_chunks_and_says_so(server):
    server.reply = lambda h, body: sse(h, [delta("a"), delta("b"), delta("c"), DONE])
    level = bench.run_level(scenario(server), users=1, requests_per_user=1)
    assert (level["total_output_tokens"], level["output_tokens_estimated"]) == (3, 1)
    server.reply = lambda h, body: sse(h, [delta("a"), USAGE, DONE])
    assert bench.run_level(scenario(server), users=1, requests_per_user=1)["output_tokens_estimated"] == 0


def test_streamed_reply_without_usage_counts_the_tokens_of_chunks_that_carry_several(server):
    # SGLang with --stream-interval 8 sends 8 tokens per event: counting events made 2 chunks of 40
    # characters 2 output tokens and the output throughput a tenth of what it was
    server.reply = lambda h, body: sse(h, [delta("x" * 40), delta("y" * 40), DONE])
    result = send(requests.Session(), scenario(server), "hi")
    assert (result.ok, result.output_tokens, result.tokens_estimated) == (True, 20, True), result.error
    assert len(result.itl_s) == 1  # timing stays per chunk
    events = [b'data: {"text": "' + b"z" * n + b'"}\n\n' for n in (40, 80)] + [DONE]
    server.reply = lambda h, body: sse(h, events)
    result = send(requests.Session(), scenario(server, api="sglang"), "hi")
    assert (result.ok, result.output_tokens, result.tokens_estimated) == (True, 20, True), result.error


def test_whole_reply_reports_no_ttft(server):
    # it reported the whole-reply latency as TTFT (526 ms for both): a whole reply has no first token
    server.reply = lambda h, body: whole(
        h, b'{"choices":[{"message":{"content":"ab"}}],"usage":{"completion_tokens":2}}'
    )
    level = bench.run_level(scenario(server, stream=False), users=1, requests_per_user=2)
    assert level["completed"] == 2
    assert (level["ttft_ms"], level["tpot_ms"]) == (None, None)
    assert level["e2e_latency_ms"]["median"] > 0


def test_no_stream_plot_shows_whole_reply_latency(server, tmp_path):
    server.reply = lambda h, body: whole(
        h, b'{"choices":[{"message":{"content":"ab"}}],"usage":{"completion_tokens":2}}'
    )
    args = [
        "--url",
        server.url,
        "--users",
        "1",
        "--requests",
        "1",
        "--no-stream",
        "--plot",
        str(tmp_path / "p.svg"),
    ]
    res = cli(*args)
    assert res.exit_code == 0, res.output
    svg = (tmp_path / "p.svg").read_text()
    assert "whole-reply latency" in svg and "TTFT" not in svg


def test_input_tokens_without_usage_are_counted_as_estimated(server):
    # before: the requested prompt length stood in for the server's count, and nothing said so
    server.reply = lambda h, body: sse(h, [delta("a"), delta("b"), DONE])
    args = ["--url", server.url, "--users", "1", "--requests", "2", "--prompt-tokens", "37"]
    res = cli(*args, "--json")
    assert res.exit_code == 0, res.output
    level = json.loads(res.output)["levels"][0]
    assert (level["total_input_tokens"], level["input_tokens_estimated"]) == (74, 2)
    table = cli(*args)
    assert "2 completed request(s) came without usage.prompt_tokens" in " ".join(table.output.split())
    server.reply = lambda h, body: sse(h, [delta("a"), USAGE, DONE])
    level = bench.run_level(scenario(server), users=1, requests_per_user=1)
    assert (level["total_input_tokens"], level["input_tokens_estimated"]) == (5, 0)


def test_empty_whole_reply_without_usage_still_fails(server):
    server.reply = lambda h, body: whole(h, b'{"choices":[{"message":{"content":""}}]}')
    result = send(requests.Session(), scenario(server, stream=False), "hi")
    assert (result.ok, result.error) == (False, "server returned no tokens")


def cli(*args: str):
    return CliRunner().invoke(app, ["bench", "--model", "m", *args])


def one_line_error(res, message: str) -> None:
    assert res.exit_code == 1
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    assert "Traceback" not in res.output
    lines = [line for line in res.output.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1 and message in lines[0], res.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--capacity", "--min-tps", "0"], "--min-tps must be a finite number above 0, not 0"),
        (["--capacity", "--min-tps", "-5"], "--min-tps must be a finite number above 0, not -5"),
        (["--capacity", "--min-tps", "nan", "--json"], "--min-tps must be a finite number above 0, not nan"),
        (["--capacity", "--min-tps", "inf"], "--min-tps must be a finite number above 0, not inf"),
        (["--users", "1", "--timeout", "inf"], "--timeout must be a finite number above 0, not inf"),
        (["--users", "1", "--duration", "inf"], "--duration must be a finite number above 0, not inf"),
        (["--users", "1", "--min-tps", "5"], "--min-tps is the target of --capacity"),
    ],
)
def test_numbers_are_checked_before_any_request(server, args, message):
    one_line_error(cli("--url", server.url, *args), message)
    assert server.requests == 0


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://", "url must be http:// or https:// followed by a host"),
        ("http://:8000", "url must be http:// or https:// followed by a host"),
        ("ftp://host", "url must be http:// or https:// followed by a host"),
        ("127.0.0.1:30000", "url must be http:// or https:// followed by a host"),
        ("http://host:99999", "is not a valid URL"),
        ("http://127.0.0.1:0", "url 'http://127.0.0.1:0': port must be 1-65535"),  # urllib3 would use 80
        ("https://[::1]:0/v1", "port must be 1-65535"),
        ("http://a..b:8000", "host 'a..b' has an empty or over-long"),  # urllib3 raised LocationParseError
        ("http://host:30000/?a=1", "without ?query"),
    ],
)
def test_url_needs_scheme_and_host(url, message):
    one_line_error(cli("--url", url, "--users", "1"), message)


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["--users", "9" * 400], "--users"),
        (["--capacity", "--min-tps", "1", "--max-users", "4097"], "--max-users"),
        (["--users", "1", "--prompt-tokens", "9" * 400], "--prompt-tokens"),
        (["--users", "1", "--gen-tokens", str((1 << 20) + 1)], "--gen-tokens"),
        (["--users", "1", "--requests", "1000001"], "--requests"),
    ],
)
def test_sizes_no_server_takes_are_refused_before_any_request(server, args, option):
    """Before: --users 10^400 started threads until the process died; --prompt-tokens 10^400 hung."""
    res = cli("--url", server.url, *args)
    assert res.exit_code == 1 and f"Invalid value for '{option}'" in res.output
    assert server.requests == 0


def test_max_users_without_capacity_is_refused_not_ignored(server):
    """Before: --users 2 --max-users 8 ran the one level at 2 users and dropped --max-users."""
    res = cli("--url", server.url, "--users", "2", "--max-users", "8")
    assert res.exit_code == 1 and "--max-users bounds the --capacity search" in res.output
    assert server.requests == 0


def test_url_with_a_path_prefix_is_kept(server):
    server.reply = lambda h, body: (
        sse(h, [delta("a"), USAGE, DONE]) if h.path == "/api/v1/chat/completions" else whole(h, b"no", 404)
    )
    level = bench.run_level(bench.Scenario(url=server.url + "/api/", model="m"), users=1, requests_per_user=1)
    assert level["completed"] == 1, level["errors"]


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("missing/x.png", "does not exist"),
        ("x", "must end in .png, .svg, .pdf"),
        ("x.jpg", "must end in .png, .svg, .pdf"),
        ("adir.png", "is a directory"),
        ("loop.png", "loop.png is a link that leads back to itself (a loop of links)"),
        ("dangling.png", "dangling.png (a link to {tmp}/gone/x.png): directory {tmp}/gone does not exist"),
        ("to-dir.png", "to-dir.png (a link to {tmp}/adir.png) is a directory"),
        ("fifo.png", "fifo.png is not a regular file"),
    ],
)
def test_plot_path_is_checked_before_the_load(server, tmp_path, name, message):
    (tmp_path / "adir.png").mkdir()
    (tmp_path / "loop.png").symlink_to("loop2.png")
    (tmp_path / "loop2.png").symlink_to("loop.png")
    (tmp_path / "dangling.png").symlink_to(tmp_path / "gone" / "x.png")
    (tmp_path / "to-dir.png").symlink_to(tmp_path / "adir.png")
    os.mkfifo(tmp_path / "fifo.png")
    message = message.format(tmp=tmp_path)
    one_line_error(cli("--url", server.url, "--users", "1", "--plot", str(tmp_path / name)), message)
    assert server.requests == 0  # the load used to run to its end, then FileNotFoundError


def test_plot_through_a_dangling_link_is_written_to_its_target(server, tmp_path):
    server.reply = lambda h, body: sse(h, [delta("a"), delta("b"), USAGE, DONE])
    (tmp_path / "p.svg").symlink_to(tmp_path / "real.svg")
    res = cli("--url", server.url, "--users", "1", "--requests", "1", "--plot", str(tmp_path / "p.svg"))
    assert res.exit_code == 0, res.output
    assert (tmp_path / "real.svg").read_text().lstrip().startswith("<?xml")


def test_plot_is_written_where_it_says(server, tmp_path):
    server.reply = lambda h, body: sse(h, [delta("a"), delta("b"), USAGE, DONE])
    res = cli("--url", server.url, "--users", "1", "--requests", "1", "--plot", str(tmp_path / "p.svg"))
    assert res.exit_code == 0, res.output
    assert f"plot written to {tmp_path / 'p.svg'}" in " ".join(res.output.split())
    assert (tmp_path / "p.svg").read_text().lstrip().startswith("<?xml")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.svg"]


@pytest.mark.parametrize("as_json", [False, True])
def test_plot_failure_after_the_load_keeps_the_results(server, tmp_path, as_json):
    server.reply = lambda h, body: whole(h, b"boom", 500)
    args = ["--url", server.url, "--users", "1", "--requests", "1", "--plot", str(tmp_path / "p.png")]
    res = CliRunner().invoke(app, ["bench", "--model", "m", *args, *(["--json"] if as_json else [])])
    one_line_error(res, "no plot written to")
    assert "no completed level to plot" in res.output
    if as_json:
        assert json.loads(res.stdout)["levels"][0]["failed"] == 1
    else:
        assert "HTTP 500: boom" in res.stdout
    assert not (tmp_path / "p.png").exists()


def test_capacity_says_when_the_search_stopped_at_max_users(server):
    server.reply = lambda h, body: sse(h, [delta("a"), USAGE, DONE])
    args = ["--url", server.url, "--capacity", "--min-tps", "1", "--max-users", "3", "--requests", "1"]
    res = cli(*args)
    assert res.exit_code == 0, res.output
    text = " ".join(res.stdout.split())
    assert "capacity: >= 3 users at >= 1 tok/s each (stopped at --max-users" in text
