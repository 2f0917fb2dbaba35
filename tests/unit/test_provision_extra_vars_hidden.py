"""A run's artifacts kept the -e values in clear text.

ansible-runner writes ansible-playbook's command line into the run's `command` file, and ktinfra keeps the
artifacts of the last 50 runs: `-e hf_token=...` (or a password given as JSON) lay on disk under
~/.local/state/ktinfra/runs, though the environment's values were already hidden there. The values of each -e
are now hidden as the environment's are; the variable names stay, and an `-e @FILE` keeps its path (the file
is the user's own). A real run of the CLI: the play checks that Ansible still got every value.
"""

from __future__ import annotations

import json
from pathlib import Path

import test_provision_review5_prompts as prompts

PLAY = """
- hosts: all
  gather_facts: false
  tasks:
    - name: Check the values Ansible got
      ansible.builtin.assert:
        that:
          - hf_token == 'hf_kv-' ~ '4711'
          - model == 'm1'
          - db_pass == 'json-' ~ '4711'
          - file_secret == 'file-' ~ '4711'
        quiet: true
"""


def test_the_command_file_hides_the_extra_vars_values(tmp_path: Path) -> None:
    site = prompts.make_site(tmp_path, PLAY)
    (site / "vars.json").write_text('{"file_secret": "file-4711"}')
    args = ["-e", "hf_token=hf_kv-4711 model=m1", "-e", '{"db_pass": "json-4711"}', "-e", "@vars.json"]
    result = prompts.provision(site, prompts.clean_env(), *args, "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    run = Path(json.loads(result.stdout)["artifacts"])
    leaked = [str(p) for p in run.rglob("*") if p.is_file() and "4711" in p.read_text(errors="replace")]
    assert leaked == []
    command = json.loads((run / "command").read_text())["command"]
    hidden = "(hidden by ktinfra)"
    assert command[1:7] == [
        "-e", f"hf_token={hidden} model={hidden}",
        "-e", json.dumps({"db_pass": hidden}),
        "-e", f"@{site / 'vars.json'}",
    ]  # fmt: skip
