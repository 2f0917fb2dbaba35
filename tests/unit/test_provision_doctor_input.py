"""Input that Ansible or testinfra only half refuse: an inventory Ansible cannot parse, or one without the
play's hosts (a warning and exit 0, so `ktinfra provision` said ok with zero hosts), and `ktinfra doctor`
host URLs with bad brackets or ports (a pytest traceback, or the whole suite run against them)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ktinfra import doctor
from ktinfra.bench.client import check_url
from ktinfra.cli import app
from ktinfra.provision import ProvisionError, ProvisionRequest, RunState, inventory_errors, run

PLAY = "- hosts: {hosts}\n  gather_facts: false\n  tasks:\n    - ansible.builtin.debug:\n        msg: hello\n"
LOCAL = f"localhost ansible_connection=local ansible_python_interpreter={shutil.which('python3')}\n"

BAD_INVENTORIES = {
    "bad.ini": "[kt_serve\nhost1 ansible_host=\n= = =\n",
    "bad.yml": "all:\n  hosts: [unclosed\n",
    "empty.inv": "",
}


def provision(tmp_path: Path, playbook: str, inventory: str, *extra: str) -> tuple[int, str, dict]:
    """`ktinfra provision ... --json` in tmp_path: exit code, stderr, the JSON report."""
    args = ["provision", str(tmp_path / playbook), "-i", str(tmp_path / inventory)]
    result = CliRunner().invoke(app, [*args, "--artifacts", str(tmp_path / "runs"), "--json", *extra])
    assert "Traceback" not in result.output, result.output
    return result.exit_code, result.stderr, json.loads(result.stdout)


@pytest.mark.parametrize("inventory", sorted(BAD_INVENTORIES))
def test_unparsable_or_empty_inventory_fails_the_run(tmp_path: Path, inventory: str) -> None:
    """Ansible warned 'Unable to parse ... as an inventory source', ran nothing and exited 0: it was ok."""
    (tmp_path / "pb.yml").write_text(PLAY.format(hosts="all"))
    (tmp_path / inventory).write_text(BAD_INVENTORIES[inventory])
    code, stderr, report = provision(tmp_path, "pb.yml", inventory)
    assert code == 1 and report["ok"] is False and report["rc"] == 0 and report["hosts"] == {}
    errors = [line for line in stderr.splitlines() if line.startswith("error: ")]
    assert errors == [f"error: {e}" for e in report["errors"]]
    if inventory == "empty.inv":
        assert report["errors"][0].startswith("no host targeted: no play of ")
        assert any("provided hosts list is empty" in e for e in report["errors"])
    else:
        assert report["errors"][0] == f"inventory {tmp_path / inventory}: Ansible could not parse it"
        assert f"Unable to parse {tmp_path / inventory} as an inventory source" in report["errors"]
        assert any(e.startswith("Failed to parse inventory with") for e in report["errors"])


@pytest.mark.parametrize(
    "flag, args",
    [
        ("PLAYBOOK", ["", "-i", "hosts"]),
        ("--inventory", ["pb.yml", "-i", ""]),
        ("--artifacts", ["pb.yml", "-i", "hosts", "--artifacts", ""]),
        ("--tags", ["pb.yml", "-i", "hosts", "--tags", ""]),
        ("--limit", ["pb.yml", "-i", "hosts", "--limit", " "]),
    ],
)
def test_an_empty_path_tags_or_limit_is_refused_before_ansible_runs(
    tmp_path, monkeypatch, flag, args
) -> None:
    """Before: -i '' ran against the current directory as the inventory, --artifacts '' wrote into it, and
    --tags '' ran every task (ansible-runner drops it; ansible-playbook --tags '' runs none)."""
    (tmp_path / "pb.yml").write_text(PLAY.format(hosts="all"))
    (tmp_path / "hosts").write_text(LOCAL)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["provision", *args, "--json"])
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr == f"error: {flag} is empty\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hosts", "pb.yml"]


@pytest.mark.parametrize(("playbook", "state"), [("adir", "is not a file"), ("gone.yml", "does not exist")])
def test_a_playbook_that_is_no_file_is_named_so(tmp_path, monkeypatch, playbook, state) -> None:
    """Before: a directory as the playbook was 'error: playbook /tmp does not exist'."""
    (tmp_path / "adir").mkdir()
    (tmp_path / "hosts").write_text(LOCAL)
    args = ["provision", str(tmp_path / playbook), "-i", str(tmp_path / "hosts")]
    result = CliRunner().invoke(app, [*args, "--artifacts", str(tmp_path / "runs"), "--json"])
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr == f"error: playbook {tmp_path / playbook} {state}\n"
    assert not (tmp_path / "runs").exists()


def test_inventory_without_the_plays_group_fails_the_run(tmp_path: Path) -> None:
    (tmp_path / "grp.yml").write_text(PLAY.format(hosts="kt_serve"))
    (tmp_path / "typo.ini").write_text(f"[kt_sreve]\n{LOCAL}")
    code, stderr, report = provision(tmp_path, "grp.yml", "typo.ini")
    assert code == 1 and not report["ok"] and report["rc"] == 0 and report["failures"] == []
    assert report["errors"] == [
        f"no host targeted: no play of {tmp_path / 'grp.yml'} matched a host of {tmp_path / 'typo.ini'}",
        "Could not match supplied host pattern, ignoring: kt_serve",
    ]
    assert stderr.startswith("error: no host targeted")
    human = CliRunner().invoke(
        app,
        [
            "provision",
            str(tmp_path / "grp.yml"),
            "-i",
            str(tmp_path / "typo.ini"),
            "--artifacts",
            str(tmp_path / "human-runs"),
        ],
    )
    assert human.exit_code == 1 and "error: Could not match supplied host pattern" in human.stderr


def test_a_bad_file_in_an_inventory_directory_fails_the_run(tmp_path: Path) -> None:
    """Its hosts would be left out silently while the others are provisioned."""
    (tmp_path / "pb.yml").write_text(PLAY.format(hosts="all"))
    (tmp_path / "inv").mkdir()
    (tmp_path / "inv" / "good").write_text(f"[local]\n{LOCAL}")
    (tmp_path / "inv" / "broken").write_text(BAD_INVENTORIES["bad.ini"])
    code, _, report = provision(tmp_path, "pb.yml", "inv")
    assert code == 1 and not report["ok"] and report["hosts"]["localhost"]["ok"] == 1
    assert report["errors"][0] == f"inventory {tmp_path / 'inv'}: Ansible could not parse a file of it"
    assert f"Unable to parse {tmp_path / 'inv' / 'broken'} as an inventory source" in report["errors"]


@pytest.mark.parametrize(
    ("case", "playbook", "inventory", "extra"),
    [
        ("good", PLAY.format(hosts="all"), f"[local]\n{LOCAL}", []),
        # one play's group is absent (site.yml on an inventory without routers), another ran
        (
            "one-play-matched",
            PLAY.format(hosts="kt_router") + PLAY.format(hosts="local"),
            f"[local]\n{LOCAL}",
            [],
        ),
        # the implicit localhost is targeted when the play names it, even with an empty inventory
        ("implicit-localhost", PLAY.format(hosts="localhost"), "", []),
        # --tags selecting no task (`tagged`: PLAY has none; a tag no task has is refused before the run): the
        # hosts were targeted, nothing to do
        ("no-task-tagged", PLAY.format(hosts="all"), f"[local]\n{LOCAL}", ["--tags", "tagged"]),
    ],
)
def test_runs_that_targeted_a_host_stay_ok(tmp_path: Path, case, playbook, inventory, extra) -> None:
    (tmp_path / "pb.yml").write_text(playbook)
    (tmp_path / "hosts").write_text(inventory)
    code, stderr, report = provision(tmp_path, "pb.yml", "hosts", *extra)
    assert code == 0 and report["ok"] and report["errors"] == [], stderr


def test_library_report_counts_plays_without_hosts(tmp_path: Path) -> None:
    (tmp_path / "pb.yml").write_text(PLAY.format(hosts="kt_serve"))
    (tmp_path / "hosts").write_text(f"[local]\n{LOCAL}")
    result = run(ProvisionRequest(tmp_path / "pb.yml", tmp_path / "hosts", artifacts=tmp_path / "runs"))
    assert not result["ok"] and result["rc"] == 0 and result["status"] == "successful"
    state = RunState()
    for event in ("playbook_on_play_start", "playbook_on_no_hosts_matched", "playbook_on_play_start"):
        state.handle({"event": event, "event_data": {}})
    assert state.targeted  # the second play matched
    state.handle({"event": "playbook_on_no_hosts_matched", "event_data": {}})
    assert not state.targeted and not RunState().targeted


def test_inventory_errors_reads_older_wrapped_warnings() -> None:
    """ansible-core < 2.19 wraps warnings at 80 columns and words plugin failures ' * Failed to parse'."""
    older = (
        "\x1b[1;35m[WARNING]:  * Failed to parse /srv/inv/bad.ini with ini plugin: not enough\x1b[0m\n"
        "\x1b[1;35mvalues to unpack (expected 3, got 2)\x1b[0m\n"
        "\x1b[1;35m[WARNING]: Unable to parse /srv/inv/bad.ini as an inventory source\x1b[0m\n"
        "\x1b[1;35m[WARNING]: No inventory was parsed, only implicit localhost is available\x1b[0m\n"
    )
    assert inventory_errors(older) == [
        "Failed to parse /srv/inv/bad.ini with ini plugin: not enough values to unpack (expected 3, got 2)",
        "Unable to parse /srv/inv/bad.ini as an inventory source",
        "No inventory was parsed, only implicit localhost is available",
    ]
    assert inventory_errors("[WARNING]: Could not match supplied host pattern, ignoring: x\n") == []


BAD_HOSTS = [
    ("ssh://[::1", "unbalanced brackets"),
    ("ssh://root@[::1]]:22", "unbalanced brackets"),
    ("ssh://gpu1]", "unbalanced brackets"),
    ("ssh://[::1]22", "only :PORT may follow"),
    ("ssh://h:notaport", "port 'notaport' is not a number from 1 to 65535"),
    ("paramiko://root@h:0", "port '0' is not"),
    ("winrm://h:65536", "port '65536' is not"),
    ("ssh://[::1]:22x", "port '22x' is not"),
    ("ssh://fe80::1", "IPv6 address goes in brackets"),
    ("ansible://web[0]", "bad host 'ansible://web[0]'"),  # urllib (so testinfra) refuses it
]


@pytest.mark.parametrize(("host", "reason"), BAD_HOSTS)
def test_malformed_host_urls_are_refused_before_the_suite_runs(host, reason, monkeypatch) -> None:
    monkeypatch.setattr(doctor.subprocess, "run", lambda *a, **k: pytest.fail("suite must not start"))
    with pytest.raises(doctor.DoctorError, match="bad host") as caught:
        doctor.run(["local://", host], "serve", "kt-0.7")
    assert reason in str(caught.value) and "\n" not in str(caught.value)
    result = CliRunner().invoke(app, ["doctor", "--hosts", host])
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr == f"error: {caught.value}\n"


@pytest.mark.parametrize(
    "host",
    [
        "ssh://[::1]:22",
        "ssh://[::1]",
        "ssh://root@gpu1:2222",
        "paramiko://root:pw@10.0.0.1:65535",
        "ansible://kt_serve:kt_train?ansible_inventory=inventories/example/hosts",
        "docker://ktbox",
        "kubectl://pod?container=c&namespace=n",
        "local://",
    ],
)
def test_well_formed_host_urls_pass(host) -> None:
    doctor.validate_host(host)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--health-url", "file:///etc/passwd"],
            "--health-url: url must be http:// or https:// followed by a host",
        ),
        (
            ["--health-url", "http://127.0.0.1:0/health"],
            "--health-url: url 'http://127.0.0.1:0/health': port must",
        ),
        (["--health-url", ""], "--health-url is empty"),
        (["--python", " "], "--python is empty"),
        (["--sft-python", ""], "--sft-python is empty"),
    ],
)
def test_doctor_options_that_cannot_be_checked_are_refused_before_the_suite_runs(args, message, monkeypatch):
    """Before: a file:// health URL became a failed check, an empty option was dropped without a word."""
    monkeypatch.setattr(doctor.subprocess, "run", lambda *a, **k: pytest.fail("suite must not start"))
    result = CliRunner().invoke(app, ["doctor", *args])
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.startswith(f"error: {message}") and result.stderr.count("\n") == 1


