"""Where kt_python_env checks out a profile's git sources, read from the role and the profile file themselves
(not from ktinfra): kt_python_env_src_dir's default / the name of the source cloned from a repository."""

from __future__ import annotations

from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]


def src_dir() -> str:
    defaults = yaml.safe_load((REPO / "roles" / "kt_python_env" / "defaults" / "main.yml").read_text())
    return defaults["kt_python_env_src_dir"]


def checkout(repository: str, root: str | None = None, profile: str = "kt-0.4-autodl") -> str:
    """roles/kt_python_env/tasks/pip.yml's dest, {{ kt_python_env_src_dir }}/{{ item.name }}, of the source
    cloned from github.com/<owner>/<repository>.git."""
    data = yaml.safe_load((REPO / "ktinfra" / "data" / "profiles" / f"{profile}.yaml").read_text())
    names = [
        source["name"]
        for env in data["envs"].values()
        for source in env.get("git") or []
        if source["repo"].removesuffix(".git").endswith(f"/{repository}")
    ]
    assert len(names) == 1, (repository, names)
    return f"{root or src_dir()}/{names[0]}"
