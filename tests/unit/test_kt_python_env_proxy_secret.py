"""kt_python_env's pip downloads with a proxy password and an index URL with a token, run for real on
localhost at -vvv (validate, then the env's install into a venv under tmp_path) against a real index and a
real forwarding proxy (local_pypi.py): pip reads both from a 0600 file of the run, removed after it, failed
or not, so neither is in a task's environment (printed in -vvv's connection lines) or argv (in the result)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from local_pypi import PACKAGE, make_wheel, serve_index, serve_proxy
from role_play import run_play, task_output
from test_kt_python_env_network import _install, _installed
from test_kt_python_env_review_conda_patches import ENV, _setup
from test_kt_python_env_review_offline_git import PIP, _commit, _git, _vars

PASSWORD, TOKEN = "s3cret", "t0ken"


@pytest.fixture
def proxy():
    server = serve_proxy()
    yield server
    server.close()


def _run(tmp: Path, index, proxy) -> tuple[int, str]:
    extra = {
        "kt_python_env_pip_index_url": f"http://ci:{TOKEN}@127.0.0.1:{index.port}/simple",
        "kt_python_env_http_proxy": f"http://lab:{PASSWORD}@127.0.0.1:{proxy.port}",
    }
    return _install(tmp, extra, flags=["-vvv"])


def _settings_files(tmp: Path, output: str) -> tuple[list[str], list[Path]]:
    """The settings files the run's output names, and those still on disk (in TMPDIR, where they were made
    before, or in their folder next to the envs)."""
    named = sorted(set(re.findall(r"[^\s\"']*/\.ktinfra-run\.[0-9]+/downloads\.[^\s\"'/]+\.sh", output)))
    return named, sorted((tmp / "scratch").glob("ktinfra-pip.*")) + sorted(tmp.rglob("downloads.*.sh"))


def _stale(folder: Path) -> Path:
    """The settings file a run killed before its always (SIGKILL) left in `folder`, a password in it."""
    stale = folder / f".ktinfra-run.{os.getuid()}" / f"downloads.{os.uname().nodename}.sh"
    stale.parent.mkdir(parents=True)
    stale.write_text(f"export http_proxy=http://lab:{PASSWORD}@old-proxy:3128\n")
    return stale


def test_the_proxy_password_and_index_token_stay_out_of_vvv_and_the_file_is_removed(tmp_path, proxy):
    """Before: the proxy was the pip task's environment, which -vvv prints in its EXEC line (no_log hides
    the result only), and the index URL was in pip's argv."""
    make_wheel(tmp_path / "files")
    index = serve_index(tmp_path / "files")
    try:
        rc, output = _run(tmp_path, index, proxy)
    finally:
        index.close()
    assert rc == 0 and _installed(tmp_path), output[-3000:]
    through = [auth for url, auth in proxy.asked if f"/simple/{PACKAGE}/" in url]
    assert through and through[0] == "Basic " + base64.b64encode(f"lab:{PASSWORD}".encode()).decode()
    assert PASSWORD not in output and TOKEN not in output
    named, left = _settings_files(tmp_path, output)
    assert named and left == [], (named, left)


# slow: the same pip.yml block, settings file and always (the file removed, the password and token out of
# -vvv) as test_the_proxy_password_and_index_token_stay_out_of_vvv_and_the_file_is_removed; a failed
# download's own error shown, its file removed:
# test_a_failed_conda_patch_shows_condas_error_and_removes_the_file
@pytest.mark.slow
def test_a_failed_download_shows_pips_error_and_removes_the_file(tmp_path, proxy):
    """The index has no such package: pip wheel fails. Before: the task was no_log (pip's error hidden) and
    -vvv printed the password."""
    (tmp_path / "empty").mkdir()
    index = serve_index(tmp_path / "empty")
    try:
        rc, output = _run(tmp_path, index, proxy)
    finally:
        index.close()
    assert rc != 0 and not _installed(tmp_path), output[-3000:]
    assert f"No matching distribution found for {PACKAGE}" in output, output[-3000:]
    assert any(f"/simple/{PACKAGE}/" in url for url, _ in proxy.asked), proxy.asked
    assert PASSWORD not in output and TOKEN not in output
    named, left = _settings_files(tmp_path, output)
    assert named and left == [], (named, left)


