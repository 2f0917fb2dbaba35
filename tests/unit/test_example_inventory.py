"""inventories/example/group_vars documents every role variable with its default (README, roles2.md say so).

A variable is either set (an active YAML key) or shown commented out as `# name: value` (a block value
continues on `#   ` lines). A commented value must equal the role default; an active value that differs
from the default must be marked `example:` on its line or in the comment lines just above it.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).parents[2]
GROUP_VARS = ROOT / "inventories" / "example" / "group_vars"
COMMENTED = re.compile(r"^# (kt_\w+):(.*)$")


def role_defaults() -> dict[str, tuple[str, object]]:
    found = {}
    for path in sorted(ROOT.glob("roles/*/defaults/main.yml")):
        for name, value in (yaml.safe_load(path.read_text()) or {}).items():
            found[name] = (path.parts[-3], value)
    return found


def commented_vars(text: str) -> dict[str, object]:
    """`# name: value` lines (plus `#   ` continuation lines), parsed as YAML."""
    lines = text.splitlines()
    found = {}
    for i, line in enumerate(lines):
        match = COMMENTED.match(line)
        if not match:
            continue
        block = [line[2:]]
        for more in lines[i + 1 :]:
            if not re.match(r"^#\s{2,}\S", more):
                break
            block.append(more[2:])
        found[match.group(1)] = yaml.safe_load("\n".join(block))[match.group(1)]
    return found


def active_marked_example(text: str, name: str) -> bool:
    lines = text.splitlines()
    index = next(i for i, line in enumerate(lines) if line.startswith(f"{name}:"))
    if "example:" in lines[index]:
        return True
    above = index - 1
    while above >= 0 and lines[above].startswith("#"):
        if "example:" in lines[above]:
            return True
        above -= 1
    return False


FILES = sorted(GROUP_VARS.glob("*.yml"))
DEFAULTS = role_defaults()


def test_group_vars_files_exist():
    assert [p.name for p in FILES] == ["all.yml", "kt_router.yml", "kt_serve.yml", "kt_train.yml"]
    assert len(DEFAULTS) > 100


def test_every_role_default_is_in_the_example_inventory():
    shown = set()
    for path in FILES:
        text = path.read_text()
        shown |= set(yaml.safe_load(text) or {})
        shown |= set(commented_vars(text))
    missing = sorted(set(DEFAULTS) - shown)
    assert not missing, f"role defaults missing from {GROUP_VARS.relative_to(ROOT)}: {missing}"
    unknown = sorted(shown - set(DEFAULTS))
    assert not unknown, f"not a variable of any role: {unknown}"


def test_each_variable_appears_once():
    seen: dict[str, str] = {}
    for path in FILES:
        text = path.read_text()
        for name in list(yaml.safe_load(text) or {}) + list(commented_vars(text)):
            assert name not in seen, f"{name} in {seen[name]} and {path.name}"
            seen[name] = path.name


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_commented_values_are_the_role_defaults(path):
    wrong = {
        name: (value, DEFAULTS[name][1])
        for name, value in commented_vars(path.read_text()).items()
        if value != DEFAULTS[name][1]
    }
    assert not wrong, f"{path.name}: commented value != role default: {wrong}"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_active_values_are_defaults_or_marked_examples(path):
    text = path.read_text()
    unmarked = [
        name
        for name, value in (yaml.safe_load(text) or {}).items()
        if value != DEFAULTS[name][1] and not active_marked_example(text, name)
    ]
    assert not unmarked, f"{path.name}: differs from the role default, no 'example:' note: {unmarked}"


@pytest.mark.parametrize(
    ("group_file", "roles"),
    [
        ("all.yml", {"kt_preflight", "kt_python_env", "kt_host_tuning", "kt_model_store"}),
        ("kt_serve.yml", {"kt_serve"}),
        ("kt_train.yml", {"kt_train"}),
        ("kt_router.yml", {"kt_router"}),
    ],
)
def test_variables_sit_in_the_file_of_the_group_that_runs_their_role(group_file, roles):
    text = (GROUP_VARS / group_file).read_text()
    names = set(yaml.safe_load(text) or {}) | set(commented_vars(text))
    assert {DEFAULTS[name][0] for name in names} == roles


def test_the_controllers_localhost_keeps_the_python_that_runs_ansible(tmp_path):
    """hosts' [all:vars] ansible_python_interpreter=/usr/bin/python3 is for the targets only: the implicit
    localhost that kt_preflight delegates its wheel build to (roles/kt_preflight/tasks/tool.yml) keeps the
    python running ansible-playbook (ansible-core sets it as a host var of the implicit localhost, over the
    'all' group's vars), so a controller without /usr/bin/python3 (macOS, Homebrew) builds the wheel all the
    same. Fails if localhost is ever listed in the example inventory, where [all:vars] would reach it."""
    play = [{"hosts": "gpu1", "gather_facts": False, "tasks": [
        {"ansible.builtin.setup": {"gather_subset": ["min"]}, "delegate_to": "localhost", "run_once": True,
         "become": False, "register": "controller"},
        {"ansible.builtin.debug": {"msg": "python={{ controller.ansible_facts.ansible_python.executable }}"}},
        {"ansible.builtin.debug": {"msg": "target={{ ansible_python_interpreter }}"}},
    ]}]  # fmt: skip
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play))
    env = dict(os.environ, ANSIBLE_LOCALHOST_WARNING="false")
    playbook = Path(sys.executable).parent / "ansible-playbook"
    inventory = ROOT / "inventories" / "example" / "hosts"
    command = [str(playbook), "-i", str(inventory), str(tmp_path / "play.yml")]
    proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f'"msg": "python={sys.executable}"' in proc.stdout, proc.stdout
    assert '"msg": "target=/usr/bin/python3"' in proc.stdout, proc.stdout
