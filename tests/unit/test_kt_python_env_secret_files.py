"""kt_python_env's files that may hold a URL's token, run for real on localhost: the installed site profile
and an env's records (requirements, the record of the finished install, pip freeze) are 0600, read by the
role's user only (every reader runs as it: kt_python_env, kt_preflight's and kt_common's plans, kt_common's
env_finished; no service user reads them), and pip freeze's `name @ URL?token=` is not printed at -v or
-vvv."""

from __future__ import annotations

import contextlib
import stat

from role_play import run_play
from test_kt_python_env_diff_secrets import TOKEN, _site_profile
from test_kt_python_env_site_profile import VALIDATE
from test_kt_python_env_site_profile import _setup as _site_setup

RECORDS = ("ktinfra-requirements.txt", "ktinfra-requirements.installed.txt", "ktinfra-freeze.txt")


def _mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_installed_site_profile_is_0600(tmp_path):
    """A new site profile, then one installed 0644 by an earlier run. Before: installed 0644, the wheel URL's
    token readable by every local user."""
    (tmp_path / "site.yaml").write_text(_site_profile())
    installed = tmp_path / "tool" / "profiles" / "site.yaml"
    for _ in range(2):
        rc, output = run_play(
            tmp_path, VALIDATE, _site_setup(tmp_path), env={"TMPDIR": str(tmp_path / "scratch")}
        )
        assert rc == 0, output[-3000:]
        assert TOKEN in installed.read_text() and _mode(installed) == 0o600, oct(_mode(installed))
        installed.chmod(0o644)


@contextlib.contextmanager
def _url_package(tmp_path):
    """A function that runs env.yml with flags (and git sources), installing a local wheel from a URL with
    ?token= (one server for all its runs: the pin, its port in it, stays the same)."""
    from local_pypi import PACKAGE, make_wheel, serve_index
    from test_kt_python_env_rerun import _setup as _env_setup
    from test_kt_python_env_review_conda_patches import ENV

    wheel = make_wheel(tmp_path / "files")
    server = serve_index(tmp_path / "files")
    try:
        pin = f"{PACKAGE} @ http://127.0.0.1:{server.port}/files/{wheel.name}?token={TOKEN}"
        extra = _env_setup(tmp_path, pin)

        def install(flags: list[str], git: list | None = None, src_dir: str | None = None) -> tuple[int, str]:
            more = {"kt_python_env_src_dir": src_dir} if src_dir else {}
            extra["kt_python_env_spec"]["git"] = git or []
            return run_play(tmp_path, ENV, extra | more, env={"PIP_CONFIG_FILE": "/dev/null"}, flags=flags)

        yield install
    finally:
        server.close()


def test_the_env_records_are_0600_and_the_freeze_is_not_printed(tmp_path):
    """A real install of a package given by URL with ?token= at -vvv (which prints all -v does). Before: the
    records were 0644 and 'Record pip freeze' printed the freeze (its stdout) with the token; a re-run over
    records left 0644 makes them 0600 without installing again, and a --check before it (which chmods
    nothing) said "would be (re)installed" for the mode alone."""
    with _url_package(tmp_path) as install:
        rc, output = install(["-vvv"])
        freeze = (tmp_path / "env" / "ktinfra-freeze.txt").read_text()
        assert rc == 0 and f"?token={TOKEN}" in freeze, output[-3000:]
        assert TOKEN not in output, [line for line in output.splitlines() if TOKEN in line][:3]
        modes = {name: oct(_mode(tmp_path / "env" / name)) for name in RECORDS}
        assert modes == dict.fromkeys(RECORDS, "0o600")
        for name in RECORDS:
            (tmp_path / "env" / name).chmod(0o644)
        rc, checked = install(["--check"])
        assert rc == 0 and "would be (re)installed" not in checked, checked[-3000:]  # the mode alone: no
        rc, output = install([])
    assert rc == 0, output[-3000:]
    assert {name: oct(_mode(tmp_path / "env" / name)) for name in RECORDS} == dict.fromkeys(RECORDS, "0o600")
    assert "Install from the wheelhouse only" not in output, output[-3000:]


def test_a_failed_pip_freeze_says_why_without_the_freeze(tmp_path):
    """pip freeze's task is no_log; its failure is said by the next task, with pip's stderr."""
    with _url_package(tmp_path) as install:
        rc, output = install([])
        assert rc == 0, output[-3000:]
        python = tmp_path / "env" / "bin" / "python"
        real = python.resolve()
        python.unlink()
        python.write_text(
            f'#!/bin/sh\n[ "$3" = freeze ] && {{ echo "pip is broken" >&2; exit 3; }}\nexec {real} "$@"\n'
        )
        python.chmod(0o755)
        rc, output = install([])
    assert rc != 0 and "pip freeze failed (rc 3): pip is broken" in output, output[-3000:]
    assert TOKEN not in output
