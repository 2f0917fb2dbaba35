"""Ctrl-C during `ktinfra doctor`, for real: the command in its own process group, SIGINT to the group as a
terminal sends it, while the suite's health check waits on a local server that never answers. doctor exited
130 without a word (the table, the JSON and any message all missing): it now says it was interrupted, in
one line on stderr, and leaves its temporary directory (the suite's junit file) behind no more than before."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]


@pytest.fixture
def silent_health():
    """A /health that takes the request and never answers; `asked` is set once the suite asks."""
    asked, release = threading.Event(), threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):  # noqa: N802 (http.server's naming)
            asked.set()
            release.wait(120)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/health", asked
    release.set()
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("as_json", [False, True])
def test_ctrl_c_says_it_was_interrupted(tmp_path, silent_health, as_json):
    url, asked = silent_health
    command = [sys.executable, "-m", "ktinfra", "doctor", "--health-url", url, "-k", "health"]
    doctor = subprocess.Popen(
        command + (["--json"] if as_json else []),
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp_path)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # as in a terminal
    )
    try:
        assert asked.wait(120), "the suite never asked the health URL"
        os.killpg(doctor.pid, signal.SIGINT)
        out, err = doctor.communicate(timeout=120)
    finally:
        doctor.kill()
    assert doctor.returncode == 130
    assert err == "error: interrupted: doctor stopped before its report was complete\n"
    assert out == ""
    assert not list(tmp_path.glob("ktinfra-doctor-*"))