# ---- conda and git: the same settings file (a stand-in conda: no conda channel is reachable here) ----

BAD_PATCH = "no-such-package"
# logs the proxy it was given and its arguments; a patch of BAD_PATCH fails as conda does, on stderr
LOGGING_CONDA = """#!/bin/sh
echo "$http_proxy $*" >> {log}
case "$* " in
  *" {bad} "*) echo "PackagesNotFoundError: The following packages are not available: {bad}" >&2; exit 1;;
esac
"""


def _conda_run(tmp: Path, patch: str, flags: tuple[str, ...] = ("-vvv",)) -> tuple[int, str, list[str]]:
    """env.yml with the conda patches' stand-in (test_kt_python_env_review_conda_patches) logging each call,
    at -vvv with a proxy password; its calls."""
    extra = _setup(tmp, [{"channel": "conda-forge", "packages": [patch]}])
    logged = tmp / "conda"
    creating = logged.read_text()
    logged.write_text(LOGGING_CONDA.format(log=tmp / "calls.log", bad=BAD_PATCH) + creating.split("\n", 1)[1])
    (tmp / "scratch").mkdir(exist_ok=True)
    extra |= {"kt_python_env_http_proxy": f"http://lab:{PASSWORD}@127.0.0.1:3128"}
    rc, output = run_play(tmp, ENV, extra, env={"TMPDIR": str(tmp / "scratch")}, flags=list(flags))
    calls = (tmp / "calls.log").read_text().splitlines() if (tmp / "calls.log").exists() else []
    return rc, output, calls


def test_conda_gets_the_proxy_from_the_file_and_vvv_does_not_show_it(tmp_path):
    """Before: conda create and the patches had the proxy as their environment, printed by -vvv."""
    stale = _stale(tmp_path)  # next to the env (tmp_path/env): what a killed run left
    rc, output, calls = _conda_run(tmp_path, "libstdcxx-ng")
    assert rc == 0, output[-3000:]
    proxy = f"http://lab:{PASSWORD}@127.0.0.1:3128"
    assert [c.split()[:2] for c in calls] == [[proxy, "create"], [proxy, "install"]], calls
    assert PASSWORD not in output
    named, left = _settings_files(tmp_path, output)
    # the one name of this user on this host, in a folder of the user only: the killed run's file is gone
    assert named == [str(stale)] and left == [], (named, left)
    assert stat.S_IMODE(stale.parent.stat().st_mode) == 0o700


def test_check_mode_writes_no_settings_file(tmp_path):
    """Under --check no download runs. Before: the file was written (check_mode: false) and the always's
    removal, a file task under --check, only said it would remove it: each --check of a conda env left a
    0600 file with the proxy password in TMPDIR."""
    rc, output, calls = _conda_run(tmp_path, "libstdcxx-ng", flags=("--check",))
    assert rc == 0 and calls == [], output[-3000:]
    assert _settings_files(tmp_path, output)[1] == []  # none in TMPDIR, none next to the env


def test_a_failed_conda_patch_shows_condas_error_and_removes_the_file(tmp_path):
    """Before: with a proxy password the patch task was no_log: its error was hidden."""
    rc, output, calls = _conda_run(tmp_path, BAD_PATCH)
    assert rc != 0 and len(calls) == 2, output[-3000:]
    assert f"PackagesNotFoundError: The following packages are not available: {BAD_PATCH}" in output
    assert PASSWORD not in output
    named, left = _settings_files(tmp_path, output)
    assert named and left == [], (named, left)


