"""Review 6: `ktinfra image build` stopped by SIGTERM (CI's stop; scripts/test-lanes.sh signals each lane's
process group) died on the spot. Packer runs in a session of its own, which that signal does not reach, so
it went on building; the .partial stage and packer's TMPDIR (ktinfra-packer-*, the ansible provisioner's
SSH private key) were left. SIGTERM now unwinds as Ctrl-C does: packer's process group is stopped, the
stage and the TMPDIR removed, exit 143. Real packer and docker, the minimal play (~20 s, make image-test).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ktinfra.image import REPO_ROOT, dockercli

HERE = Path(__file__).parent
REPO = os.environ.get("KTINFRA_IMAGE_CI_REPO", "image-ci/kt")
TAG = "review6-build-stop"


def _processes_with_tmpdir_in(tmp: Path) -> list[int]:
    """Pids whose TMPDIR lies in `tmp`: packer and its plugins (ktinfra sets TMPDIR=ktinfra-packer-*)."""
    mark = f"TMPDIR={tmp}/".encode()
    pids = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and proc.name != str(os.getpid()):
            with contextlib.suppress(OSError):
                if mark in (proc / "environ").read_bytes():
                    pids.append(int(proc.name))
    return pids


def _stop_orphans(tmp: Path) -> None:
    """What the old code left running: packer gets a Ctrl-C (its group), as a user would give it."""
    for pid in _processes_with_tmpdir_in(tmp):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(os.getpgid(pid), signal.SIGINT)
    deadline = time.monotonic() + 120
    while _processes_with_tmpdir_in(tmp) and time.monotonic() < deadline:
        time.sleep(1)


def test_sigterm_stops_packer_and_removes_stage_and_temp_files(tmp_path):
    # short: packer's plugin sockets live in TMPDIR, and a unix socket path holds at most 107 bytes
    tmp = Path(tempfile.mkdtemp(prefix="ktr6-", dir="/tmp"))
    out = tmp_path / "out"
    cmd = [
        *(sys.executable, "-m", "ktinfra", "image", "build"),
        *("--profile", str(HERE / "smoke-profile.yaml"), "--playbook", str(HERE / "smoke-play.yml")),
        *("--repository", REPO, "--tag", TAG, "--out", str(out)),
    ]
    proc = subprocess.Popen(
        cmd,
        cwd=REPO_ROOT,
        env=dict(os.environ, TMPDIR=str(tmp)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    log = out / "smoke-docker.partial" / "build.log"
    variables = out / "smoke-docker.partial" / "variables.pkrvars.json"
    container = None
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and not (log.exists() and "TASK [" in log.read_text()):
            time.sleep(0.5)
        assert proc.poll() is None, "the build ended before ansible started"
        assert _processes_with_tmpdir_in(tmp), "packer is not running"
        container = json.loads(variables.read_text())["docker_container_name"]
        proc.send_signal(signal.SIGTERM)  # while the play runs: the provisioner's key is in TMPDIR now
        rc = proc.wait(timeout=180)
        stderr = proc.stderr.read().decode(errors="replace")
        assert rc == 128 + signal.SIGTERM, stderr[-2000:]
        assert _processes_with_tmpdir_in(tmp) == [], "packer went on building"
        assert sorted(os.listdir(tmp)) == []
        assert sorted(p.name for p in out.iterdir()) == ["last-failed.log"]
        assert dockercli.image_info(f"{REPO}:{TAG}") is None
        assert (
            subprocess.run(["docker", "container", "inspect", container], capture_output=True).returncode == 1
        )
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        _stop_orphans(tmp)
        if container:  # what an orphaned packer left (the old code)
            subprocess.run(["docker", "rm", "-f", "-v", container], capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)
        if dockercli.image_info(f"{REPO}:{TAG}") is not None:
            subprocess.run(["docker", "rmi", "-f", f"{REPO}:{TAG}"], capture_output=True)
