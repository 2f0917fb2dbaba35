"""docs/readme/roles2.md says what kt_router asks the workers, as its tasks now ask them.

The kt_router row said the API-key and IPv4 checks apply to the `kt_router_workers` URLs that are an inventory
instance's and "other given URLs cannot be checked", while since 9dbdd3d tasks/given_workers.yml asks every
other given http(s) URL for /health and, with the key, /get_model_info before the router's files are written,
and since e4ea906 tasks/health.yml asks each worker listed healthy for /get_model_info with the key (a 401/403
fails the run) and stops waiting for one whose own /health does not answer. The row must name /get_model_info
and no longer say the given URLs cannot be checked; the role side is read too."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "readme" / "roles2.md"
TASKS = ROOT / "roles" / "kt_router" / "tasks"


def _router_row() -> str:
    row = next(
        line for line in PAGE.read_text(encoding="utf-8").splitlines() if line.startswith("| `kt_router` |")
    )
    return " ".join(row.split())


def test_the_role_asks_the_workers_for_their_model_info():
    assert "/get_model_info" in (TASKS / "given_workers.yml").read_text(encoding="utf-8")
    assert "/get_model_info" in (TASKS / "health.yml").read_text(encoding="utf-8")


def test_the_router_row_says_the_workers_are_asked():
    row = _router_row()
    assert "cannot be checked" not in row, row
    assert row.count("`/get_model_info`") >= 2, row
