"""Ctrl-C on `ktinfra provision` after ansible-playbook has finished with 0, before the report.

The run is complete (every task ran, the recap is in, the exit status is 0), so the report said ok and exit 0
but status "canceled", which the README keeps for runs that were stopped. The status is now the run's own.
A real run of a one-task local playbook; the Ctrl-C is a real SIGINT to this process, sent once the recap has
come and the ansible-playbook process has exited.
"""

from __future__ import annotations

import os
import shutil
import signal
import time

from ktinfra import provision

PLAY = """
- hosts: all
  gather_facts: false
  tasks:
    - name: Say something
      ansible.builtin.debug: {msg: hi}
"""


def test_a_ctrl_c_after_a_successful_playbook_does_not_make_it_canceled(tmp_path, monkeypatch):
    (tmp_path / "play.yml").write_text(PLAY)
    (tmp_path / "hosts").write_text(
        f"localhost ansible_connection=local ansible_python_interpreter={shutil.which('python3')}\n"
    )
    monkeypatch.chdir(tmp_path)
    sent = []

    def after_the_recap(state: provision.RunState) -> None:
        if state.recap_seen and not sent:
            deadline = time.monotonic() + 30
            while provision.Interrupt._playbook_pids() and time.monotonic() < deadline:
                time.sleep(0.05)
            sent.append(provision.Interrupt._playbook_pids())
            os.kill(os.getpid(), signal.SIGINT)

    request = provision.ProvisionRequest(
        playbook=tmp_path / "play.yml", inventory=tmp_path / "hosts", artifacts=tmp_path / "runs"
    )
    report = provision.run(request, on_event=after_the_recap)
    assert sent == [[]], sent  # the SIGINT came, after ansible-playbook had exited
    assert report["rc"] == 0 and report["ok"], report
    assert report["status"] == "successful", report
    assert provision.exit_code(report) == 0
