"""`ktinfra provision`: real ansible-runner runs against localhost (connection local)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ktinfra.cli import app
from ktinfra.provision import (
    ProvisionError,
    ProvisionRequest,
    RunState,
    ansible_errors,
    exit_code,
    roles_path_for,
    run,
)

PLAYBOOK = """
- name: Exercise the driver
  hosts: all
  gather_facts: false
  tasks:
    - name: Report a value passed with -e
      ansible.builtin.debug:
        msg: "greeting={{ greeting | default('none') }}"
    - name: Change something
      ansible.builtin.command: "true"
      changed_when: true
      tags: [change]
    - name: Skip something
      ansible.builtin.debug:
        msg: never
      when: false
    - name: Fail when asked
      ansible.builtin.fail:
        msg: "asked to fail: {{ reason }}"
      when: reason is defined
"""


@pytest.fixture()
def site(tmp_path: Path) -> Path:
    (tmp_path / "play.yml").write_text(PLAYBOOK)
    python = shutil.which("python3")
    (tmp_path / "hosts").write_text(
        f"[local]\nlocalhost ansible_connection=local ansible_python_interpreter={python}\n"
        "[ghosts]\nghost ansible_host=127.0.0.1 ansible_port=1 ansible_connection=ssh ansible_ssh_timeout=2\n"
    )
    return tmp_path


def request(site: Path, **kw) -> ProvisionRequest:
    return ProvisionRequest(site / "play.yml", site / "hosts", artifacts=site / "runs", **kw)


def test_successful_run_counts_like_the_recap_and_keeps_artifacts(site: Path) -> None:
    seen: list[str] = []
    result = run(
        request(site, limit="localhost", extra_vars=["greeting=hi"]), on_event=lambda s: seen.append(s.task)
    )
    assert result["ok"] and result["rc"] == 0 and exit_code(result) == 0
    assert result["hosts"]["localhost"] == {
        "ok": 2, "changed": 1, "failed": 0, "unreachable": 0, "skipped": 2, "rescued": 0, "ignored": 0,
    }  # fmt: skip
    assert "Change something" in seen
    events = Path(result["artifacts"]) / "job_events"
    assert events.is_dir() and any(events.iterdir())
    stdout = (Path(result["artifacts"]) / "stdout").read_text()
    assert "greeting=hi" in stdout


def test_failed_task_makes_the_run_fail_with_its_message(site: Path) -> None:
    result = run(request(site, limit="localhost", extra_vars=['{"reason": "disk full"}']))
    assert not result["ok"] and result["rc"] == 2 and exit_code(result) == 1  # the README's contract
    assert result["failed_hosts"] == ["localhost"] and result["errors"] == []
    assert result["failures"][0]["message"] == "asked to fail: disk full"
    assert result["failures"][0]["task"] == "Fail when asked"


def test_tags_select_tasks(site: Path) -> None:
    result = run(request(site, limit="localhost", tags="change"))
    assert result["ok"] and result["hosts"]["localhost"]["ok"] == 1
    assert result["hosts"]["localhost"]["changed"] == 1


def test_bad_input_fails_before_running(site: Path) -> None:
    with pytest.raises(ProvisionError, match="playbook"):
        run(ProvisionRequest(site / "nope.yml", site / "hosts", artifacts=site / "runs"))
    with pytest.raises(ProvisionError, match="extra-vars file"):
        run(request(site, extra_vars=["@missing.yml"]))
    assert not (site / "runs").exists()


def test_cli_reports_unreachable_host_in_json_and_exits_1(site: Path) -> None:
    args = ["provision", str(site / "play.yml"), "-i", str(site / "hosts"), "--artifacts", str(site / "runs")]
    result = CliRunner().invoke(app, [*args, "--json"])
    assert result.exit_code == 1  # ansible-playbook's 4 stays in the report's rc
    report = json.loads(result.stdout)
    assert report["hosts"]["localhost"]["changed"] == 1 and report["hosts"]["ghost"]["unreachable"] == 1
    assert report["failed_hosts"] == ["ghost"] and report["failures"][0]["kind"] == "unreachable"


def test_recap_overrides_live_counts() -> None:
    state = RunState()
    state.handle({"event": "playbook_on_play_start", "event_data": {"play": "p"}})
    state.handle({"event": "runner_on_ok", "event_data": {"host": "h", "res": {"changed": True}}})
    state.handle({"event": "runner_on_failed", "event_data": {"host": "h", "ignore_errors": True, "res": {}}})
    assert (state.hosts["h"].ok, state.hosts["h"].changed, state.hosts["h"].ignored) == (1, 1, 1)
    state.handle({"event": "playbook_on_stats", "event_data": {"ok": {"h": 4}, "rescued": {"h": 1}}})
    assert (state.hosts["h"].ok, state.hosts["h"].rescued, state.bad_hosts) == (4, 1, [])


def test_roles_path_is_the_checkouts_roles_dir(tmp_path: Path) -> None:
    (tmp_path / "roles").mkdir()
    for sub in ("playbooks", "molecule/serve"):
        (tmp_path / sub).mkdir(parents=True)
        assert roles_path_for(tmp_path / sub / "x.yml") == str(tmp_path / "roles")
    assert roles_path_for(tmp_path / "x.yml") is None


def test_each_run_uses_only_its_own_arguments(site: Path) -> None:
    """ansible-runner reads env/cmdline back from a reused private_data_dir: an old -e stayed applied."""
    first = run(request(site, limit="localhost", extra_vars=["greeting=sticky"]))
    assert "greeting=sticky" in (Path(first["artifacts"]) / "stdout").read_text()
    second = run(request(site, limit="localhost"))
    assert second["artifacts"] != first["artifacts"]
    out = (Path(second["artifacts"]) / "stdout").read_text()
    assert "greeting=none" in out and "sticky" not in out
    assert "-e" not in json.loads((Path(second["artifacts"]) / "command").read_text())["command"]


def test_each_run_gets_only_its_own_environment(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """env/envvars was written once and read back: the first checkout's roles/ stayed on the path."""
    monkeypatch.delenv("ANSIBLE_ROLES_PATH", raising=False)
    show = '- hosts: all\n  gather_facts: false\n  tasks:\n    - debug:\n        msg: "roles={{ r }}"\n'
    show = show.replace("{{ r }}", "{{ lookup('env', 'ANSIBLE_ROLES_PATH') }}")
    checkout = site / "checkout"
    (checkout / "roles").mkdir(parents=True)
    (checkout / "playbooks").mkdir()
    (checkout / "playbooks" / "show.yml").write_text(show)
    (site / "show.yml").write_text(show)

    def roles_seen(playbook: Path) -> str:
        result = run(ProvisionRequest(playbook, site / "hosts", "localhost", artifacts=site / "runs"))
        return (Path(result["artifacts"]) / "stdout").read_text()

    assert f'"msg": "roles={checkout / "roles"}:' in roles_seen(checkout / "playbooks" / "show.yml")
    assert '"msg": "roles="' in roles_seen(site / "show.yml")


