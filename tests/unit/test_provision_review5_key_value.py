"""`ktinfra provision -e key=value` that Ansible cannot split, or splits into words that are no pair.

Ansible splits key=value extra vars at spaces, with quotes and Jinja blocks kept together (parse_kv).
- An unbalanced quote or Jinja block (`-e "owner=it's"`, `-e 'k={{ x'`): Ansible refused it, but while
  parsing the inventory, so the report's first error was "inventory hosts: Ansible could not parse it",
  followed by two plugin failures and "No inventory was parsed"; the inventory was fine.
- A value with a space (`-e 'api_key=my secret'`): Ansible set api_key to "my" and a variable _raw_params to
  "secret", and the run went on with the cut value (exit 0).
Both are now refused before ansible-playbook starts, naming the value. Quoted values still pass whole.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ktinfra.cli import app

PLAY = """
- hosts: all
  gather_facts: false
  tasks:
    - name: Show the value
      ansible.builtin.debug: {msg: "api_key=[{{ api_key }}]"}
"""


@pytest.fixture()
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "play.yml").write_text(PLAY)
    python = shutil.which("python3")
    (tmp_path / "hosts").write_text(
        f"localhost ansible_connection=local ansible_python_interpreter={python}\n"
    )
    monkeypatch.chdir(tmp_path)
    return tmp_path


def provision(*extra: str):
    args = ["provision", "play.yml", "-i", "hosts", "--artifacts", "runs", "--json"]
    for value in extra:
        args += ["-e", value]
    return CliRunner().invoke(app, args)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("api_key=it's", '-e "api_key=it\'s": Ansible cannot split it into key=value pairs: failed at'),
        ("api_key={{ x", "-e 'api_key={{ x': Ansible cannot split it into key=value pairs: failed at"),
        ("api_key=my secret", "-e 'api_key=my secret': 'secret' is no key=value pair (Ansible would drop"),
    ],
    ids=["quote", "jinja", "space"],
)
def test_key_value_ansible_would_refuse_or_cut_is_refused_before_it_runs(site: Path, value, message) -> None:
    result = provision(value)
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.startswith(f"error: {message}") and result.stderr.count("\n") == 1, result.stderr
    assert "inventory" not in result.stderr
    assert not (site / "runs").exists()


@pytest.mark.parametrize(
    ("value", "shown"),
    [('api_key="my secret"', "my secret"), ("api_key=p@ss:w%rd! other=1", "p@ss:w%rd!")],
    ids=["quoted-space", "two-pairs"],
)
def test_key_value_ansible_can_split_still_runs(site: Path, value: str, shown: str) -> None:
    result = provision(value)
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["ok"] is True
    stdout = next((site / "runs" / "artifacts").glob("*/stdout")).read_text()
    assert f"api_key=[{shown}]" in stdout
