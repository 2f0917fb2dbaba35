"""Fresh-eyes review: `ktinfra image verify` stopped by SIGTERM (CI's stop; scripts/test-lanes.sh sends it to
each lane's process group) died on the spot: its container stayed, and so did the suite's pytest with the
`docker exec` client it was waiting on. Now SIGTERM unwinds as Ctrl-C does: the suite's process group is
stopped, the container removed, exit 143 (Ctrl-C: the same cleanup). A real verify in its own process against
the base image, stopped while a testinfra check runs `sleep 300`. ~15 s each (make image-test).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from test_image_review_verify_timeout import _processes_naming

from ktinfra.image import REPO_ROOT, dockercli

BASE = "ktinfra/debian12-systemd:latest"
REPO = os.environ.get("KTINFRA_IMAGE_CI_REPO", "image-ci/kt")

SUITE = """\
def test_waits_for_ever(host):
    host.run("sleep 300")
"""


def _docker(*args: str) -> str:
    return subprocess.run(["docker", *args], capture_output=True, text=True, check=True).stdout


@pytest.fixture
def image(tmp_path, request):
    """The base image under a tag of this test's own. Docker's ancestor filter matches the image, whatever
    the tag: every container of the shared base image (other tests' and molecule's, running beside this one
    in CI's lanes) matches it too, so only verify's own containers (image-verify-*) are removed."""
    tag = f"{REPO}:verify-stop-{os.getpid()}"
    _docker("tag", BASE, tag)
    yield tag
    mine = ("--filter", f"ancestor={tag}", "--filter", "name=^/image-verify-")
    for cid in _docker("ps", "-a", "-q", *mine).split():
        _docker("rm", "-f", "-v", cid)
    _docker("image", "rm", tag)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_stopped_verify_removes_its_container_and_stops_the_suite(tmp_path, image, signum):
    info = dockercli.image_info(image)
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({"image": {"id": info["id"]}, "profile": {"name": "smoke"}, "envs": {}}))
    (tmp_path / "test_hang.py").write_text(SUITE)
    cmd = [sys.executable, "-m", "ktinfra", "image", "verify", image, "--manifest", str(manifest)]
    cmd += ["--suite", str(tmp_path / "test_hang.py"), "--suite-timeout", "300", "--json"]
    proc = subprocess.Popen(
        cmd,
        cwd=REPO_ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # as in a terminal
    )
    try:
        name, deadline = "", time.monotonic() + 45
        while time.monotonic() < deadline and not (name and _hung_exec(name)):
            # verify's own container: other tests start containers of the same base image at the same time
            mine = ("--filter", f"ancestor={image}", "--filter", "name=^/image-verify-")
            name = _docker("ps", *mine, "--format", "{{.Names}}").strip()
            time.sleep(0.5)
        assert name and _hung_exec(name), "the suite did not reach its hanging check"
        proc.send_signal(signum)
        rc = proc.wait(timeout=40)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not _docker("ps", "-a", "-q", "--filter", f"name=^/{name}$").strip(), "the container was left"
    deadline = time.monotonic() + 10  # SIGKILLed members are reaped by init, not by verify
    while time.monotonic() < deadline and _processes_naming(name):
        time.sleep(0.5)
    assert _processes_naming(name) == [], "pytest or docker exec outlived the stopped verify"
    assert rc == 128 + signum


def _hung_exec(name: str) -> bool:
    return any("sleep 300" in p and "docker" in p for p in _processes_naming(name))
