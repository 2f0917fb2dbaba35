"""`ktinfra doctor --health-url` with a secret in the URL (?api_key=, Basic password): the check's own error
may quote part of the URL, and the report must not carry the secret. urllib refuses a path with a space
(requests, whose check lets it through, would quote it) and names the path and query it refused: the whole
URL's masking missed that, and --json printed the API key. A real HTTP server on loopback, the real suite."""

from __future__ import annotations

import http.server
import json
import subprocess
import sys
import threading

import pytest

from ktinfra import doctor


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (http.server's name)
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def server():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_an_api_key_quoted_by_the_checks_error_is_masked_in_json(server):
    url = f"http://kt:Pa55word@{server}/he alth?x=1&api_key=SeCrEtKeY%2B1"
    cli = [sys.executable, "-m", "ktinfra", "doctor", "--role", "any", "-k", "health", "--json"]
    done = subprocess.run([*cli, "--health-url", url], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    [check] = json.loads(done.stdout)["checks"]
    assert check["status"] == "failed" and "InvalidURL" in check["message"], check
    for secret in ("SeCrEtKeY", "SeCrEtKeY+1", "Pa55word"):
        assert secret not in done.stdout + done.stderr
    assert "api_key=***" in check["message"]


def test_a_passing_check_still_names_its_url(server):
    [check] = doctor.run(
        ["local://"], "any", health_url=f"http://{server}/health?token=abcdefgh", select="health"
    ).checks
    assert check.status == "passed" and check.output == f"health 200 from http://{server}/health?token=***"


def test_short_secrets_and_plain_text_are_left_as_they_are():
    assert (
        doctor._hidden("HTTPError 401 at 127.0.0.1", "http://127.0.0.1/h?key=1")
        == "HTTPError 401 at 127.0.0.1"
    )
    assert doctor._hidden("'/h?sig=abcd' refused", "http://h/h?sig=abcd") == "'/h?sig=***' refused"
    assert doctor._hidden("x", None) == "x"
