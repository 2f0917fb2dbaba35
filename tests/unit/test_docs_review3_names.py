"""Role variables and repository paths that README.md, docs/readme/*.md and docs/CONTRACTS.md name exist.

A renamed role variable or a moved file otherwise leaves the pages telling users to set a variable the role
ignores (Ansible takes any name without a word) or to open a file that is not there. A name starting with a
role's name and `_` must be one of that role's inputs (defaults/main.yml, meta/argument_specs.yml) or a fact
its tasks set (`set_fact`/`register`, e.g. kt_preflight_facts); a path starting with a top-level folder of
the repository must exist, `{a,b}` read as the shell expands it and a trailing `_` (`tests/unit/test_image_*`)
as a prefix. Names of things that are not files of this repository but look like paths (docker image names,
the places Ansible looks in) are listed in NOT_REPO_PATHS."""

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs" / "readme").glob("*.md")), ROOT / "docs" / "CONTRACTS.md"]
ROLES = sorted(p.name for p in (ROOT / "roles").iterdir() if (p / "tasks").is_dir())
SKIPPED_TOP = {"out", "build"}  # build outputs: not in a clone
TOP = sorted(p.name for p in ROOT.iterdir() if p.is_dir() and p.name not in SKIPPED_TOP and p.name[0] != ".")
TOP.append(".ci")
NOT_REPO_PATHS = {
    "ktinfra/kt",  # the image's docker repository
    "ktinfra/debian12-systemd",  # the local base image
    "roles/kt_train/files",  # where Ansible's copy looks for a relative src (README "Ansible")
    "playbooks/files/my_alpaca.json",  # the example dataset a site provides
    "scripts/convert_cpu_weights.py",  # kt-kernel's own scripts (its repository's kt-kernel/scripts/)
    "scripts/convert_kt_to_sglang_adapter.py",
}
PATH = re.compile(r"(?<![\w/.\-])((?:" + "|".join(map(re.escape, TOP)) + r")/[\w.\-/{},*]*[\w}_/*])")
VARIABLE = re.compile(r"(?<![\w\-/.])(kt_[a-z0-9_]+)\b")


def _yaml_keys(path: Path) -> set[str]:
    data = yaml.safe_load(path.read_text(encoding="utf-8")) if path.is_file() else None
    return set(data) if isinstance(data, dict) else set()


def _role_names(role: str) -> set[str]:
    """The role's inputs and the facts its tasks set."""
    folder = ROOT / "roles" / role
    names = _yaml_keys(folder / "defaults" / "main.yml")
    specs = yaml.safe_load((folder / "meta" / "argument_specs.yml").read_text(encoding="utf-8"))
    for entry in specs["argument_specs"].values():
        names |= set(entry.get("options") or {})
    for tasks in (folder / "tasks").glob("*.yml"):
        text = tasks.read_text(encoding="utf-8")
        names |= set(re.findall(r"register:\s*(\w+)", text))
        for block in re.findall(r"set_fact:\n((?: {4,}.*\n)+)", text):
            names |= set(re.findall(r"^ {4,}(\w+):", block, re.M))
    return names


def _role_of(name: str) -> str | None:
    return max((r for r in ROLES if name.startswith(f"{r}_")), key=len, default=None)


def _expand(path: str) -> list[str]:
    match = re.search(r"\{([^{}]*)\}", path)
    if not match:
        return [path]
    return [
        full
        for part in match.group(1).split(",")
        for full in _expand(path[: match.start()] + part + path[match.end() :])
    ]


def _path_exists(path: str) -> bool:
    path = path.rstrip("/")
    if path in NOT_REPO_PATHS:
        return True
    if "*" in path or path.endswith("_"):
        return any(ROOT.glob(path if "*" in path else f"{path}*"))
    return (ROOT / path).exists()


def variable_problems(text: str, where: str, known: dict[str, set[str]]) -> list[str]:
    problems = []
    for number, line in enumerate(text.splitlines(), 1):
        for name in VARIABLE.findall(line):
            role = _role_of(name)
            if role and name not in known[role]:
                problems.append(f"{where}:{number}: {name} is no input or fact of {role}")
    return problems


def path_problems(text: str, where: str) -> list[str]:
    problems = []
    for number, line in enumerate(text.splitlines(), 1):
        for written in PATH.findall(line):
            missing = [p for p in _expand(written) if not _path_exists(p)]
            problems += [f"{where}:{number}: {p} does not exist" for p in missing]
    return problems


@pytest.fixture(scope="module")
def known() -> dict[str, set[str]]:
    return {role: _role_names(role) for role in ROLES}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_role_variable_named_exists(page, known):
    assert variable_problems(page.read_text(encoding="utf-8"), page.name, known) == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_repository_path_named_exists(page):
    assert path_problems(page.read_text(encoding="utf-8"), page.name) == []


def test_the_checks_catch_a_renamed_variable_and_a_moved_file(known):
    """The guards fail where a page would be wrong, and read braces, prefixes and facts as the pages mean."""
    assert variable_problems("set `kt_serve_instance` (not _instances)", "x", known) != []
    assert variable_problems("`kt_serve_instances`, fact `kt_preflight_facts`, `kt_method`", "x", known) == []
    assert path_problems("see tests/unit/test_no_such_file.py", "x") != []
    assert path_problems("tests/integration/test_doctor_{hidden_pid1,no_such}.py", "x") != []
    written = "tests/integration/test_doctor_{hidden_pid1,removed_unit}.py, tests/unit/test_image_*.py"
    assert path_problems(written, "x") == []
