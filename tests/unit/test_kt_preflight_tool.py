"""kt_preflight's ktinfra install (tasks/tool.yml) run for real on localhost: a wheel built from this checkout
into a venv under tmp_path, with pip's index first unreachable, then reachable."""

from __future__ import annotations

import hashlib
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
from role_play import interrupt_play, run_play

TOOL = [{"ansible.builtin.include_role": {"name": "kt_preflight", "tasks_from": "tool"}}]
# the install's index down (the wheel build on the "controller" still reaches PyPI; no local find-links)
DEAD_INDEX = {"kt_preflight_pip_index_url": "http://127.0.0.1:9/simple"}
NO_LOCAL_WHEELS = {"PIP_CONFIG_FILE": "/dev/null"}


def _tool_vars(tmp_path: Path) -> dict:
    """kt_preflight's tool venv, build dir and wheelhouse (made empty) under tmp_path."""
    (tmp_path / "wheelhouse").mkdir()
    return {
        "kt_preflight_tool_dir": str(tmp_path / "tool"),
        "kt_preflight_build_dir": str(tmp_path / "dist"),
        "kt_preflight_wheelhouse": str(tmp_path / "wheelhouse"),
        "kt_preflight_python": getattr(sys, "_base_executable", sys.executable),
    }


@pytest.mark.slow
def test_a_first_install_that_failed_is_installed_by_the_next_run(tmp_path):
    """Before: the wheel copy had landed, so the next run skipped the install and preflight passed with no
    ktinfra in the venv (every later role then failed on the missing executable)."""
    tool = tmp_path / "tool"
    extra = _tool_vars(tmp_path) | {"kt_preflight_pip_timeout": 3}
    rc, output = run_play(tmp_path, TOOL, extra | DEAD_INDEX, env=NO_LOCAL_WHEELS)
    assert rc != 0 and "Install ktinfra and its dependencies" in output, output[-3000:]
    assert not (tool / "bin" / "ktinfra").exists()
    rc, output = run_play(tmp_path, TOOL, extra)
    assert rc == 0, output[-3000:]
    assert (tool / "bin" / "ktinfra").exists()
    [wheel] = (tool / "dist").glob("ktinfra-*.whl")
    assert (tool / "dist" / ".installed-sha1").read_text() == hashlib.sha1(wheel.read_bytes()).hexdigest()
    rc, output = run_play(tmp_path, TOOL, extra)  # installed and recorded: nothing to do
    assert rc == 0 and "changed=0" in output, output[-3000:]


@pytest.mark.slow
def test_a_tool_venv_cut_off_while_it_was_created_is_created_again(tmp_path):
    """Ctrl-C while the tool venv was created left bin/python without pip (the rescue that removes a venv this
    run made does not run on Ctrl-C). Before: `creates: bin/python` kept that venv, and every re-run failed
    installing ktinfra (no such file <tool>/bin/pip)."""
    tool = tmp_path / "tool"
    extra = _tool_vars(tmp_path)
    rc, output = interrupt_play(tmp_path, TOOL, extra, tool / "bin" / "python")
    assert rc != 0 and (tool / "bin" / "python").exists() and not (tool / "bin" / "pip").exists(), output[
        -3000:
    ]
    rc, output = run_play(tmp_path, TOOL, extra)
    assert rc == 0, output[-3000:]
    assert (tool / "bin" / "ktinfra").exists()
    rc, output = run_play(tmp_path, TOOL, extra)
    assert rc == 0 and "changed=0" in output, output[-3000:]


def _routable_ipv4() -> str | None:
    """An address of this machine that pip does not count as a secure origin (loopback is)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # no packet is sent: this only picks the outgoing address
        except OSError:
            return None
        address = probe.getsockname()[0]
    return None if address.startswith("127.") or address == "0.0.0.0" else address


# slow: [list] passes the same --trusted-host arguments to the same install as [string]; the default from
# kt_python_env_pip_trusted_hosts:
# test_kt_preflight_review_trusted_hosts.py::test_a_trusted_host_given_as_a_url_is_refused_before_anything[kt-python-env-default]  # noqa: E501
@pytest.mark.parametrize("given", [pytest.param("list", marks=pytest.mark.slow), "string"])
def test_a_plain_http_mirror_named_in_the_trusted_hosts_is_used(tmp_path, given):
    """Before: kt_preflight passed --index-url but never --trusted-host, so pip ignored a plain-http mirror
    ("not a trusted or secure host and is being ignored") even with kt_python_env_pip_trusted_hosts set, and
    on a host whose wheelhouse is still empty ktinfra's dependencies were not found. The string is what
    `-e kt_preflight_pip_trusted_hosts=...` gives: split on commas, items trimmed, empty ones dropped."""
    address = _routable_ipv4()
    if address is None:
        pytest.skip("no non-loopback IPv4 address here")
    asked: list[str] = []

    class Mirror(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            asked.append(self.path)
            self.send_response(404)  # nothing here: the install's other sources (pip config) resolve
            self.end_headers()

        def log_message(self, *args):
            pass

    server = HTTPServer((address, 0), Mirror)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    extra = _tool_vars(tmp_path) | {
        "kt_preflight_pip_timeout": 5,
        "kt_python_env_pip_index_url": f"http://{address}:{server.server_address[1]}/simple",
    }
    if given == "list":
        extra["kt_python_env_pip_trusted_hosts"] = [address]
    cli = [f"kt_preflight_pip_trusted_hosts=' {address} , ,'"] if given == "string" else []
    try:
        rc, output = run_play(tmp_path, TOOL, extra, cli)
    finally:
        server.shutdown()
        server.server_close()
    assert rc == 0, output[-3000:]
    assert any(path.startswith("/simple/") for path in asked), asked