def test_the_configured_roles_path_stays_reachable(
    site: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """ANSIBLE_ROLES_PATH replaced the cwd ansible.cfg's roles_path: a playbook that plain ansible-playbook
    ran failed with "the role 'extra' was not found"."""
    monkeypatch.delenv("ANSIBLE_ROLES_PATH", raising=False)
    monkeypatch.delenv("ANSIBLE_CONFIG", raising=False)
    checkout = site / "checkout"
    (checkout / "roles").mkdir(parents=True)
    (checkout / "playbooks").mkdir()
    uses = "- hosts: all\n  gather_facts: false\n  roles: [extra]\n"
    (checkout / "playbooks" / "uses.yml").write_text(uses)
    work = tmp_path / "work"
    tasks = work / "more" / "extra" / "tasks"
    tasks.mkdir(parents=True)
    (tasks / "main.yml").write_text("- ansible.builtin.debug:\n    msg: extra ran\n")
    (work / "ansible.cfg").write_text("[defaults]\nroles_path = ./more\n")
    monkeypatch.chdir(work)
    result = run(ProvisionRequest(checkout / "playbooks" / "uses.yml", site / "hosts", "localhost",
                                  artifacts=site / "runs"))  # fmt: skip
    out = (Path(result["artifacts"]) / "stdout").read_text()
    assert result["rc"] == 0 and '"msg": "extra ran"' in out, out[-2000:]


@pytest.mark.parametrize("where", ["file", "under-file", "proc"])
def test_unusable_artifacts_dir_is_bad_input(site: Path, where: str) -> None:
    (site / "afile").write_text("keep")
    artifacts = {"file": site / "afile", "under-file": site / "afile" / "runs", "proc": Path("/proc/nope")}
    args = [
        "provision",
        str(site / "play.yml"),
        "-i",
        str(site / "hosts"),
        "--artifacts",
        str(artifacts[where]),
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit)
    assert (
        result.stderr.startswith(f"error: artifacts {artifacts[where]}") and "Traceback" not in result.output
    )
    assert (site / "afile").read_text() == "keep" and not Path("/proc/nope").exists()


def test_runs_from_the_callers_directory(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A relative -e @file was checked against the caller's directory but read from runner's private dir."""
    work = site / "work"
    work.mkdir(mode=0o700)
    (work / "vars.yml").write_text("greeting: from-file\n")
    (work / "ansible.cfg").write_text("[defaults]\ntimeout = 17\n")  # as a checkout's ansible.cfg would
    (site / "cfg.yml").write_text(
        "- hosts: all\n  gather_facts: false\n  tasks:\n    - debug:\n"
        "        msg: \"greeting={{ greeting }} timeout={{ lookup('config', 'DEFAULT_TIMEOUT') }}\"\n"
    )
    monkeypatch.chdir(work)
    monkeypatch.delenv("ANSIBLE_CONFIG", raising=False)
    result = run(
        ProvisionRequest(site / "cfg.yml", site / "hosts", "localhost", None, ["@vars.yml"], site / "r")
    )
    assert result["ok"], (Path(result["artifacts"]) / "stdout").read_text()
    assert "greeting=from-file timeout=17" in (Path(result["artifacts"]) / "stdout").read_text()


BAD_YAML = "- hosts: all\n  tasks:\n    - debug: msg=x\n     bad_indent: [\n"


@pytest.mark.parametrize(
    ("case", "extra", "expected"),
    [
        ("syntax", [], ["YAML parsing failed", "bad.yml:4:6"]),
        ("limit", ["--limit", "nomatch"], ["Could not match supplied host pattern", "no hosts"]),
    ],
)
def test_ansibles_own_errors_are_shown_and_exit_1(site: Path, case: str, extra: list, expected: list) -> None:
    """Failing before any host (playbook syntax, --limit matching nothing) said only 'failed'. A bad -e is
    refused before Ansible runs (test_provision_doctor_input.py)."""
    (site / "bad.yml").write_text(BAD_YAML)
    playbook = site / ("bad.yml" if case == "syntax" else "play.yml")
    args = ["provision", str(playbook), "-i", str(site / "hosts"), "--artifacts", str(site / "runs"), *extra]
    human = CliRunner().invoke(app, args)
    assert human.exit_code == 1
    errors = [line for line in human.stderr.splitlines() if line.startswith("error: ")]
    assert errors and all(any(e in line for line in errors) for e in expected), human.stderr
    as_json = CliRunner().invoke(app, [*args, "--json"])
    report = json.loads(as_json.stdout)
    assert as_json.exit_code == 1 and report["failures"] == [] and not report["ok"]
    assert [f"error: {e}" for e in report["errors"]] == errors


def test_ansible_errors_reads_both_error_styles() -> None:
    older = "\x1b[0;31mERROR! the playbook: x.yml could not be found\x1b[0m\r\n"
    newer = "[ERROR]: YAML parsing failed: bad.\r\nOrigin: p.yml:4:6\r\n\r\n2   tasks:\n[WARNING]: other\n"
    assert ansible_errors(older) == ["the playbook: x.yml could not be found"]
    assert ansible_errors(newer) == ["YAML parsing failed: bad. Origin: p.yml:4:6"]


CHECK_PLAYBOOK = """
- name: A file the run writes
  hosts: all
  gather_facts: false
  tasks:
    - name: Write the marker
      ansible.builtin.copy:
        content: "v2\\n"
        dest: "{{ marker }}"
        mode: "0644"
"""


def test_check_predicts_the_change_and_makes_none(site: Path) -> None:
    marker = site / "marker"
    marker.write_text("v1\n")
    (site / "check.yml").write_text(CHECK_PLAYBOOK)
    req = ProvisionRequest(
        site / "check.yml", site / "hosts", limit="localhost", extra_vars=[f"marker={marker}"],
        artifacts=site / "runs", check=True, diff=True,
    )  # fmt: skip
    result = run(req)
    assert result["ok"] and result["check"] is True and result["diff"] is True
    assert result["hosts"]["localhost"]["changed"] == 1
    assert result["changes"] == [{"host": "localhost", "task": "Write the marker"}]
    assert marker.read_text() == "v1\n"  # predicted, not made
    stdout = (Path(result["artifacts"]) / "stdout").read_text()
    assert "-v1" in stdout and "+v2" in stdout  # --diff reached ansible-playbook
    result = run(
        ProvisionRequest(req.playbook, req.inventory, "localhost", None, req.extra_vars, req.artifacts)
    )
    assert result["changes"] == [{"host": "localhost", "task": "Write the marker"}] and not result["check"]
    assert marker.read_text() == "v2\n"


def test_cli_check_lists_what_would_change(site: Path) -> None:
    marker = site / "marker"
    marker.write_text("v1\n")
    (site / "check.yml").write_text(CHECK_PLAYBOOK)
    args = ["provision", str(site / "check.yml"), "-i", str(site / "hosts"), "-l", "localhost"]
    args += ["-e", f"marker={marker}", "--artifacts", str(site / "runs"), "--check"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "would change localhost · Write the marker" in result.output
    assert marker.read_text() == "v1\n"


RECOVERED_PLAYBOOK = """
- hosts: all
  gather_facts: false
  tasks:
    - name: Ping what answers
      ansible.builtin.ping:
      ignore_unreachable: true
    - name: Fail and be rescued
      block:
        - name: Fail on purpose
          ansible.builtin.assert: {that: [false], fail_msg: first}
      rescue:
        - ansible.builtin.debug: msg=rescued
    - name: Fail for real
      ansible.builtin.fail: {msg: second}
      when: fail_after is defined
"""


def test_rescued_and_ignored_unreachable_are_no_failures(site: Path) -> None:
    """Ansible's recap omits zero counts: the failed/unreachable counted from each event stayed, so a run
    ansible-playbook finished with rc 0 (recap failures {} dark {}) was reported failed, exit 1."""
    (site / "rec.yml").write_text(RECOVERED_PLAYBOOK)
    args = ["provision", str(site / "rec.yml"), "-i", str(site / "hosts"), "--artifacts", str(site / "runs")]
    result = CliRunner().invoke(app, [*args, "--json"])
    report = json.loads(result.stdout)
    assert report["rc"] == 0 and report["status"] == "successful"
    assert result.exit_code == 0 and report["ok"], report
    assert report["hosts"]["ghost"] == {
        "ok": 2, "changed": 0, "failed": 0, "unreachable": 0, "skipped": 1, "rescued": 1, "ignored": 1,
    }  # fmt: skip
    assert report["hosts"]["localhost"]["failed"] == 0 and report["hosts"]["localhost"]["rescued"] == 1
    assert report["failed_hosts"] == [] and report["failures"] == []
    assert sorted((r["host"], r["task"], r["kind"]) for r in report["recovered"]) == [
        ("ghost", "Fail on purpose", "rescued"),
        ("ghost", "Ping what answers", "ignored"),
        ("localhost", "Fail on purpose", "rescued"),
    ]
    human = CliRunner().invoke(app, args)
    assert human.exit_code == 0
    assert "rescued localhost · Fail on purpose: first" in human.stdout
    lines = human.stdout.splitlines()
    assert not [line for line in lines if line.startswith(("failed ", "unreachable "))]


def test_a_rescued_failure_does_not_hide_a_later_real_one(site: Path) -> None:
    (site / "rec.yml").write_text(RECOVERED_PLAYBOOK)
    result = run(ProvisionRequest(site / "rec.yml", site / "hosts", "localhost", None, ["fail_after=1"],
                                  site / "runs"))  # fmt: skip
    assert not result["ok"] and result["rc"] == 2 and result["failed_hosts"] == ["localhost"]
    assert result["hosts"]["localhost"]["failed"] == 1 and result["hosts"]["localhost"]["rescued"] == 1
    assert [(f["task"], f["kind"], f["message"]) for f in result["failures"]] == [
        ("Fail for real", "failed", "second")
    ]
    assert [(f["task"], f["kind"]) for f in result["recovered"]] == [("Fail on purpose", "rescued")]
