"""README.md's Layout entry for kt_common names the filters and task files the role has.

It named three filters (ktinfra_list, ktinfra_site_profile, ktinfra_profile_copy) as "the shared filters"
while roles/kt_common/filter_plugins defines 13: the loopback, directory, pip and proxy ones other roles
check their input with were missing. Every filter a plugin defines must match a name or `*` pattern of the
entry, every name or pattern must match a filter, and every task file named must exist."""

import importlib.util
import re
from fnmatch import fnmatchcase
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ROLE = ROOT / "roles" / "kt_common"


def _entry() -> str:
    text = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    return text.split("kt_common (no main tasks:", 1)[1].split("a meta dependency", 1)[0]


def _filters() -> set[str]:
    names = set()
    for path in sorted((ROLE / "filter_plugins").glob("*.py")):
        spec = importlib.util.spec_from_file_location(f"kt_common_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        names.update(module.FilterModule().filters())
    return names


def _named_filters() -> list[str]:
    return re.findall(r"ktinfra_[a-z_*]+", _entry().split("task files", 1)[0])


def _named_task_files() -> list[str]:
    words = re.findall(r"[a-z_]+(?:\[_[a-z]+\])?", _entry().split("include:", 1)[1])
    return [name for word in words for name in ([word.split("[")[0], word.replace("[", "").replace("]", "")])]


def test_the_entry_names_every_filter_and_only_filters_there_are():
    defined, named = _filters(), _named_filters()
    assert len(defined) >= 13, defined
    assert sorted(f for f in defined if not any(fnmatchcase(f, n) for n in named)) == []
    assert [n for n in named if not any(fnmatchcase(f, n) for f in defined)] == []


def test_every_task_file_named_exists():
    named = _named_task_files()
    assert "started_with_record" in named and "venv" in named, named
    assert [n for n in named if not (ROLE / "tasks" / f"{n}.yml").is_file()] == []


def test_every_task_file_of_the_role_is_named():
    """settings_file.yml (19614aa: the 0600 download settings file kt_preflight and kt_python_env write) was
    not in the entry's list."""
    named = set(_named_task_files())
    assert sorted(p.stem for p in (ROLE / "tasks").glob("*.yml") if p.stem not in named) == []
