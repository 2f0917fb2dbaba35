"""README.md's Layout entries for scripts/ and images/ name every file or folder those folders hold.

The scripts/ entry named three of seven (docker-ready.sh, device/, tiny_model.py): test-lanes.sh, which `make
test` runs, and the three maintenance scripts (regen_plan_fixtures.py, seed000_table.py,
llamafactory_templates.py) were missing. Every entry of the folder must be named in its Layout entry and every
name there must exist."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NAME = re.compile(r"(?<![\w/.\-])([\w\-]+(?:\.[a-z]+)+|[\w\-]+/)(?=[\s,)]|$)")


def _layout_entry(folder: str) -> str:
    """The lines of the Layout block from `folder/` up to the next top-level entry."""
    block = (ROOT / "README.md").read_text(encoding="utf-8").split("## Layout", 1)[1].split("```")[1]
    lines = block.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{folder}/ "))
    end = next((i for i in range(start + 1, len(lines)) if lines[i][:1] not in (" ", "")), len(lines))
    return "\n".join(lines[start:end])[len(folder) + 1 :]


def _named(folder: str) -> set[str]:
    return {name.rstrip("/") for name in NAME.findall(_layout_entry(folder))}


def _entries(folder: str) -> set[str]:
    return {p.name for p in (ROOT / folder).iterdir() if not p.name.startswith((".", "__"))}


@pytest.mark.parametrize("folder", ["scripts", "images"])
def test_every_entry_of_the_folder_is_named(folder):
    assert sorted(_entries(folder) - _named(folder)) == []


@pytest.mark.parametrize("folder", ["scripts", "images"])
def test_every_name_in_the_entry_is_there(folder):
    def exists(name: str) -> bool:
        return any((ROOT / folder).rglob(name)) or (ROOT / folder / name).exists()

    assert sorted(n for n in _named(folder) if not exists(n)) == []


def test_the_entry_reader_sees_names_and_folders():
    named = _named("scripts")
    assert {"docker-ready.sh", "device", "tiny_model.py"} <= named, named
    assert "docs/readme/device.md" not in named and "make" not in named, named
