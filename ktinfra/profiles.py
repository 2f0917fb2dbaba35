"""Stack profiles: one YAML file per KT stack generation under ktinfra/data/profiles/.

Versions are data, not code: roles, image builds and the planner read pins from here.
"""

from __future__ import annotations

from pathlib import Path

import yaml

PROFILE_DIR = Path(__file__).parent / "data" / "profiles"
DEFAULT_PROFILE = "kt-0.7"
GENERATIONS = ("current", "legacy")


class UnknownProfileError(ValueError):
    pass


def list_profiles() -> list[str]:
    return sorted(p.stem for p in PROFILE_DIR.glob("*.yaml"))


def load_profile(name: str = DEFAULT_PROFILE) -> dict:
    path = PROFILE_DIR / f"{name}.yaml"
    if not path.is_file():
        raise UnknownProfileError(f"unknown stack profile {name!r}; known: {', '.join(list_profiles())}")
    data = yaml.safe_load(path.read_text())
    if data.get("name") != name or data.get("generation") not in GENERATIONS:
        raise UnknownProfileError(f"profile file {path} must set name: {name} and generation: current|legacy")
    return data
