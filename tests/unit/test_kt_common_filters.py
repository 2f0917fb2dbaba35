"""kt_common's ktinfra_list filter: called directly, then through real ansible-playbook in a role that lists
kt_common as its dependency (static and included roles, -e strings, JSON lists, --check); and every role
that uses the filter lists kt_common (without it the filter is unknown: "No filter named 'ktinfra_list'")."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from role_play import ROLES, run_play

from ktinfra import profiles

FILTERS = ROLES / "kt_common" / "filter_plugins"


def _plugin(name: str):
    spec = importlib.util.spec_from_file_location(f"{name}_plugin", FILTERS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


plugin = _plugin("ktinfra_list")
ktinfra_list = plugin.ktinfra_list
profile_plugin = _plugin("ktinfra_profile")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("inference", ["inference"]),
        ("inference,sft", ["inference", "sft"]),
        (" mirror.lab , ,10.0.0.5,", ["mirror.lab", "10.0.0.5"]),
        ("a,,b,", ["a", "b"]),
        ("\ta\n, b ", ["a", "b"]),
        ("", []),
        (" , ,", []),
    ],
)
def test_a_string_is_split_on_commas_trimmed_and_empty_items_dropped(value, expected):
    assert ktinfra_list(value, "x") == expected


@pytest.mark.parametrize("value", [[], ["a", "b"], [" a ", ""], [{"k": 1}], [1, 2]])
def test_a_list_is_returned_as_it_is(value):
    assert ktinfra_list(value, "x") is value


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        ({"a": 1}, "a mapping: {'a': 1}"),
        (5, "a number: 5"),
        (1.5, "a number: 1.5"),
        (True, "a boolean: True"),
        (None, "null (no value)"),
        (("a", "b"), "a tuple: ('a', 'b')"),
    ],
)
def test_any_other_type_fails_naming_the_variable(value, kind):
    with pytest.raises(AnsibleFilterError) as error:
        ktinfra_list(value, "kt_router_workers")
    assert str(error.value) == f"kt_router_workers must be a list or a comma-separated string, not {kind}"


def test_without_a_name_the_message_says_the_value_and_a_long_value_is_cut():
    with pytest.raises(AnsibleFilterError) as error:
        ktinfra_list({str(n): n for n in range(100)})
    message = str(error.value)
    assert message.startswith("the value must be a list or a comma-separated string, not a mapping: {'0': 0")
    assert message.endswith("...") and len(message) < 300


def _roles(tmp: Path) -> str:
    """A role like kt_router: no filter of its own, kt_common in its meta dependencies; it writes the list."""
    role = tmp / "roles" / "uses_list"
    (role / "meta").mkdir(parents=True)
    (role / "tasks").mkdir()
    (role / "meta" / "main.yml").write_text("dependencies: [kt_common]\n")
    show = "{{ uses_list_items | ktinfra_list('uses_list_items') | to_json }}"
    write = {"content": show, "dest": "{{ uses_list_out }}"}
    # written under --check too
    task = {"name": "Write the list", "ansible.builtin.copy": write, "check_mode": False}
    (role / "tasks" / "main.yml").write_text(yaml.safe_dump([task]))
    return f"{tmp / 'roles'}:{ROLES}"


def run_role(tmp: Path, extra: dict, cli: list[str], flags: list[str] | None = None) -> tuple[int, str]:
    """The role loaded with the play (import_role, as `roles:` loads it) and at run time (include_role)."""
    tasks = [
        {f"ansible.builtin.{how}_role": {"name": "uses_list"}, "vars": {"uses_list_out": str(tmp / out)}}
        for how, out in (("import", "imported"), ("include", "included"))
    ]
    return run_play(tmp, tasks, extra, cli, env={"ANSIBLE_ROLES_PATH": _roles(tmp)}, flags=flags)


@pytest.mark.parametrize(
    ("extra", "cli", "flags"),
    [
        # slow: the params marked slow load the filter into the same imported and included role as [string]
        # (a string) and [json-list-check] (a list, under --check)
        ({}, ["uses_list_items=' a , ,b,'"], []),
        pytest.param({}, ["uses_list_items=a,b"], ["--check"], marks=pytest.mark.slow),
        pytest.param({"uses_list_items": ["a", "b"]}, [], [], marks=pytest.mark.slow),
        ({}, ['{"uses_list_items": ["a", "b"]}'], ["--check"]),
    ],
    ids=["string", "string-check", "list", "json-list-check"],
)
def test_a_role_depending_on_kt_common_gets_the_filter(tmp_path, extra, cli, flags):
    rc, output = run_role(tmp_path, extra, cli, flags)
    assert rc == 0, output[-3000:]
    for loaded in ("imported", "included"):
        assert json.loads((tmp_path / loaded).read_text()) == ["a", "b"], loaded


def test_a_wrong_type_fails_the_play_naming_the_variable(tmp_path):
    rc, output = run_role(tmp_path, {"uses_list_items": {"a": 1}}, [])
    assert rc != 0
    message = "uses_list_items must be a list or a comma-separated string, not a mapping"
    assert message in output, output[-3000:]
    assert not (tmp_path / "imported").exists()


def test_without_kt_common_the_filter_is_unknown(tmp_path):
    """Why the roles list kt_common: the filter comes with a role that is loaded, nothing else provides it."""
    out = tmp_path / "out"
    tasks = [{"ansible.builtin.copy": {"content": "{{ 'a,b' | ktinfra_list }}", "dest": str(out)}}]
    rc, output = run_play(tmp_path, tasks)
    assert rc != 0 and "No filter named 'ktinfra_list'" in output, output[-3000:]


@pytest.mark.parametrize(
    ("name", "users"),
    [
        ("ktinfra_list", {"kt_preflight", "kt_python_env", "kt_router"}),
        ("ktinfra_site_profile", {"kt_preflight", "kt_python_env"}),
        ("ktinfra_profile_copy", {"kt_preflight", "kt_python_env"}),
    ],
)
def test_every_role_using_a_filter_lists_kt_common(name, users):
    found = {
        path.relative_to(ROLES).parts[0]
        for path in ROLES.rglob("*")
        if path.suffix in {".yml", ".j2"}
        and path.relative_to(ROLES).parts[0] != "kt_common"
        and name in path.read_text()
    }
    assert found == users
    for role in found:
        meta = yaml.safe_load((ROLES / role / "meta" / "main.yml").read_text())
        assert "kt_common" in meta["dependencies"], role


NAMES = ["kt-0.7", "kt-0.4-autodl", "site.yaml", "/srv/lab/site.yml", "site.YAML", "site.yaml.bak",
         "site.json", "yaml", "./profiles/kt-0.7.yaml"]  # fmt: skip


@pytest.mark.parametrize("name", NAMES)
def test_the_roles_take_a_stack_for_a_file_where_ktinfra_does(name):
    """kt_preflight and kt_python_env decide with ktinfra_site_profile whether to stage, check and install a
    file; `ktinfra plan --stack` (load_profile) with profiles.is_profile_file whether to read one."""
    assert profile_plugin.ktinfra_site_profile(name) is profiles.is_profile_file(name)


def test_the_installed_copy_of_a_site_profile_sits_next_to_ktinfra():
    copy = profile_plugin.ktinfra_profile_copy
    assert (
        copy("/home/me/lab/site.yaml", "/opt/ktinfra/tool/bin/ktinfra")
        == "/opt/ktinfra/tool/profiles/site.yaml"
    )
    assert copy("site.yml", "/x/bin/ktinfra") == "/x/profiles/site.yml"


def test_the_profile_filters_answer_in_a_play_of_a_role_that_lists_kt_common(tmp_path):
    """What kt_preflight's plans and kt_python_env's install read, through real ansible."""
    out = tmp_path / "out"
    show = ("{{ [stack | ktinfra_site_profile, 'kt-0.7' | ktinfra_site_profile, "
            "stack | ktinfra_profile_copy('/opt/t/bin/ktinfra')] | to_json }}")  # fmt: skip
    role = tmp_path / "roles" / "uses_profile"
    (role / "meta").mkdir(parents=True)
    (role / "tasks").mkdir()
    (role / "meta" / "main.yml").write_text("dependencies: [kt_common]\n")
    task = {"ansible.builtin.copy": {"content": show, "dest": str(out)}, "check_mode": False}
    (role / "tasks" / "main.yml").write_text(yaml.safe_dump([task]))
    env = {"ANSIBLE_ROLES_PATH": f"{tmp_path / 'roles'}:{ROLES}"}
    rc, output = run_play(tmp_path, [{"ansible.builtin.include_role": {"name": "uses_profile"}}],
                          {"stack": "/lab/site.yaml"}, env=env)  # fmt: skip
    assert rc == 0, output[-3000:]
    assert json.loads(out.read_text()) == [True, False, "/opt/t/profiles/site.yaml"]


def test_no_role_or_playbook_splits_a_list_variable_by_hand():
    """One place splits -e strings, ktinfra_list (before: five copies of one expression)."""
    root = ROLES.parent
    files = [
        path.relative_to(root)
        for top in ("roles", "playbooks", "molecule")
        for path in (root / top).rglob("*")
        if path.suffix in {".yml", ".yaml", ".j2"}
    ]
    hand = [
        f"{path}:{n}"
        for path in files
        if not any(part.startswith(".") for part in path.parts)  # molecule's .cache
        for n, line in enumerate((root / path).read_text().splitlines(), 1)
        if re.search(r"\.split\(\s*['\"],['\"]\s*\)", line)
    ]
    assert files and hand == []


def test_no_role_decides_by_hand_whether_a_stack_is_a_file():
    """One place answers in the roles, ktinfra_site_profile (before: a regex in kt_preflight and in
    kt_python_env), and one says where the installed copy is, ktinfra_profile_copy."""
    hand = [
        f"{path.relative_to(ROLES)}:{n}"
        for path in ROLES.rglob("*.yml")
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if "ya?ml" in line or "'/profiles" in line or '/profiles"' in line
    ]
    assert hand == []
