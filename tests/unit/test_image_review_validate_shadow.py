"""Fresh-eyes review of images/scripts/validate.py: a distribution found twice on sys.path.

The probe filled its {name: info} with every distribution importlib.metadata lists, so of two copies of a
distribution (a stale dist-info left by an interrupted uninstall, a second site directory on the path) the
LAST one won, while Python imports, and importlib.metadata.version reports, the FIRST. A pin was checked
against the copy that is never imported: an env holding foo 1.0 passed `foo==2.0` because a shadowed foo 2.0
sat later on the path. The first copy is now the one checked (and listed in packages.json).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

SCRIPT = Path(__file__).parents[2] / "images" / "scripts" / "validate.py"
_spec = importlib.util.spec_from_file_location("validate_review_shadow", SCRIPT)
validate = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(validate)

DIST = "kt_review_shadow"


def _site(root: Path, version: str) -> Path:
    """A site directory holding DIST at `version`: its module and a dist-info as pip leaves it."""
    root.mkdir()
    (root / f"{DIST}.py").write_text(f"VERSION = {version!r}\n")
    info = root / f"{DIST}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {DIST}\nVersion: {version}\n")
    (info / "top_level.txt").write_text(f"{DIST}\n")
    (info / "RECORD").write_text(f"{DIST}.py,,\n{info.name}/METADATA,,\n")
    return root


def _check(tmp_path, monkeypatch, pin: str) -> tuple[list[str], dict]:
    first = _site(tmp_path / "first", "1.0")
    later = _site(tmp_path / "later", "2.0")
    monkeypatch.setenv("PYTHONPATH", f"{first}:{later}")
    problems: list[str] = []
    env = validate.check_env("e", {"python": sys.executable, "pins": [pin]}, {}, problems)
    return problems, env


def test_a_pin_met_only_by_a_shadowed_copy_fails(tmp_path, monkeypatch):
    problems, _ = _check(tmp_path, monkeypatch, f"{DIST}==2.0")
    assert problems == [f"env e: {DIST.replace('_', '-')} is 1.0, profile pins 2.0"]


def test_the_imported_copy_is_checked_and_listed(tmp_path, monkeypatch):
    problems, env = _check(tmp_path, monkeypatch, f"{DIST}==1.0")
    assert problems == []
    listed = [p for p in env["packages"] if p["name"] == DIST]
    assert [p["version"] for p in listed] == ["1.0"]
    assert env["imports"] == {DIST: "ok"}
