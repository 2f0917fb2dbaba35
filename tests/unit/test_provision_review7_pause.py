"""`ktinfra provision` of a playbook with a `pause` that has no seconds or minutes.

Such a pause waits for Enter. ansible-playbook skips the wait where stdin is no terminal, but ansible-runner
gives it one that nobody types into: the run hung at the prompt for ever. An untimed pause is a person's
go-ahead (e.g. before a reboot), so it is not skipped: one that would run (in the play, a block, a handler, a
role, an imported or included task file; --tags/--skip-tags applied) is refused before anything runs, naming
the task and its file. One a `when` guards is left to the run, which stops at its prompt and says why. Real
runs of the CLI are killed after prompts.TIMEOUT seconds (on the old code they hang there).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import test_provision_review5_prompts as prompts

from ktinfra.provision import ProvisionError, ProvisionRequest

ROLE_GATE = "- name: Confirm in the role\n  ansible.builtin.pause: 'prompt=Go on?'\n"


def play(tasks: str, extra: str = "") -> str:
    return f"- hosts: all\n  gather_facts: false\n{extra}  tasks:\n{tasks}"


def provision(site: Path, *args: str) -> subprocess.CompletedProcess:
    return prompts.provision(site, prompts.clean_env(), "--json", *args)


def request(site: Path, **options: str) -> ProvisionRequest:
    return ProvisionRequest(site / "play.yml", site / "hosts", artifacts=site / "runs", **options)


def test_an_untimed_pause_in_a_role_is_refused_before_anything_runs(tmp_path: Path) -> None:
    site = prompts.make_site(
        tmp_path, play("    - ansible.builtin.file: {path: made, state: touch}\n", "  roles: [gate]\n")
    )
    (site / "roles" / "gate" / "tasks").mkdir(parents=True)
    (site / "roles" / "gate" / "tasks" / "main.yml").write_text(ROLE_GATE)
    result = provision(site)
    assert result.returncode == 1, result.stderr
    assert result.stdout == ""
    assert result.stderr.startswith(
        "error: task 'Confirm in the role' (ansible.builtin.pause) in roles/gate/tasks/main.yml waits for "
        "someone to press Enter (a pause without seconds or minutes)"
    ), result.stderr
    assert not (site / "runs").exists() and not (site / "made").exists()  # nothing ran


def test_a_pause_a_when_guards_stops_the_run_at_its_prompt(tmp_path: Path) -> None:
    gate = "    - name: Confirm\n      pause: {prompt: Reboot now?}\n      when: true\n"
    site = prompts.make_site(
        tmp_path, play(f"{gate}    - ansible.builtin.file: {{path: made, state: touch}}\n")
    )
    result = provision(site)
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    assert report["ok"] is False
    assert report["errors"] == [
        "play.yml: task 'Confirm' waits for someone to press Enter (a pause without seconds or minutes), "
        "which ktinfra provision cannot do: give it seconds or minutes, or leave it out with --skip-tags TAG "
        "(a tag it has, or one to give it)"
    ]
    assert not (site / "made").exists()  # the tasks after it did not run


def test_timed_skipped_and_untagged_pauses_still_run(tmp_path: Path) -> None:
    tasks = (
        "    - {name: Timed, ansible.builtin.pause: {seconds: 1, prompt: Waiting}}\n"
        "    - {name: Never asked, ansible.builtin.pause: {}, when: false}\n"
        "    - {name: Gate, ansible.builtin.pause: {}, tags: [gate]}\n"
    )
    site = prompts.make_site(tmp_path, play(tasks))
    result = provision(site, "--skip-tags", "gate")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["hosts"]["localhost"]["ok"] == 1


@pytest.mark.parametrize(
    ("files", "named"),
    [
        ({"play.yml": play("    - pause:\n")}, "task 'pause' (pause) in play.yml"),
        ({"play.yml": play("    - action: pause prompt=Go\n")}, "task 'pause' (pause) in play.yml"),
        (
            {
                "play.yml": play(
                    "    - {name: Wait, local_action: {module: ansible.legacy.pause, echo: false}}\n"
                )
            },
            "task 'Wait' (ansible.legacy.pause) in play.yml",
        ),
        (
            {
                "play.yml": play(
                    "    - block:\n        - {name: In a block, ansible.builtin.pause: {minutes: null}}\n"
                )
            },
            "task 'In a block' (ansible.builtin.pause) in play.yml",
        ),
        (
            {
                "play.yml": play(
                    "    - {debug: {msg: hi}, notify: wait}\n", "  handlers:\n    - {name: wait, pause: {}}\n"
                )
            },
            "task 'wait' (pause) in play.yml",
        ),
        (
            {
                "play.yml": play("    - import_tasks: more/gate.yml\n"),
                "more/gate.yml": "- {name: Go, pause: {prompt: x}}\n",
            },
            "task 'Go' (pause) in more/gate.yml",
        ),
        (
            {
                "play.yml": play("    - ansible.builtin.include_tasks: {file: gate.yml}\n"),
                "gate.yml": "- pause: prompt=x\n",
            },
            "task 'pause' (pause) in gate.yml",
        ),
        (
            {
                "play.yml": "- import_playbook: inner.yml\n",
                "inner.yml": play("    - {name: Inner, pause: {}}\n"),
            },
            "task 'Inner' (pause) in inner.yml",
        ),
        (
            {
                "play.yml": play("    - include_role: {name: outer, tasks_from: gate}\n"),
                "roles/outer/tasks/gate.yml": "- {name: From, pause: {}}\n",
            },
            "task 'From' (pause) in roles/outer/tasks/gate.yml",
        ),
        (
            {
                "play.yml": play("    - import_role: {name: outer}\n"),
                "roles/outer/meta/main.yml": "dependencies: [inner]\n",
                "roles/outer/tasks/main.yml": "- debug: {msg: hi}\n",
                "roles/inner/handlers/main.yml": "- {name: Dep, pause: {}}\n",
            },
            "task 'Dep' (pause) in roles/inner/handlers/main.yml",
        ),
    ],
    ids=[
        "bare",
        "action-string",
        "local_action-legacy",
        "block",
        "handler",
        "import_tasks",
        "include_tasks",
        "import_playbook",
        "include_role-tasks_from",
        "role-dependency-handler",
    ],  # fmt: skip
)
def test_an_untimed_pause_is_found_wherever_it_runs(tmp_path, monkeypatch, files, named) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "hosts").write_text("localhost\n")
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    with pytest.raises(ProvisionError, match="waits for someone to press Enter") as raised:
        request(tmp_path).validate()
    assert str(raised.value).startswith(f"{named} waits"), raised.value


@pytest.mark.parametrize(
    ("tasks", "options"),
    [
        ("    - {pause: {seconds: 3}}\n    - {pause: 'minutes=1 prompt=x'}\n", {}),
        ("    - {pause: {}, when: ask}\n    - {pause: {}, tags: [never]}\n", {}),
        ("    - {pause: {}, tags: [gate]}\n    - {debug: {msg: x}, tags: [work]}\n", {"tags": "work"}),
        ("    - block:\n        - {pause: {}}\n      tags: gate\n", {"skip_tags": "gate"}),
        ("    - include_tasks: {file: '{{ which }}.yml'}\n", {}),
    ],
    ids=["timed", "conditional-or-never", "not-in-tags", "skipped-block", "templated-include"],
)
def test_pauses_that_do_not_wait_or_do_not_run_pass(tmp_path, tasks, options) -> None:
    (tmp_path / "hosts").write_text("localhost\n")
    (tmp_path / "play.yml").write_text(play(tasks))
    request(tmp_path, **options).validate()
