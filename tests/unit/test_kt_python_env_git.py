"""kt_python_env's git sources (the legacy profile's sglang and LLaMA-Factory checkouts) installed for real
on localhost: a git repository under tmp_path served over file://, its package in a subfolder as sglang's
python/ is, installed editable into a venv; then a new ref in the profile, and a clone cut off after its
git init."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml
from role_play import run_play, task_output
from test_kt_python_env_rerun import ENV, _setup

PROBE = "ktgitprobe"


def _git(repo: Path, *args: str) -> str:
    command = ["git", "-C", str(repo), "-c", "user.name=ktinfra", "-c", "user.email=ktinfra@localhost", *args]
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout.strip()


def _commit(repo: Path, version: str) -> str:
    """A commit of `repo` whose python/ folder holds the probe package at `version`; its SHA."""
    package = repo / "python" / PROBE
    package.mkdir(parents=True, exist_ok=True)
    (repo / "python" / "pyproject.toml").write_text(
        f'[build-system]\nrequires = ["setuptools>=64"]\nbuild-backend = "setuptools.build_meta"\n'
        f'[project]\nname = "{PROBE}"\nversion = "{version}"\n'
    )
    (package / "__init__.py").write_text(f'VERSION = "{version}"\n')
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", version)
    return _git(repo, "rev-parse", "HEAD")


def _with_source(tmp: Path, ref: str) -> dict:
    """_setup's env with the probe repository as its git source at `ref`, in the profile too (its drift check
    wants the source installed)."""
    extra = _setup(tmp, "six==1.16.0")
    source = {"name": PROBE, "repo": f"file://{tmp / 'upstream'}", "ref": ref, "subdir": "python",
              "editable": True, "extras": []}  # fmt: skip
    profile = yaml.safe_load((tmp / "profile.yaml").read_text())
    profile["envs"]["inference"]["git"] = [source]
    (tmp / "profile.yaml").write_text(yaml.safe_dump(profile))
    extra["kt_python_env_spec"]["git"] = [source]
    return extra | {"kt_python_env_src_dir": str(tmp / "src")}


def _probe_version(tmp: Path) -> str:
    python = tmp / "env" / "bin" / "python"
    code = f"import {PROBE}; print({PROBE}.VERSION, {PROBE}.__file__)"
    return subprocess.check_output([python, "-c", code], text=True).strip()


@pytest.mark.slow
def test_a_new_ref_of_a_git_source_is_checked_out_and_installed(tmp_path):
    """Before: the install was due only when a pin or wheel changed, so a profile that moved a git source to
    a new ref (the legacy LLaMA-Factory SHA) left every installed host on the old checkout, saying nothing."""
    upstream = tmp_path / "upstream"
    _git(tmp_path, "init", "-q", str(upstream))
    first = _commit(upstream, "1.0")
    rc, output = run_play(tmp_path, ENV, _with_source(tmp_path, first))
    checkout = tmp_path / "src" / PROBE / "python" / PROBE / "__init__.py"
    assert rc == 0 and _probe_version(tmp_path) == f"1.0 {checkout}", output[-3000:]
    assert "# git source ktgitprobe" in (tmp_path / "env" / "ktinfra-requirements.txt").read_text()
    rc, output = run_play(tmp_path, ENV, _with_source(tmp_path, first))
    assert rc == 0 and "changed=0" in output, output[-3000:]

    second = _commit(upstream, "2.0")
    rc, output = run_play(tmp_path, ENV, _with_source(tmp_path, second), flags=["--check"])
    assert rc == 0 and "would be (re)installed" in output, output[-3000:]
    rc, output = run_play(tmp_path, ENV, _with_source(tmp_path, second))
    assert rc == 0, output[-3000:]
    assert _git(tmp_path / "src" / PROBE, "rev-parse", "HEAD") == second
    assert _probe_version(tmp_path) == f"2.0 {checkout}"
    rc, output = run_play(tmp_path, ENV, _with_source(tmp_path, second))
    assert rc == 0 and "changed=0" in output, output[-3000:]


@pytest.mark.slow
def test_a_clone_killed_after_git_init_is_completed_by_the_next_run(tmp_path):
    """What a clone killed outright (SIGKILL, the OOM killer; git removes its folder itself on Ctrl-C or
    SIGHUP) leaves: a repository with its origin and no commit. The run it was part of recorded no finished
    install, so the next run installs, and ansible's git completes the checkout. (Passes on the code
    before the git sources entered the requirements record too: a regression test.)"""
    upstream = tmp_path / "upstream"
    _git(tmp_path, "init", "-q", str(upstream))
    sha = _commit(upstream, "1.0")
    extra = _with_source(tmp_path, sha)
    rc, output = run_play(tmp_path, ENV, extra)
    assert rc == 0, output[-3000:]
    checkout = tmp_path / "src" / PROBE
    # the first run, killed in the clone
    subprocess.run(["rm", "-rf", checkout, tmp_path / "env"], check=True)
    _git(tmp_path, "init", "-q", str(checkout))
    _git(checkout, "remote", "add", "origin", f"file://{upstream}")
    rc, output = run_play(tmp_path, ENV, extra)
    assert rc == 0, output[-3000:]
    assert "changed:" in task_output(output, "Check out git sources"), output[-3000:]
    assert _git(checkout, "rev-parse", "HEAD") == sha and _probe_version(tmp_path).startswith("1.0 ")
