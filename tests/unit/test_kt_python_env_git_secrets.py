"""A git source whose repository URL carries https://user:token@, run for real on localhost: the checkout's
loop label (printed at the default verbosity), the items of the git sources' loops (-v) and the git module's
arguments (-vvv) show no token, and a checkout that fails still says which source and why, the URL without
its secret. The clone goes to a port where nothing listens, so it fails at once (a file:// URL cannot carry
userinfo)."""

from __future__ import annotations

import socket

import pytest
from test_kt_python_env_secret_files import _url_package

TOKEN = "g1t-t0ken-in-a-url"


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("flags", [[], ["-vvv"]], ids=["default", "vvv"])
def test_a_git_sources_token_is_not_printed(tmp_path, flags):
    """Before: the checkout's label printed the repo URL whole ('item=http://ci:TOKEN@...@v1'), and -vvv
    the git module's repo argument and the items of the offline check (skipped) and the install loop."""
    port = _closed_port()
    source = {"name": "ktgitsecret", "repo": f"http://ci:{TOKEN}@127.0.0.1:{port}/probe.git", "ref": "v1",
              "subdir": "", "editable": False, "extras": []}  # fmt: skip
    with _url_package(tmp_path) as install:
        rc, output = install(flags, git=[source], src_dir=str(tmp_path / "src"))
    assert rc != 0, output[-3000:]
    assert TOKEN not in output, [line for line in output.splitlines() if TOKEN in line][:3]
    shown = f"http://127.0.0.1:{port}/probe.git@v1"
    assert f"{shown} into {tmp_path / 'src'}/ktgitsecret: " in output, output[-3000:]