def test_health_url_with_a_query_is_checked_as_given():
    """The health URL is fetched whole (?token=... for a gateway); bench's base URLs refuse a query."""
    doctor.validate_options({"health_url": "http://127.0.0.1:30000/health?token=abc"})
    with pytest.raises(ValueError, match="without [?]query"):
        check_url("http://127.0.0.1:30000/v1?token=abc")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("{bad", "-e '{bad' is not valid YAML/JSON: expected ',' or '}'"),
        ("[1, 2]", "-e '[1, 2]' must hold a mapping of variables, not a list"),
        ("@bad.yml", "extra-vars file bad.yml is not valid YAML/JSON: expected ',' or ']'"),
        ("@latin1.yml", "extra-vars file latin1.yml cannot be read"),
        ("@empty.yml", "extra-vars file empty.yml is empty (or only comments): Ansible needs a mapping"),
        ("@comments.yml", "extra-vars file comments.yml is empty (or only comments): Ansible needs a"),
        # a file without @: Ansible blamed the inventory first; Ansible's JSON test is the first character,
        # so '  {...}' and 'x: yaml' were key=value text without a pair: dropped, exit 0
        ("./vars.yml", "-e './vars.yml': prefix an extra-vars file with @ (-e @./vars.yml)"),
        ("vars.yml", "-e 'vars.yml': prefix an extra-vars file with @ (-e @vars.yml)"),
        ('  {"x": "sp"}', '-e \'  {"x": "sp"}\' is neither key=value pairs nor JSON/YAML starting with {'),
        ("x: yaml", "-e 'x: yaml' is neither key=value pairs nor JSON/YAML starting with { or [ (nor @FILE)"),
    ],
)
def test_extra_vars_ansible_cannot_parse_are_refused_naming_the_value(tmp_path, monkeypatch, value, message):
    """Before: Ansible blamed the inventory ('inventory hosts: Ansible could not parse it') for a bad -e."""
    (tmp_path / "pb.yml").write_text(PLAY.format(hosts="all"))
    (tmp_path / "hosts").write_text(LOCAL)
    (tmp_path / "bad.yml").write_text("a: [1\n")
    (tmp_path / "latin1.yml").write_bytes(b"a: caf\xe9\n")
    (tmp_path / "empty.yml").write_text("")
    (tmp_path / "comments.yml").write_text("# nothing set yet\n---\n")
    (tmp_path / "vars.yml").write_text("x: 1\n")
    monkeypatch.chdir(tmp_path)
    args = [
        "provision",
        "pb.yml",
        "-i",
        "hosts",
        "-e",
        value,
        "--artifacts",
        str(tmp_path / "runs"),
        "--json",
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.startswith(f"error: {message}") and result.stderr.count("\n") == 1
    assert not (tmp_path / "runs").exists()


def test_an_absolute_extra_vars_path_without_at_is_refused(tmp_path):
    (tmp_path / "vars.yml").write_text("x: 1\n")
    request = ProvisionRequest(Path(__file__), tmp_path, extra_vars=[str(tmp_path / "vars.yml")])
    with pytest.raises(ProvisionError, match="prefix an extra-vars file with @"):
        request.validate()
    ProvisionRequest(Path(__file__), tmp_path, extra_vars=["a=/x/y", "b=./z"]).validate()  # key=value
