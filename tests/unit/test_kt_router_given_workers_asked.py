"""kt_router_workers URLs that are no kt_serve instance of the inventory got neither the API-key nor the
IPv4-only check: a URL nothing answered at, or a worker that required another key (SGLang answers /health
without one, so the router listed it healthy and every request it forwarded got 401), went into router.env and
the router was restarted with it. The role now asks each such URL, from the router's host and with the
workers' key, for /health and /get_model_info before the router's files are written. Real ansible on
localhost (-c local) against real HTTP servers that answer as SGLang does (utils/auth.py: /health and /metrics
without a key, every other path only with its api_key)."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from role_play import run_play, task_output

REFUSED = (
    "these kt_router_workers are no kt_serve instance of the inventory, and the router could not use them"
)


class SGLangAuth(BaseHTTPRequestHandler):
    """An SGLang server's answers with api_key `key` (None: no key): what it was asked, with which header."""

    key: str | None = None
    seen: list

    def do_GET(self):  # noqa: N802 (http.server's name)
        self.seen.append((self.path, self.headers.get("Authorization")))
        open_path = self.path.startswith(("/health", "/metrics"))
        allowed = open_path or self.key is None or self.headers.get("Authorization") == f"Bearer {self.key}"
        body = b"" if open_path else (b'{"model_path": "m"}' if allowed else b'{"error": "Unauthorized"}')
        self.send_response(200 if allowed else 401)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def sglang_like(key: str | None, port: int = 0):
    """A stand-in SGLang server on 127.0.0.1 (`port`, 0: a free one) with api_key `key`: (its URL, the list
    of what it was asked)."""
    seen: list = []
    handler = type("Worker", (SGLangAuth,), {"key": key, "seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def nothing_listens() -> str:
    """A URL on 127.0.0.1 where nothing listens (connections are refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


def ask(tmp_path, workers: list[str], key: str, inventory: str = "localhost,", hostvars: dict | None = None):
    """The role's worker list and its check of the given workers (tasks_from workers, given_workers)."""
    extra = {"kt_router_workers": workers, "kt_router_worker_api_key": key,
             "kt_router_worker_probe_timeout": 3}  # fmt: skip
    for host, instances in (hostvars or {}).items():
        (tmp_path / "host_vars").mkdir(exist_ok=True)
        (tmp_path / "host_vars" / f"{host}.json").write_text(json.dumps({"kt_serve_instances": instances}))
    role = {"name": "kt_router"}
    tasks = [{"ansible.builtin.include_role": role | {"tasks_from": t}} for t in ("workers", "given_workers")]
    return run_play(tmp_path, tasks, extra, inventory=inventory)


def test_a_given_worker_with_another_key_is_refused_naming_it_and_the_401(tmp_path):
    with sglang_like("its-own") as (url, seen):
        rc, output = ask(tmp_path, [url + "/"], "k3y")  # a trailing / is the same worker
    assert rc != 0, output[-3000:]
    named = f"{url}: /get_model_info answered 401 to kt_router_worker_api_key"
    assert REFUSED in output and named in output, output[-3000:]
    assert "k3y" not in output and "its-own" not in output
    assert seen == [("/health", "Bearer k3y"), ("/get_model_info", "Bearer k3y")]


def test_a_given_worker_with_a_key_is_refused_when_the_router_has_none(tmp_path):
    with sglang_like("its-own") as (url, _):
        rc, output = ask(tmp_path, [url], "")
    assert rc != 0
    assert f"{url}: /get_model_info answered 401 without a key" in output, output[-3000:]


def test_a_given_url_nothing_answers_at_is_named_not_refused(tmp_path):
    """Refused until 9dbdd3d's follow-up: an SGLang server still loading its model does not answer either
    (test_kt_router_given_worker_loading.py)."""
    dead = nothing_listens()
    with sglang_like("k3y") as (url, _):
        rc, output = ask(tmp_path, [url, dead], "k3y")
    assert rc == 0, output[-3000:]
    assert f"do not answer /health from this host yet: {dead} (" in output and "Connection refused" in output
    assert REFUSED not in output


def test_given_workers_the_key_opens_pass(tmp_path):
    with sglang_like("k3y") as (same, seen), sglang_like(None) as (keyless, _):
        rc, output = ask(tmp_path, [same, keyless, "grpc://127.0.0.1:1"], "k3y")  # grpc:// is not asked
    assert rc == 0, output[-3000:]
    assert seen == [("/health", "Bearer k3y"), ("/get_model_info", "Bearer k3y")]
    assert "grpc://" not in task_output(output, "Ask the given workers the inventory does not hold")


def test_a_given_url_of_an_inventory_instance_is_not_asked(tmp_path):
    """Its checks are the inventory's (another key, IPv4 only); it may be a host that is down."""
    dead = nothing_listens()
    port = int(dead.rsplit(":", 1)[1])
    inventory = "localhost ansible_connection=local\n[kt_serve]\ngpu1 ansible_host=127.0.0.1\n"
    (tmp_path / "hosts").write_text(inventory)
    hostvars = {"gpu1": [{"name": "qwen", "port": port, "host": "0.0.0.0", "api_key": "k3y"}]}
    rc, output = ask(tmp_path, [dead], "k3y", inventory=str(tmp_path / "hosts"), hostvars=hostvars)
    assert rc == 0, output[-3000:]
    assert REFUSED not in output


def test_check_mode_asks_nothing_and_goes_on(tmp_path):
    """uri does not run in --check: no answer is not a refusal there."""
    extra = {"kt_router_workers": [nothing_listens()], "kt_router_worker_api_key": "k3y"}
    role = {"name": "kt_router"}
    tasks = [{"ansible.builtin.include_role": role | {"tasks_from": t}} for t in ("workers", "given_workers")]
    rc, output = run_play(tmp_path, tasks, extra, flags=["--check"])
    assert rc == 0, output[-3000:]
