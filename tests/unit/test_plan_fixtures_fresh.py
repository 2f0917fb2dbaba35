"""tests/fixtures/plans/*.json are what `ktinfra plan --json` prints today (scripts/regen_plan_fixtures.py):
the render tests that read them test render against plans the planner really produces."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

from regen_plan_fixtures import FIXTURES, PLANS, plan_text  # noqa: E402


def _differences(old, new, path: str = "") -> list[str]:
    """Dotted paths where two JSON documents differ (a key on one side only counts)."""
    if isinstance(old, dict) and isinstance(new, dict):
        return [
            diff
            for key in sorted({*old, *new})
            for diff in _differences(old.get(key, "<absent>"), new.get(key, "<absent>"), f"{path}.{key}")
        ]
    return [] if old == new and type(old) is type(new) else [path.lstrip(".") or "<document>"]


def test_every_plan_fixture_is_in_the_table():
    assert sorted(p.name for p in PLANS.glob("*.json")) == sorted(f.file for f in FIXTURES)


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda f: f.file)
def test_plan_fixture_is_what_the_planner_prints(fixture):
    expected = plan_text(fixture)
    held = (PLANS / fixture.file).read_text()
    if held != expected:
        changed = _differences(json.loads(held), json.loads(expected)) or ["formatting"]
        pytest.fail(
            f"tests/fixtures/plans/{fixture.file} differs from what the planner prints now "
            f"({', '.join(changed[:12])}{' ...' if len(changed) > 12 else ''}): "
            "run `python scripts/regen_plan_fixtures.py`, "
            "then review the fixture's diff and the render tests it breaks"
        )
    assert json.loads(held)["feasible"] is True