def test_git_gets_the_proxy_from_the_file_and_vvv_does_not_show_it(tmp_path):
    """pip.yml's checkout of a git source (file:// repository, a logging pip), git behind a shim on PATH
    that logs the proxy it was given. Before: the git module had the proxy as its environment, printed by
    -vvv."""
    upstream = tmp_path / "upstream"
    _git(tmp_path, "init", "-q", str(upstream))
    sha = _commit(upstream, "1")
    shim = tmp_path / "bin" / "git"
    shim.parent.mkdir()
    real = subprocess.run(["sh", "-c", "command -v git"], capture_output=True, text=True).stdout.strip()
    # the shim also lists TMPDIR and the sources' folder while git runs: where the run's git script is
    listing = f"ls -a {tmp_path / 'scratch'} {tmp_path / 'src'} >> {tmp_path / 'where.log'}"
    shim.write_text(f'#!/bin/sh\necho "$http_proxy" >> {tmp_path / "git.log"}\n{listing}\nexec {real} "$@"\n')
    shim.chmod(0o755)
    (tmp_path / "scratch").mkdir()
    extra = _vars(tmp_path, sha, offline=False)
    extra |= {"kt_python_env_http_proxy": f"http://lab:{PASSWORD}@127.0.0.1:3128"}
    env = {"TMPDIR": str(tmp_path / "scratch"), "PATH": f"{shim.parent}:{os.environ['PATH']}"}
    rc, output = run_play(tmp_path, PIP, extra, env=env, flags=["-vvv"])
    assert rc == 0, output[-3000:]
    assert _git(tmp_path / "src" / "probe", "rev-parse", "HEAD") == sha
    seen = set((tmp_path / "git.log").read_text().splitlines())
    assert seen == {f"http://lab:{PASSWORD}@127.0.0.1:3128"}, seen
    assert PASSWORD not in output
    assert sorted((tmp_path / "scratch").glob("ktinfra-*")) == []
    # made in the sources' folder, not in TMPDIR (a hardened host's /tmp is noexec), and removed after
    where = (tmp_path / "where.log").read_text()
    assert "ktinfra-git." not in where.split(f"{tmp_path / 'src'}:")[0], where
    assert ".ktinfra-git." in where.split(f"{tmp_path / 'src'}:")[1], where
    assert sorted((tmp_path / "src").glob(".ktinfra-git.*")) == []
    rc, output = run_play(tmp_path, PIP, extra, env=env, flags=["-vvv"])
    assert rc == 0 and PASSWORD not in output, output[-3000:]
    assert "changed:" not in task_output(output, "Check out git sources"), output[-3000:]


# ---- the profile's wheel files given by URL: fetched through the same settings file ----


def _wheel_url_run(
    tmp: Path, proxy, sha256: str | None = None, userinfo: str = "", query: str = ""
) -> tuple[int, str, Path]:
    """env.yml (test_kt_python_env_rerun's venv env) whose one package is a wheel file given by URL, served
    by a real local index through the recording proxy (with a password; none where `proxy` is None), at -vvv,
    the URL with `userinfo` (user:token@) and `query` (?token=...); the wheelhouse file."""
    from test_kt_python_env_rerun import _setup as _venv_setup

    served = sorted((tmp / "files").glob("*.whl"))  # made once: a zip holds the time it was made
    wheel = served[0] if served else make_wheel(tmp / "files")
    server = serve_index(tmp / "files")
    extra = _venv_setup(tmp, "six")
    # the tool venv's python (kt_python_env_tool_python) next to ktinfra, as kt_preflight leaves them
    tool = tmp / "tool" / "bin"
    tool.mkdir(parents=True, exist_ok=True)
    for name in ("ktinfra", "python"):
        if not (tool / name).exists():
            (tool / name).symlink_to(tmp / "ktinfra" if name == "ktinfra" else sys.executable)
    entry = {"name": PACKAGE, "file": wheel.name, "version": "1.0.0", "wheelhouse_file": wheel.name,
             "path": None, "url": f"http://{userinfo}127.0.0.1:{server.port}/files/{wheel.name}{query}",
             "sha256": sha256 or hashlib.sha256(wheel.read_bytes()).hexdigest()}  # fmt: skip
    extra["kt_python_env_spec"].update(packages=[], wheels=[entry])
    extra |= {"kt_preflight_ktinfra_exe": str(tool / "ktinfra")}
    if proxy is not None:
        extra |= {"kt_python_env_http_proxy": f"http://lab:{PASSWORD}@127.0.0.1:{proxy.port}"}
    (tmp / "scratch").mkdir(exist_ok=True)
    try:
        rc, output = run_play(tmp, ENV, extra, env={"TMPDIR": str(tmp / "scratch")}, flags=["-vvv"])
    finally:
        server.close()
    return rc, output, tmp / "wh" / wheel.name


