"""Every docker test under tests/integration is run by a make target of `make test`.

The mk/*.mk targets name their integration test files (or folders) one by one: a new file named by none of
them was never run, in CI or by `make test`, while it looked like part of the suite (two kt_host_tuning
container tests, 8e96497 and 745acc8, were in that state)."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_every_integration_test_file_is_named_by_a_make_target():
    mk = "\n".join(p.read_text() for p in [REPO / "Makefile", *sorted((REPO / "mk").glob("*.mk"))])
    integration = REPO / "tests" / "integration"
    unnamed = []
    for test in sorted(integration.rglob("test_*.py")):
        rel = test.relative_to(REPO)
        folders = [str(parent.relative_to(REPO)) for parent in test.parents if integration in parent.parents]
        if str(rel) not in mk and not any(f"{folder}\n" in mk or f"{folder} " in mk for folder in folders):
            unnamed.append(str(rel))
    assert unnamed == []
