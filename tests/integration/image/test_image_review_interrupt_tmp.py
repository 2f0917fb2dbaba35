"""Fresh-eyes review: an interrupted image build left packer's temporary files, an SSH private key among them.

Packer's ansible provisioner writes its inventory (packer-provisioner-ansible*) and the private key of its SSH
proxy (ansible-key*) to the temporary directory and removes them only when it returns normally; on a Ctrl-C
during the play they stayed in /tmp (six pairs had gathered on the review machine). ktinfra now gives packer
a TMPDIR of its own (ktinfra-packer-* in the caller's temporary directory; not in the stage, whose path can
be too long for packer's plugin sockets) and removes it when the build ends, however it ends. Takes ~15 s:
docker + packer, the minimal play (make image-test).
"""

from __future__ import annotations

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


def test_interrupted_build_leaves_no_packer_temp_files(tmp_path):
    # short: packer's plugin sockets live in TMPDIR, and a unix socket path holds at most 107 bytes
    tmp = Path(tempfile.mkdtemp(prefix="ktr-", dir="/tmp"))
    try:
        _interrupt_and_check(tmp, tmp_path / "out")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _interrupt_and_check(tmp: Path, out: Path) -> None:
    cmd = [
        *(sys.executable, "-m", "ktinfra", "image", "build"),
        *("--profile", str(HERE / "smoke-profile.yaml"), "--playbook", str(HERE / "smoke-play.yml")),
        *("--repository", REPO, "--tag", "review-interrupt-tmp", "--out", str(out)),
    ]
    proc = subprocess.Popen(
        cmd,
        cwd=REPO_ROOT,
        env=dict(os.environ, TMPDIR=str(tmp)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    log = out / "smoke-docker.partial" / "build.log"
    deadline = time.monotonic() + 240
    try:
        while time.monotonic() < deadline and not (log.exists() and "TASK [" in log.read_text()):
            time.sleep(0.5)
        assert proc.poll() is None, "the build ended before ansible started"
        proc.send_signal(signal.SIGINT)  # Ctrl-C while the play runs: the provisioner's files exist now
        assert proc.wait(timeout=180) != 0
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=180)
    assert sorted(os.listdir(tmp)) == []
    assert sorted(p.name for p in out.iterdir()) == ["last-failed.log"]
    assert dockercli.image_info(f"{REPO}:review-interrupt-tmp") is None