# slow: the same wheel URL fetch through the proxy, its password out of -vvv, as
# test_a_wheel_urls_token_is_in_no_argv_and_not_in_vvv
@pytest.mark.slow
def test_a_wheel_url_is_fetched_through_the_proxy_and_vvv_does_not_show_the_password(tmp_path, proxy):
    """Before: get_url had the proxy as its environment (the module takes a proxy from nowhere else), and
    -vvv prints a task's environment in its EXEC line: the password was in the output."""
    rc, output, wheel = _wheel_url_run(tmp_path, proxy)
    assert rc == 0 and wheel.is_file(), output[-3000:]
    through = [auth for url, auth in proxy.asked if url.endswith(wheel.name)]
    assert through == ["Basic " + base64.b64encode(f"lab:{PASSWORD}".encode()).decode()], proxy.asked
    assert PASSWORD not in output
    assert sorted(p.name for p in wheel.parent.iterdir()) == [wheel.name]  # no partial download left
    rc, output, _ = _wheel_url_run(tmp_path, proxy)  # whole in the wheelhouse: not fetched again
    assert rc == 0 and len([u for u, _ in proxy.asked if u.endswith(wheel.name)]) == 1, output[-3000:]
    assert PASSWORD not in output


# slow: the same fetch failing on the sha256, readably, the URL without its secrets and no wheel left, as
# test_a_wheel_url_with_user_and_token_is_fetched_with_basic_auth_and_shown_without (its second run)
@pytest.mark.slow
def test_a_wheel_url_with_another_sha256_fails_readably_and_leaves_nothing(tmp_path, proxy):
    """Before: with a proxy password the download was no_log: its error (the checksum mismatch) hidden."""
    rc, output, wheel = _wheel_url_run(tmp_path, proxy, sha256="0" * 64)
    assert rc != 0 and not wheel.exists(), output[-3000:]
    served = hashlib.sha256((tmp_path / "files" / wheel.name).read_bytes()).hexdigest()
    assert served in task_output(output, "Download wheel files"), output[-3000:]  # the error, readable
    assert "censored" not in task_output(output, "Download wheel files"), output[-3000:]
    assert PASSWORD not in output
    assert list(wheel.parent.iterdir()) == []


def test_a_wheel_urls_token_is_in_no_argv_and_not_in_vvv(tmp_path, proxy):
    """A presigned or private URL (?token=) is fetched with its token, which is in no task's argv (ps, and
    the result at -vvv) and no loop item -vvv prints. Before: the URL was the download's argument."""
    rc, output, wheel = _wheel_url_run(tmp_path, proxy, query=f"?token={TOKEN}")
    assert rc == 0 and wheel.is_file(), output[-3000:]
    assert [u for u, _ in proxy.asked if u.endswith(f"{wheel.name}?token={TOKEN}")], proxy.asked
    assert TOKEN not in output and PASSWORD not in output
    # the command the download ran (its module args at -vvv) names the variable that holds the URL
    assert "KTINFRA_WHEEL_URL_0" in task_output(output, "Download wheel files"), output[-3000:]
    assert sorted(p.name for p in wheel.parent.iterdir()) == [wheel.name]


def test_a_wheel_url_with_user_and_token_is_fetched_with_basic_auth_and_shown_without(tmp_path):
    """user:token@host: urllib took user:token@127.0.0.1 for the host name (the download failed, the token
    in its argv); it goes as Basic auth now, and an error names the URL without it."""
    rc, output, wheel = _wheel_url_run(tmp_path, None, userinfo=f"ci:{TOKEN}@")
    assert rc == 0 and wheel.is_file(), output[-3000:]
    assert TOKEN not in output
    rc, output, wheel = _wheel_url_run(tmp_path / "bad", None, sha256="0" * 64, userinfo=f"ci:{TOKEN}@")
    assert rc != 0 and not wheel.exists(), output[-3000:]
    assert "http://127.0.0.1:" in task_output(output, "Download wheel files"), output[-3000:]
    assert TOKEN not in output


