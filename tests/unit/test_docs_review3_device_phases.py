"""docs/readme/device.md lists the phases of scripts/device/on_device.sh as its usage line does.

The page listed 16 phases ("its usage line lists them") without `isa`, the phase that runs doctor with each
non-AMX serve --method (session 38), which the script's usage line and its `case` both have. The page's list,
the usage line and the script's case arms must be the same phases in the same order (usage and page)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "device" / "on_device.sh"
PAGE = ROOT / "docs" / "readme" / "device.md"


def _usage_phases() -> list[str]:
    lines = SCRIPT.read_text(encoding="utf-8").splitlines()
    usage = next(line for line in lines if line.startswith("# usage:"))
    return usage.split("[", 1)[1].split("]", 1)[0].split()


def _case_phases() -> set[str]:
    return set(re.findall(r"^\s{4}([a-z0-9-]+)\)", SCRIPT.read_text(encoding="utf-8"), re.M))


def _page_phases() -> list[str]:
    text = " ".join(PAGE.read_text(encoding="utf-8").split())
    return text.split("`scripts/device/on_device.sh PHASES` runs there (`", 1)[1].split("`", 1)[0].split()


def test_the_usage_line_lists_every_phase_the_script_runs():
    assert len(_usage_phases()) >= 17 and set(_usage_phases()) == _case_phases()


def test_the_page_lists_the_phases_of_the_usage_line():
    assert _page_phases() == _usage_phases()
