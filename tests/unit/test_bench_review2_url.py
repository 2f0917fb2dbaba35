"""A --url that requests refuses to prepare (a space or control character in the host, a '*' label) is bad
input, refused before the load: it passed check_url, and every request of the run then failed 'InvalidURL',
for the whole of a --duration, with the table of a level that never reached a server."""

from __future__ import annotations

import time

import pytest
from test_bench_http import delta, sse
from typer.testing import CliRunner

from ktinfra.cli import app


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://exa mple.com", "Host 'exa mple.com' contains invalid character ' '"),
        ("http://exa\tmple.com:30000", "contains invalid character '\\t'"),
        ("http://*.example.com", "URL has an invalid label"),
    ],
)
def test_a_url_requests_cannot_send_is_refused_before_the_load(url, message):
    t0 = time.perf_counter()
    run = CliRunner().invoke(app, ["bench", "--model", "m", "--url", url, "--users", "1", "--duration", "3"])
    assert run.exit_code == 1, run.output
    assert run.output.startswith(f"error: url {url!r} is not a valid URL: "), run.output
    assert message in run.output
    assert "ktinfra bench" not in run.output  # no table: no level was run
    assert time.perf_counter() - t0 < 2.5  # the 3 s --duration was not spent


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_a_url_with_a_path_needing_quotes_still_reaches_the_server(server, host):
    # requests quotes a space in the path: such a base URL is not refused (the request is sent)
    server.reply = lambda h, _body: sse(h, [delta("a"), delta("b"), b"data: [DONE]\n\n"])
    url = server.url.replace("127.0.0.1", host) + "/a b"
    run = CliRunner().invoke(app, ["bench", "--model", "m", "--url", url, "--users", "1", "--requests", "1"])
    assert run.exit_code == 0, run.output
    assert server.requests == 1
