"""A run's artifacts kept the controller's whole environment.

ansible-runner writes the environment ansible-playbook runs with into the run's `command` file, and ktinfra
keeps the artifacts of the last 50 runs: an HF_TOKEN (or any key exported in the shell) lay on disk under
~/.local/state/ktinfra/runs. Values other than Ansible's settings and paths are now hidden; every name stays,
and the file stays readable by its owner only. A real run of the CLI.
"""

from __future__ import annotations

import json
import stat
from pathlib import Path

import test_provision_review5_prompts as prompts


def test_the_command_file_hides_the_environments_values(tmp_path: Path) -> None:
    site = prompts.make_site(tmp_path, prompts.PLAY)
    env = prompts.clean_env()
    env.update(HF_TOKEN="hf_not-a-real-token-4711", MY_SETTING="plain-4711", ANSIBLE_FORKS="3")
    result = prompts.provision(site, env, "--json")
    assert result.returncode == 0, result.stderr
    run = Path(json.loads(result.stdout)["artifacts"])
    leaked = [str(p) for p in run.rglob("*") if p.is_file() and "4711" in p.read_text(errors="replace")]
    assert leaked == []
    command = json.loads((run / "command").read_text())
    assert command["env"]["HF_TOKEN"] == command["env"]["MY_SETTING"] == "(hidden by ktinfra)"
    assert command["env"]["ANSIBLE_FORKS"] == "3"  # Ansible's settings and paths stay, for post-mortems
    assert command["env"]["PATH"].endswith(env["PATH"])
    assert command["command"][0] == "ansible-playbook"
    assert stat.S_IMODE((run / "command").stat().st_mode) == 0o600
    assert not list(run.glob(".command*"))