# ---- the profile check (validate.yml): the plan and kt_python_env_wheels hold the wheel URLs ----

OVERRIDE_TOKEN = "0verride"


def _logging_ktinfra(tmp: Path) -> Path:
    """tmp/tool/bin/ktinfra running this checkout, logging its arguments and the mode of each @FILE."""
    from role_play import REPO

    wrapper = tmp / "tool" / "bin" / "ktinfra"
    wrapper.write_text(
        f'#!/bin/sh\necho "$*" >> {tmp / "argv.log"}\nfor a in "$@"; do case "$a" in @*) '
        f'stat -c %a "${{a#@}}" >> {tmp / "modes.log"};; esac; done\n'
        f'PYTHONPATH={REPO} exec {sys.executable} -m ktinfra "$@"\n'
    )
    return wrapper


# slow: [vvv] makes the same profile check, overrides file and plan, asserted alike, as [check-diff]
@pytest.mark.parametrize(
    "flags",
    [pytest.param(["-vvv"], marks=pytest.mark.slow), ["-vvv", "--check", "--diff"]],
    ids=["vvv", "check-diff"],
)
def test_the_profile_checks_wheel_urls_and_overrides_stay_out_of_argv_and_vvv(tmp_path, flags):
    """A site profile's wheel URL with user:token@ and ?token=, and a kt_python_env_wheels override URL with
    one. Before: the overrides were `ktinfra profile check --wheels-json JSON` (in ps, and in the command's
    result at -vvv), and the check's stdout (the plan, every URL) and the fact set from it were printed at
    -v. Now the overrides go in a 0600 file, removed after; the plan keeps the URLs whole."""
    from test_kt_python_env_site_profile import PROFILE, VALIDATE
    from test_kt_python_env_site_profile import _setup as _site_setup

    host = "files.example"
    profile_url = f"https://ci:{TOKEN}@{host}/probe-1.0.0-py3-none-any.whl?token={TOKEN}"
    override_url = f"https://lab:{OVERRIDE_TOKEN}@{host}/other-2.0-py3-none-any.whl?sig={OVERRIDE_TOKEN}"
    wheels = [
        {"name": "probe", "file": "probe-1.0.0-py3-none-any.whl", "url": profile_url, "sha256": "ab" * 32},
        {
            "name": "other",
            "file": "other-1.0-py3-none-any.whl",
            "url": f"https://{host}/o.whl",
            "sha256": None,
        },
    ]
    profile = PROFILE | {"envs": {"inference": PROFILE["envs"]["inference"] | {"wheels": wheels}}}
    (tmp_path / "site.yaml").write_text(yaml.safe_dump(profile))
    extra = _site_setup(tmp_path) | {
        "kt_python_env_wheels": {"other": {"url": override_url, "sha256": "cd" * 32}}
    }
    _logging_ktinfra(tmp_path)
    dump = {"ansible.builtin.copy": {"content": "{{ kt_python_env_install | to_json }}",
                                     "dest": str(tmp_path / "plan.json"), "mode": "0600"},
            "no_log": True, "check_mode": False}  # fmt: skip
    rc, output = run_play(
        tmp_path, [*VALIDATE, dump], extra, env={"TMPDIR": str(tmp_path / "scratch")}, flags=flags
    )
    assert rc == 0, output[-3000:]
    assert OVERRIDE_TOKEN not in output and TOKEN not in output
    argv = (tmp_path / "argv.log").read_text()
    assert "--wheels-json @" in argv and OVERRIDE_TOKEN not in argv, argv
    assert (tmp_path / "modes.log").read_text().split() == ["600"]
    assert sorted((tmp_path / "scratch").iterdir()) == []  # neither the overrides nor the staged profile left
    (env,) = json.loads((tmp_path / "plan.json").read_text())["envs"]
    assert [w["url"] for w in env["wheels"]] == [profile_url, override_url]
    # -v still shows the plan, its URLs without their secrets
    shown = task_output(output, "Show the resolved install plan")
    assert f"https://{host}/probe-1.0.0-py3-none-any.whl" in shown, output[-3000:]
    assert f"https://{host}/other-2.0-py3-none-any.whl" in shown
