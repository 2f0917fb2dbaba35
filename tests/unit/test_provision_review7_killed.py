"""Ctrl-C on `ktinfra provision` where ansible-playbook does not stop at SIGINT and SIGTERM ends it.

A timed pause catches Ctrl-C and asks "Press 'C' to continue the play or 'A' to abort" on ansible-runner's
terminal, which nobody types into; the SIGTERM 5 s later ends ansible-playbook by a signal, with no exit code.
The report said "ansible-playbook exited None (canceled)". A real run of the CLI, interrupted at the pause.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import test_provision_review5_prompts as prompts

PLAY = """
- hosts: all
  gather_facts: false
  tasks:
    - name: Let the service settle
      ansible.builtin.pause: {seconds: 120}
"""


def test_a_run_ended_by_a_signal_says_so(tmp_path: Path) -> None:
    site = prompts.make_site(tmp_path, PLAY)
    command = [sys.executable, "-m", "ktinfra", "provision", "play.yml", "-i", "hosts", "--artifacts", "runs"]
    process = subprocess.Popen(
        [*command, "--json"], cwd=site, env=prompts.clean_env(), text=True, start_new_session=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not any("Pausing for" in p.read_text() for p in site.glob("runs/artifacts/*/stdout")):
            assert time.monotonic() < deadline and process.poll() is None, "the pause never started"
            time.sleep(0.2)
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
    assert process.returncode == 1, stderr
    report = json.loads(stdout)
    assert report["status"] == "canceled" and report["rc"] is None
    assert len(report["errors"]) == 1
    assert report["errors"][0].startswith(
        "ansible-playbook was ended by a signal (canceled) before it exited"
    ), report["errors"]
    assert "None" not in stderr, stderr
