"""A git source whose repository URL carries https://user:token@, run for real on localhost: the checkout's
loop label (printed at the default verbosity), the items of the git sources' loops (-v) and the git module's
arguments (-vvv) show no token, and a checkout that fails still says which source and why, the URL without
its secret. The clone goes to a port where nothing listens, so it fails at once (a file:// URL cannot carry
userinfo)."""

from __future__ import annotations

import socket
import subprocess

import pytest
from test_kt_python_env_secret_files import _url_package

TOKEN = "g1t-t0ken-in-a-url"


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# slow: [default] prints a subset of what [vvv] prints (the checkout's label among it), asserted alike
@pytest.mark.parametrize(
    "flags", [pytest.param([], marks=pytest.mark.slow), ["-vvv"]], ids=["default", "vvv"]
)
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


def test_a_checkout_cloned_with_a_token_keeps_its_git_config_to_the_owner(tmp_path):
    """A private repo (git's own http-backend asking for Basic auth) cloned with https://user:token@ and
    installed into the env. git keeps that URL in the checkout's .git/config (a later run fetches with it);
    before, the clone left the file 0644, so every user of the host could read the token. Now 0600."""
    from git_http import make_repo, serve_git

    make_repo(tmp_path / "repos", "ktgitprobe")
    with serve_git(tmp_path / "repos", "ci", TOKEN) as (port, received), _url_package(tmp_path) as install:
        repo = f"http://ci:{TOKEN}@127.0.0.1:{port}/ktgitprobe.git"
        source = {
            "name": "ktgitprobe",
            "repo": repo,
            "ref": "v1",
            "subdir": "",
            "editable": False,
            "extras": [],
        }
        rc, output = install([], git=[source], src_dir=str(tmp_path / "src"))
        assert rc == 0, output[-3000:]
        assert None in received and any(received), received  # asked for auth, then given the token
        config = tmp_path / "src" / "ktgitprobe" / ".git" / "config"
        assert TOKEN in config.read_text() and oct(config.stat().st_mode & 0o777) == "0o600"
    assert TOKEN not in output, [line for line in output.splitlines() if TOKEN in line][:3]
    probe = subprocess.run([str(tmp_path / "env" / "bin" / "python"), "-c", "import ktgitprobe"])
    assert probe.returncode == 0
