"""`ktinfra doctor --health-url` against real servers on loopback: one that drips its answer, one that looks
at the command lines of the processes on the host while it is asked."""

from __future__ import annotations

import http.server
import os
import secrets
import socket
import threading
import time
from pathlib import Path

import pytest

from ktinfra import doctor


def health(url: str) -> doctor.Check:
    [check] = doctor.run(["local://"], "any", health_url=url, select="health").checks
    return check


@pytest.fixture
def dripping():
    """Answers 200, but its status line and headers a byte a second (each read well inside urlopen's
    timeout=10): about 90 s for the whole head."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve():
        conn, _ = listener.accept()
        with conn:
            conn.recv(65536)
            head = b"HTTP/1.0 200 OK\r\nX-Slow: " + b"a" * 60 + b"\r\nContent-Length: 0\r\n\r\n"
            for byte in head:
                if stop.wait(1):
                    return
                try:
                    conn.sendall(bytes([byte]))
                except OSError:
                    return

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}/health"
    stop.set()
    listener.close()


def test_a_server_dripping_its_head_fails_at_the_deadline(dripping):
    """urlopen's timeout bounds each read, not the request: the check waited ~90 s for the dripped head and
    passed; it now fails after HEALTH_DEADLINE (20 s) with a clear message."""
    start = time.monotonic()
    check = health(dripping)
    took = time.monotonic() - start
    assert check.status == "failed", check
    assert check.message == f"{dripping}: TimeoutError: no complete answer within 20 s", check
    assert took < 40, took


class Looking(http.server.BaseHTTPRequestHandler):
    secret = ""
    seen: list[str] = []

    def do_GET(self):  # noqa: N802 (http.server's name)
        for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
            try:
                argv = cmdline.read_bytes().split(b"\0")
            except OSError:
                continue
            # neither the target's check nor doctor's own pytest (handed the URL by the environment)
            if Looking.secret.encode() in b" ".join(argv):
                Looking.seen.append(b" ".join(argv).decode(errors="replace"))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def looking():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Looking)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd.server_address[1]
    httpd.shutdown()
    httpd.server_close()


def test_the_url_with_its_key_is_not_on_the_check_command_line(looking, tmp_path):
    """The URL (user:password@, ?api_key=) was the check's argv on the target, in any user's `ps` while the
    request ran; it is now read from a 0600 file the check removes."""
    Looking.secret, Looking.seen = secrets.token_hex(12), []
    url = f"http://kt:{Looking.secret}@127.0.0.1:{looking}/health?api_key={Looking.secret}"
    before = set(os.listdir("/tmp"))
    check = health(url)
    assert check.status == "passed", check
    assert Looking.seen == []
    left = [name for name in set(os.listdir("/tmp")) - before if name.startswith("tmp.")]
    assert not any(Looking.secret in Path("/tmp", name).read_text(errors="replace") for name in left
                   if Path("/tmp", name).is_file())  # fmt: skip
