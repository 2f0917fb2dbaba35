"""kt_python_env's git sources under kt_python_env_offline (the role's pip.yml run for real on localhost, a
git repository under tmp_path over file://, a pip that logs its calls). The role documents that an offline run
never touches the network; before, ansible's git fetched from the source's repository on every install that
was due, so an offline run (a pin bump from a filled wheelhouse, an install that failed before) failed there.
Offline, a checkout at the profile's ref is installed as it is; one missing or at another ref stops the run
with what to do before anything is installed."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from role_play import run_play

PIP = [{"ansible.builtin.include_role": {"name": "kt_python_env", "tasks_from": "pip"}}]


def _git(repo: Path, *args: str) -> str:
    command = ["git", "-C", str(repo), "-c", "user.name=ktinfra", "-c", "user.email=ktinfra@localhost", *args]
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout.strip()


def _commit(repo: Path, text: str) -> str:
    (repo / "python").mkdir(parents=True, exist_ok=True)
    (repo / "python" / "probe.txt").write_text(text)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", text)
    return _git(repo, "rev-parse", "HEAD")


def _vars(tmp: Path, ref: str, offline: bool) -> dict:
    """pip.yml's inputs: one env with one git source at `ref`, a pip that logs its arguments to pip.log."""
    pip = tmp / "pip"
    pip.write_text(f'#!/bin/sh\necho "$*" >> {tmp / "pip.log"}\n')
    pip.chmod(0o755)
    (tmp / "req.txt").write_text("six==1.16.0\n")
    source = {"name": "probe", "repo": f"file://{tmp / 'upstream'}", "ref": ref, "subdir": "python",
              "editable": True, "extras": []}  # fmt: skip
    return {
        "kt_python_env_pip": str(pip),
        "kt_python_env_installer": "pip",
        "kt_python_env_offline": offline,
        "kt_python_env_src_dir": str(tmp / "src"),
        "kt_python_env_requirements": {"dest": str(tmp / "req.txt")},
        "kt_python_env_install": {
            "manager": "venv",
            "wheelhouse": str(tmp / "wh"),
            "pip": {"index_url": "", "extra_index_urls": []},
        },  # fmt: skip
        "kt_python_env_spec": {"name": "probe", "prefix": str(tmp / "env"), "wheels": [], "git": [source]},
    }


def _pip_calls(tmp: Path) -> list[str]:
    log = tmp / "pip.log"
    return log.read_text().splitlines() if log.exists() else []


def test_an_offline_install_uses_the_checkout_at_its_ref_and_fetches_nothing(tmp_path):
    upstream = tmp_path / "upstream"
    _git(tmp_path, "init", "-q", str(upstream))
    first = _commit(upstream, "1")
    rc, output = run_play(tmp_path, PIP, _vars(tmp_path, first, offline=False))  # online: cloned
    assert rc == 0, output[-3000:]
    assert _git(tmp_path / "src" / "probe", "rev-parse", "HEAD") == first
    second = _commit(upstream, "2")  # the profile moves on later; the host is offline from now on
    shutil.move(upstream, tmp_path / "unreachable")
    (tmp_path / "pip.log").unlink()

    rc, output = run_play(tmp_path, PIP, _vars(tmp_path, first, offline=True))
    assert rc == 0, output[-3000:]
    calls = _pip_calls(tmp_path)
    assert any(
        f"-e {tmp_path / 'src' / 'probe' / 'python'}" in call and "--no-index" in call for call in calls
    )

    # a ref the checkout does not hold: stopped with what to do, before anything was installed
    (tmp_path / "pip.log").unlink()
    rc, output = run_play(tmp_path, PIP, _vars(tmp_path, second, offline=True))
    assert rc != 0
    wanted = f"kt_python_env_offline: {tmp_path / 'src' / 'probe'} is not a checkout at {second}"
    assert wanted in output and "run once with the network" in output, output[-3000:]
    assert _pip_calls(tmp_path) == []


def test_an_offline_run_without_the_checkout_stops_before_installing(tmp_path):
    rc, output = run_play(tmp_path, PIP, _vars(tmp_path, "main", offline=True))
    assert rc != 0
    assert f"{tmp_path / 'src' / 'probe'} is not a checkout at main" in output, output[-3000:]
    assert _pip_calls(tmp_path) == []
    assert not (tmp_path / "src").exists()
