"""`ktinfra provision` takes ansible-playbook's arguments as ansible-playbook does (real runs, localhost).

Before: a second -i or --tags silently replaced the first (ansible-playbook merges them, so the run covered
fewer hosts or tasks and still said ok); `-e @~/vars.yml` (Ansible expands the ~) was "does not exist"; an
ansible-vault file, an inline `!vault` value or an `!unsafe` one (Ansible's own YAML tags) was refused as
not YAML/not a mapping; without ansible-runner installed, a ModuleNotFoundError traceback.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_provision_driver import CHECK_PLAYBOOK
from typer.testing import CliRunner

from ktinfra.cli import app

PYTHON = shutil.which("python3")
PLAY = """
- name: Both tags and the vars
  hosts: all
  gather_facts: false
  tasks:
    - name: Tagged a
      ansible.builtin.debug:
        msg: a
      tags: [a]
    - name: Tagged b
      ansible.builtin.debug:
        msg: b
      tags: [b]
    - name: Show the vars
      ansible.builtin.debug:
        msg: "key={{ api_key | default('unset') }} raw={{ raw | default('unset') }}"
      tags: [vars]
"""


def provision(tmp_path: Path, *args: str) -> tuple[int, str, dict]:
    base = ["provision", str(tmp_path / "play.yml"), "--artifacts", str(tmp_path / "runs"), "--json"]
    result = CliRunner().invoke(app, [*base, *args])
    assert "Traceback" not in result.output, result.output
    return result.exit_code, result.stderr, json.loads(result.stdout) if result.stdout else {}


def messages(report: dict) -> list[str]:
    """The debug messages of the run, from its job events."""
    found = []
    for path in sorted((Path(report["artifacts"]) / "job_events").glob("*.json")):
        event = json.loads(path.read_text())
        if event.get("event") == "runner_on_ok":
            found.append(event["event_data"]["res"].get("msg"))
    return found


@pytest.fixture()
def site(tmp_path: Path) -> Path:
    (tmp_path / "play.yml").write_text(PLAY)
    (tmp_path / "one").write_text(f"alpha ansible_connection=local ansible_python_interpreter={PYTHON}\n")
    (tmp_path / "two").write_text(f"beta ansible_connection=local ansible_python_interpreter={PYTHON}\n")
    return tmp_path


def test_every_inventory_given_is_used(site: Path) -> None:
    code, _, report = provision(site, "-i", str(site / "one"), "-i", str(site / "two"), "--tags", "a")
    assert code == 0, report
    assert sorted(report["hosts"]) == ["alpha", "beta"]  # before: beta only
    assert report["inventory"] == [str(site / "one"), str(site / "two")]
    command = json.loads((Path(report["artifacts"]) / "command").read_text())["command"]
    assert command.count("-i") == 2


def test_one_inventory_is_reported_as_before(site: Path) -> None:
    code, _, report = provision(site, "-i", str(site / "one"), "--tags", "a")
    assert code == 0 and report["inventory"] == str(site / "one") and list(report["hosts"]) == ["alpha"]


def test_a_missing_one_of_several_inventories_is_refused(site: Path) -> None:
    code, stderr, report = provision(site, "-i", str(site / "one"), "-i", str(site / "nope"))
    assert code == 1 and report == {}
    assert stderr == f"error: inventory {site / 'nope'} does not exist\n"
    assert not (site / "runs").exists()


def test_every_tags_option_given_is_used(site: Path) -> None:
    code, _, report = provision(site, "-i", str(site / "one"), "--tags", "a", "-t", "b")
    assert code == 0 and report["tags"] == "a,b"
    assert messages(report) == ["a", "b"]  # before: b only
    assert report["hosts"]["alpha"]["ok"] == 2


def test_an_empty_one_of_several_tags_is_refused(site: Path) -> None:
    code, stderr, _ = provision(site, "-i", str(site / "one"), "--tags", "a", "--tags", " ")
    assert code == 1 and stderr == "error: --tags is empty\n"


def test_extra_vars_file_under_home(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = site / "home"
    home.mkdir()
    (home / "vars.yml").write_text("api_key: from-home\n")
    monkeypatch.setenv("HOME", str(home))
    code, stderr, report = provision(site, "-i", str(site / "one"), "-t", "vars", "-e", "@~/vars.yml")
    assert code == 0, stderr
    assert messages(report) == ["key=from-home raw=unset"]


def vault(site: Path, *args: str) -> str:
    exe = Path(sys.executable).parent / "ansible-vault"
    password = ["--vault-password-file", str(site / "vault-pass")]
    done = subprocess.run([str(exe), *args, *password], capture_output=True, text=True, check=True)
    return done.stdout


def _vaulted_vars(site: Path, form: str) -> None:
    """vars.yml with api_key=sekrit, vaulted whole ("vault file") or as one !vault value."""
    (site / "vault-pass").write_text("correct horse\n")
    if form == "vault file":
        (site / "vars.yml").write_text("api_key: sekrit\n")
        vault(site, "encrypt", str(site / "vars.yml"))
    else:
        (site / "vars.yml").write_text(vault(site, "encrypt_string", "sekrit", "--name", "api_key"))


@pytest.mark.parametrize("form", ["vault file", "inline !vault", "!unsafe"])
def test_extra_vars_with_ansibles_own_yaml_are_passed_on(
    site: Path, monkeypatch: pytest.MonkeyPatch, form: str
) -> None:
    if form == "!unsafe":
        (site / "vault-pass").write_text("correct horse\n")
        (site / "vars.yml").write_text('raw: !unsafe "{{ not templated }}"\n')
        expected = "key=unset raw={{ not templated }}"
    else:
        _vaulted_vars(site, form)
        text = (site / "vars.yml").read_text()
        assert text.startswith("$ANSIBLE_VAULT;") if form == "vault file" else "!vault" in text
        expected = "key=sekrit raw=unset"
    monkeypatch.setenv("ANSIBLE_VAULT_PASSWORD_FILE", str(site / "vault-pass"))
    code, stderr, report = provision(
        site, "-i", str(site / "one"), "-t", "vars", "-e", f"@{site / 'vars.yml'}"
    )
    assert code == 0, stderr
    assert messages(report) == [expected]


def test_inline_extra_vars_with_a_tag_still_must_be_a_mapping(site: Path) -> None:
    code, stderr, _ = provision(site, "-i", str(site / "one"), "-e", '[!unsafe "x"]')
    assert code == 1 and "must hold a mapping of variables, not a list" in stderr


def test_without_ansible_runner_a_clear_error(site: Path) -> None:
    """The base install (no ktinfra[ops]): one error line naming the extra, no traceback."""
    code = (
        "import sys; sys.modules['ansible_runner'] = None\n"
        "from ktinfra.cli import app\n"
        f"app(['provision', {str(site / 'play.yml')!r}, '-i', {str(site / 'one')!r},"
        f" '--artifacts', {str(site / 'runs')!r}])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"}
    )
    assert done.returncode == 1 and done.stdout == ""
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        "error: ansible-runner is not installed: pip install 'ktinfra[ops]'"
    )


@pytest.mark.parametrize("layout", ["playbook alone", "checkout"])
def test_an_unreadable_ansible_cfg_is_named(site: Path, monkeypatch: pytest.MonkeyPatch, layout: str) -> None:
    """ansible-playbook's early 'ERROR: Error reading config file' (before its display exists): before, only
    "ansible-playbook exited 5 (failed) with no failed host; its output: .../stdout", and from a checkout
    (playbooks/ beside roles/: ktinfra reads the configured roles_path) an AnsibleOptionsError traceback."""
    if layout == "checkout":
        (site / "roles").mkdir()
        (site / "playbooks").mkdir()
        (site / "play.yml").rename(site / "playbooks" / "play.yml")
        (site / "play.yml").symlink_to(site / "playbooks" / "play.yml")  # resolved: the checkout's
    (site / "ansible.cfg").write_text("not ini\n[defaults\n")
    monkeypatch.chdir(site)  # ansible-playbook runs in the caller's directory: its ansible.cfg applies
    code, stderr, report = provision(site, "-i", str(site / "one"))
    assert code == 1 and report["rc"] == 5 and not report["ok"]
    first = f"error: Error reading config file ({site / 'ansible.cfg'}): File contains no section headers."
    assert stderr.startswith(first), stderr
    assert "Traceback" not in stderr and report["errors"][0].startswith(first.removeprefix("error: "))


@pytest.mark.parametrize("form", ["vault file", "inline !vault"])
def test_vault_data_without_a_vault_password_is_refused(
    site: Path, monkeypatch: pytest.MonkeyPatch, form: str
) -> None:
    """Ansible blamed the inventory ('inventory one: Ansible could not parse it'), the vault last."""
    _vaulted_vars(site, form)
    monkeypatch.delenv("ANSIBLE_VAULT_PASSWORD_FILE", raising=False)
    monkeypatch.delenv("ANSIBLE_VAULT_IDENTITY_LIST", raising=False)
    monkeypatch.setenv("ANSIBLE_CONFIG", str(site / "none.cfg"))  # no ansible.cfg of this box either
    code, stderr, report = provision(site, "-i", str(site / "one"), "-e", f"@{site / 'vars.yml'}")
    assert code == 1 and report == {} and not (site / "runs").exists()
    assert stderr == (
        f"error: extra-vars file {site / 'vars.yml'} holds ansible-vault data and no vault password is "
        "configured: set ANSIBLE_VAULT_PASSWORD_FILE (or vault_password_file / vault_identity_list in "
        "ansible.cfg); ktinfra provision cannot prompt for it\n"
    )
    # the same file with the password in ansible.cfg (as ansible-playbook finds it) runs
    (site / "vault.cfg").write_text(f"[defaults]\nvault_password_file = {site / 'vault-pass'}\n")
    monkeypatch.setenv("ANSIBLE_CONFIG", str(site / "vault.cfg"))
    code, stderr, report = provision(
        site, "-i", str(site / "one"), "-t", "vars", "-e", f"@{site / 'vars.yml'}"
    )
    assert code == 0, stderr
    assert messages(report) == ["key=sekrit raw=unset"]


def test_diff_shows_the_file_differences(site: Path) -> None:
    """--diff ('show file differences') showed none: only the artifacts' stdout had them."""
    (site / "play.yml").write_text(CHECK_PLAYBOOK)
    (site / "marker").write_text("v1\n")
    args = ["provision", str(site / "play.yml"), "-i", str(site / "one"), "--artifacts", str(site / "runs")]
    args += ["-e", f"marker={site / 'marker'}", "--check"]
    result = CliRunner().invoke(app, [*args, "--diff"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    at = lines.index("diff alpha · Write the marker")
    assert lines[at + 1 : at + 6] == [
        f"--- before: {site / 'marker'}",
        f"+++ after: {site / 'marker'}",
        "@@ -1 +1 @@",
        "-v1",
        "+v2",
    ]
    report = json.loads(CliRunner().invoke(app, [*args, "--diff", "--json"]).stdout)
    assert [(d["host"], d["task"]) for d in report["diffs"]] == [("alpha", "Write the marker")]
    assert "-v1\n+v2" in report["diffs"][0]["diff"] and "\x1b" not in report["diffs"][0]["diff"]
    plain = CliRunner().invoke(app, [*args, "--json"])  # without --diff: none
    assert json.loads(plain.stdout)["diffs"] == []
    assert (site / "marker").read_text() == "v1\n"  # --check


def test_hosts_named_on_the_command_line(site: Path) -> None:
    """`-i 'gamma,delta,'` (ansible-playbook's host list) was 'inventory gamma,delta, does not exist'."""
    local = ["-e", "ansible_connection=local", "-e", f"ansible_python_interpreter={PYTHON}"]
    code, stderr, report = provision(site, "-i", "gamma,delta,", "-i", str(site / "one"), "-t", "a", *local)
    assert code == 0, stderr
    assert sorted(report["hosts"]) == ["alpha", "delta", "gamma"]
    assert report["inventory"] == ["gamma,delta,", str(site / "one")]
    code, stderr, _ = provision(site, "-i", "gamma")  # no comma: a path, and there is none
    assert code == 1 and stderr == (
        "error: inventory gamma does not exist (to name a host, end it with a comma: -i 'gamma,')\n"
    )


def test_skip_tags_are_passed_and_reported(site: Path) -> None:
    """ktinfra provision had no --skip-tags (`site.yml --skip-tags tuning` needed ansible-playbook)."""
    code, _, report = provision(site, "-i", str(site / "one"), "--skip-tags", "a")
    assert code == 0 and report["skip_tags"] == "a" and report["tags"] is None
    assert "a" not in messages(report) and "b" in messages(report)
    code, _, report = provision(site, "-i", str(site / "one"), "--skip-tags", "a", "--skip-tags", "b")
    assert code == 0 and report["skip_tags"] == "a,b"
    assert "a" not in messages(report) and "b" not in messages(report)


def test_an_empty_skip_tags_is_refused(site: Path) -> None:
    code, stderr, _ = provision(site, "-i", str(site / "one"), "--skip-tags", " ")
    assert code == 1 and stderr == "error: --skip-tags is empty\n"
