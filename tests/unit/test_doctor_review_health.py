"""`ktinfra doctor --health-url` against a real HTTP server on loopback that answers oddly."""

from __future__ import annotations

import http.server
import threading

import pytest

from ktinfra import doctor


class Handler(http.server.BaseHTTPRequestHandler):
    seen: list[tuple[str, str | None]] = []

    def do_GET(self):  # noqa: N802 (http.server's name)
        Handler.seen.append((self.path, self.headers.get("Authorization")))
        if self.path.startswith("/moved"):
            self.send_response(302)
            self.send_header("Location", "/login")
            self.end_headers()
            return
        self.send_response(200)  # /health, and a proxy's login page
        self.end_headers()
        self.wfile.write(b"<html>sign in</html>" if self.path == "/login" else b"")

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def server():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def health(url: str) -> doctor.Check:
    [check] = doctor.run(["local://"], "any", health_url=url, select="health").checks
    return check


def test_a_health_url_answering_200_passes(server):
    check = health(f"{server}/health")
    assert check.status == "passed" and check.output == f"health 200 from {server}/health", check


def test_a_redirect_is_not_followed_to_a_page_that_answers_200(server):
    """urlopen followed the 302 to a login page answering 200 and the check passed, with the Basic
    credentials of the URL sent on to wherever the redirect pointed."""
    Handler.seen.clear()
    check = health(f"{server.replace('//', '//kt:s3cret@')}/moved")
    assert check.status == "failed", check
    assert check.message == f"{server.replace('//', '//***@')}/moved: 302 redirect to /login (not followed)"
    assert [path for path, _ in Handler.seen] == ["/moved"]
    assert "s3cret" not in check.message + check.output
