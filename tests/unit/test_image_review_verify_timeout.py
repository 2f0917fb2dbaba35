"""Fresh-eyes review: `ktinfra image verify` had no time limit per testinfra suite. One check that never
returns (a `systemctl is-system-running --wait`, a probe waiting on a GPU, a network call in an offline image)
hung the whole verify for ever, with no message. Now each suite gets --suite-timeout seconds; past them its
whole process group is stopped (pytest and what it started), the suite is reported failed with the test it
was in, and the container is still removed. Here the suite is real and runs in a real pytest (the verify code
path); only docker is stood in for, since the suite needs no container (tests/integration/image has the
container case)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ktinfra.cli import app
from ktinfra.image import verify

MANIFEST = {"image": {"id": "sha256:abc"}, "profile": {"name": "smoke"}, "envs": {}}

HANGING_SUITE = """\
import os
import subprocess
import time


def test_quick():
    pass


def test_hangs():
    child = subprocess.Popen(["sleep", "300"])  # as a docker exec client the suite started would
    with open(os.environ["HANG_PID_FILE"], "w") as f:
        f.write(str(child.pid))
    time.sleep(300)
"""


@pytest.fixture
def docker(monkeypatch):
    """docker holding the image sha256:abc; started and removed containers are recorded."""
    calls: dict[str, list[str]] = {"started": [], "removed": []}
    info = {"id": "sha256:abc", "size_bytes": 1, "tags": ["ktinfra/kt:smoke"], "labels": {}, "created": "x"}
    monkeypatch.setattr(verify.dockercli, "ensure_daemon", lambda: None)
    monkeypatch.setattr(verify.dockercli, "image_info", lambda ref: info)
    monkeypatch.setattr(
        verify.dockercli, "run_detached", lambda _image, name, _args: calls["started"].append(name)
    )
    monkeypatch.setattr(verify.dockercli, "remove_container", calls["removed"].append)
    monkeypatch.setattr(verify, "wait_for_systemd", lambda name: "running")
    return calls


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_hung_suite_is_stopped_and_reported_with_its_test(tmp_path, docker, monkeypatch):
    (tmp_path / "test_hang.py").write_text(HANGING_SUITE)
    (tmp_path / "m.json").write_text(json.dumps(MANIFEST))
    monkeypatch.setenv("HANG_PID_FILE", str(tmp_path / "pid"))
    args = ["image", "verify", "ktinfra/kt:smoke", "--manifest", str(tmp_path / "m.json")]
    # 30 s: the suite's pytest must reach test_hangs first, on a CI runner whose unit lane keeps cores busy
    args += ["--suite", str(tmp_path / "test_hang.py"), "--suite-timeout", "30", "--json"]
    result = CliRunner().invoke(app, args)

    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
    doc = json.loads(result.stdout)
    (suite,) = doc["suites"]
    assert suite["timed_out"] is True and doc["passed"] is False
    # pytest's node id: the file relative to the suite run's rootdir, which depends on where the checkout
    # and the temporary folder lie (a clone in /tmp: pytest-of-root/.../test_hang.py::test_hangs)
    assert suite["running"].endswith("test_hang.py::test_hangs"), suite["running"]
    assert suite["summary"].startswith(f"timed out after 30 s in {suite['running']}")
    assert suite["summary"] in doc["summary"]
    grandchild = int((tmp_path / "pid").read_text())
    assert not _alive(grandchild), "the suite's child process outlived the stopped suite"
    assert docker["removed"] == docker["started"] and len(docker["started"]) == 1


def test_timeout_reaches_the_suite_and_its_end_is_named_on_the_terminal(tmp_path, docker, monkeypatch):
    """The terminal side (no --json): the suite's stopped run as run_suite hands it back (the real stop is
    the test above)."""
    (tmp_path / "test_hang.py").write_text(HANGING_SUITE)
    (tmp_path / "m.json").write_text(json.dumps(MANIFEST))
    limits = []

    def stopped(cmd, env, timeout_s):
        limits.append(timeout_s)
        return verify.SuiteRun(-15, "test_hang.py .", "", timed_out=True, running="test_hang.py::test_hangs")

    monkeypatch.setattr(verify, "run_suite", stopped)
    args = ["image", "verify", "ktinfra/kt:smoke", "--manifest", str(tmp_path / "m.json")]
    result = CliRunner().invoke(
        app, [*args, "--suite", str(tmp_path / "test_hang.py"), "--suite-timeout", "7"]
    )

    assert result.exit_code == 1, result.output
    assert limits == [7]
    text = " ".join(result.output.split())
    assert "test_hang.py: timed out after 7 s in test_hang.py::test_hangs; its processes were stopped" in text
    assert "testinfra failed" in text
    assert docker["removed"] == docker["started"]


@pytest.mark.parametrize("value", ["0", "-5", "abc", "86401"])
def test_bad_suite_timeout_refused_before_docker(tmp_path, monkeypatch, value):
    def no_docker(*_, **__):
        raise AssertionError("docker was called")

    for name in ("ensure_daemon", "image_info", "run_detached"):
        monkeypatch.setattr(verify.dockercli, name, no_docker)
    result = CliRunner().invoke(app, ["image", "verify", "ktinfra/kt:smoke", "--suite-timeout", value])
    # ktinfra's usage errors exit 1 (ktinfra.cli), before anything runs
    assert result.exit_code == 1 and "Invalid value for '--suite-timeout'" in result.output, result.output


@pytest.mark.parametrize("value", [0, -1, float("nan"), float("inf"), 86401])
def test_bad_suite_timeout_refused_by_the_library_too(value):
    with pytest.raises(verify.ImageError, match="suite timeout"):
        verify.verify("ktinfra/kt:smoke", suite_timeout_s=value)


def test_suite_timeout_default_is_bounded():
    assert 0 < verify.SUITE_TIMEOUT_S <= verify.MAX_SUITE_TIMEOUT_S
    assert os.environ.get("KTINFRA_VERIFY_PROGRESS") is None


@pytest.mark.parametrize(("first_timed_out", "containers"), [(True, 2), (False, 1)])
def test_suite_after_a_timed_out_one_gets_a_fresh_container(
    tmp_path, docker, monkeypatch, first_timed_out, containers
):
    """The hung check's command runs on inside the container (stopping the suite stops only its `docker exec`
    clients), so the suite after it ran beside it; now it gets a fresh container of the image."""
    for suite in ("test_a.py", "test_b.py"):
        (tmp_path / suite).write_text("def test_ok():\n    pass\n")
    (tmp_path / "m.json").write_text(json.dumps(MANIFEST))
    runs = iter([verify.SuiteRun(-15, "", "", timed_out=first_timed_out, running="test_a.py::test_ok")])

    def run_suite(cmd, env, timeout_s):
        return next(runs, verify.SuiteRun(0, "1 passed", ""))

    monkeypatch.setattr(verify, "run_suite", run_suite)
    said: list[str] = []
    suites = [tmp_path / "test_a.py", tmp_path / "test_b.py"]
    doc = verify.verify("ktinfra/kt:smoke", suites=suites, manifest=tmp_path / "m.json", on_line=said.append)

    assert [s["timed_out"] for s in doc["suites"]] == [first_timed_out, False]
    assert len(docker["started"]) == containers and docker["removed"] == docker["started"]
    fresh = "test_b.py runs in a fresh container of ktinfra/kt:smoke"
    assert (fresh in said) is first_timed_out
