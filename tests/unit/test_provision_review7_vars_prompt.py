"""`ktinfra provision` of a playbook whose second play has a vars_prompt no -e gives.

The run stopped at the prompt (playbook_on_vars_prompt) only when ansible-playbook reached it: the first
play had already run and changed the host. A vars_prompt variable that no -e gives (key=value, JSON/YAML or
@FILE) is now refused before anything runs, naming the variable and the playbook file that prompts for it. A
name Jinja makes is left to the run, which stops at the prompt as before.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import test_provision_review5_prompts as prompts

from ktinfra.provision import ProvisionError, ProvisionRequest

FIRST = (
    "- hosts: all\n  gather_facts: false\n  tasks:\n    - ansible.builtin.file: {path: made, state: touch}\n"
)
SECOND = """- hosts: all
  gather_facts: false
  vars_prompt:
    - {name: api_key, prompt: API key}
  tasks:
    - ansible.builtin.debug: {msg: "{{ api_key }}"}
"""


def provision(site: Path, *args: str) -> subprocess.CompletedProcess:
    return prompts.provision(site, prompts.clean_env(), "--json", *args)


def test_a_later_plays_vars_prompt_is_refused_before_the_first_play_runs(tmp_path: Path) -> None:
    site = prompts.make_site(tmp_path, FIRST + SECOND)
    result = provision(site)
    assert result.returncode == 1, result.stderr
    assert result.stdout == ""
    assert result.stderr == (
        "error: play.yml prompts for api_key (vars_prompt), which ktinfra provision cannot answer: give it "
        "with -e api_key=VALUE\n"
    )
    assert not (site / "made").exists() and not (site / "runs").exists()  # nothing ran


def test_a_templated_vars_prompt_name_still_stops_the_run_at_its_prompt(tmp_path: Path) -> None:
    site = prompts.make_site(tmp_path, SECOND.replace("name: api_key", "name: \"{{ 'api_' + 'key' }}\""))
    result = provision(site)
    assert result.returncode == 1, result.stderr
    assert json.loads(result.stdout)["errors"][0].startswith("play.yml prompts for api_key (vars_prompt)")


@pytest.mark.parametrize(
    "given",
    [["-e", "api_key=abc"], ["-e", '{"api_key": "abc"}'], ["-e", "@vars.yml"], ["-e", "a=1 api_key=x"]],
    ids=["key-value", "json", "file", "pairs"],
)
def test_a_vars_prompt_given_with_extra_vars_is_not_refused(tmp_path, monkeypatch, given) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "hosts").write_text("localhost\n")
    (tmp_path / "vars.yml").write_text("api_key: abc\n")
    (tmp_path / "play.yml").write_text(FIRST + SECOND)
    ProvisionRequest(Path("play.yml"), Path("hosts"), extra_vars=given[1:], artifacts=Path("runs")).validate()


def test_a_vars_prompt_in_an_imported_playbook_names_that_file(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "hosts").write_text("localhost\n")
    (tmp_path / "plays").mkdir()
    (tmp_path / "plays" / "inner.yml").write_text(SECOND)
    (tmp_path / "play.yml").write_text(FIRST + "- ansible.builtin.import_playbook: plays/inner.yml\n")
    with pytest.raises(ProvisionError, match=r"^plays/inner.yml prompts for api_key \(vars_prompt\)"):
        ProvisionRequest(Path("play.yml"), Path("hosts"), artifacts=Path("runs")).validate()
