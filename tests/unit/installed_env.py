"""An env as kt_python_env leaves it after an install that finished: its pip freeze, and the requirements it
installed both as written and as recorded installed (roles/kt_python_env/tasks/env.yml), rendered from the
role's own template as its template task does (Jinja2 with trim_blocks, ansible_managed at its default)."""

from __future__ import annotations

from pathlib import Path

import jinja2
import yaml

from ktinfra import profiles

ROLE = Path(__file__).resolve().parents[2] / "roles" / "kt_python_env"
STATE_FILES = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())["kt_python_env_state_files"]


def role_requirements(profile: dict, key: str) -> str:
    """The requirements file kt_python_env writes for env `key` of `profile`."""
    template = jinja2.Environment(
        trim_blocks=True, keep_trailing_newline=True, undefined=jinja2.StrictUndefined
    )
    return template.from_string((ROLE / "templates" / "requirements.txt.j2").read_text()).render(
        ansible_managed="Ansible managed",
        kt_python_env_install={"profile": profile["name"]},
        kt_python_env_spec=profiles.env_spec(profile, key),
    )


def record_install(prefix: Path, profile: dict, key: str, freeze: str | None = None) -> None:
    """Records at `prefix` of installing env `key` of `profile` (its pins as the freeze, or `freeze`)."""
    prefix.mkdir(parents=True, exist_ok=True)
    text = role_requirements(profile, key)
    (prefix / STATE_FILES["requirements"]).write_text(text)
    (prefix / STATE_FILES["installed"]).write_text(text)
    pinned = "".join(f"{n}=={v}\n" for n, v in profiles.pins(profiles.env_spec(profile, key)).items())
    (prefix / STATE_FILES["freeze"]).write_text(pinned if freeze is None else freeze)
