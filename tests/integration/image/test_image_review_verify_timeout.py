"""Fresh-eyes review of `ktinfra image verify` against a real container (the base image, systemd as PID 1).

- A testinfra check that never returns hung verify for ever. Now the suite is stopped at --suite-timeout: its
  pytest and the `docker exec` clients testinfra started are gone, the JSON names the test it hung in and
  counts the suite failed, and the container is removed.
- A `docker run` that created the container but could not start it (an image whose entrypoint is missing)
  left the container behind: run_detached was outside verify's cleanup.
- The hung check's `sleep` ran on inside the container after its suite was stopped, beside the next suite;
  the suite after a timed-out one now runs in a fresh container of the image.
~35 s and ~2 s (make image-test); 30 s leaves the suite's pytest time to reach the hanging check
on a CI runner that runs the unit lane beside it.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ktinfra.cli import app
from ktinfra.image import dockercli, verify

BASE = "ktinfra/debian12-systemd:latest"
REPO = os.environ.get("KTINFRA_IMAGE_CI_REPO", "image-ci/kt")

SUITE = """\
def test_quick(host):
    assert host.file("/etc/os-release").exists


def test_waits_for_ever(host):
    host.run("sleep 300")
"""


@pytest.fixture
def container_names(monkeypatch) -> list[str]:
    """The names of the containers verify starts (its random suffix, recorded)."""
    names: list[str] = []
    token_hex = verify.secrets.token_hex

    def recorded(n: int) -> str:
        names.append(f"image-verify-{token_hex(n)}")
        return names[-1].removeprefix("image-verify-")

    monkeypatch.setattr(verify.secrets, "token_hex", recorded)
    yield names
    for name in names:
        dockercli.remove_container(name)


def _manifest(tmp_path: Path, image: str) -> Path:
    info = dockercli.image_info(image)
    assert info is not None, f"no {image}: run `bash scripts/docker-ready.sh`"
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps({"image": {"id": info["id"]}, "profile": {"name": "smoke"}, "envs": {}}))
    return path


def _container_exists(name: str) -> bool:
    cmd = ["docker", "ps", "-a", "-q", "--filter", f"name=^/{name}$"]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return bool(proc.stdout.strip())


def _processes_naming(word: str) -> list[str]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if any(word.encode() in a for a in args):
            found.append(b" ".join(args).decode(errors="replace"))
    return found


def test_hung_check_is_stopped_reported_and_the_container_removed(tmp_path, container_names):
    (tmp_path / "test_hang.py").write_text(SUITE)
    manifest = _manifest(tmp_path, BASE)
    args = ["image", "verify", BASE, "--manifest", str(manifest), "--suite", str(tmp_path / "test_hang.py")]
    result = CliRunner().invoke(app, [*args, "--suite-timeout", "30", "--json"])

    assert result.exit_code == 1, result.output
    doc = json.loads(result.stdout)
    (suite,) = doc["suites"]
    assert suite["timed_out"] is True and doc["passed"] is False
    # pytest's node id: the file relative to the suite run's rootdir (which depends on where the checkout and
    # the temporary folder lie: /tmp/ci-X and /tmp/pytest-of-root give pytest-of-root/.../test_hang.py)
    assert suite["running"].split("::")[0].endswith("test_hang.py"), suite["running"]
    assert suite["running"].split("::", 1)[1].startswith("test_waits_for_ever"), suite["running"]
    (name,) = container_names
    assert _processes_naming(name) == [], "pytest or docker exec outlived the stopped suite"
    assert not _container_exists(name)


AFTER_SUITE = """\
def test_no_command_of_the_stopped_suite_runs_here(host):
    running = host.check_output("cat /proc/[0-9]*/cmdline | tr '\\\\0' ' '")
    assert "sleep 300" not in running
"""


def test_suite_after_a_timed_out_one_runs_without_its_leftovers(tmp_path, container_names):
    (tmp_path / "test_hang.py").write_text(SUITE)
    (tmp_path / "test_after.py").write_text(AFTER_SUITE)
    manifest = _manifest(tmp_path, BASE)
    args = ["image", "verify", BASE, "--manifest", str(manifest), "--suite-timeout", "30", "--json"]
    args += ["--suite", str(tmp_path / "test_hang.py"), "--suite", str(tmp_path / "test_after.py")]
    result = CliRunner().invoke(app, args)

    assert result.exit_code == 1, result.output
    hung, after = json.loads(result.stdout)["suites"]
    assert hung["timed_out"] is True
    assert after["rc"] == 0 and not after["timed_out"], after
    (name,) = set(container_names)
    assert not _container_exists(name)


def test_container_that_cannot_start_is_removed(tmp_path, container_names):
    image = f"{REPO}:verify-no-start"
    dockerfile = f'FROM {BASE}\nENTRYPOINT ["/no/such/init"]\n'
    subprocess.run(["docker", "build", "-q", "-t", image, "-"], input=dockerfile, text=True, check=True)
    try:
        manifest = _manifest(tmp_path, image)
        result = CliRunner().invoke(app, ["image", "verify", image, "--manifest", str(manifest), "--json"])
        assert result.exit_code == 1 and "docker run failed" in result.output, result.output
        (name,) = container_names
        assert not _container_exists(name), f"verify left the container {name} it could not start"
    finally:
        subprocess.run(["docker", "image", "rm", "-f", image], capture_output=True)
