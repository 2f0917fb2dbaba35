"""Stack profiles: one YAML file per KT stack generation under ktinfra/data/profiles/.

Versions are data, not code: roles, image builds and the planner read pins from here.
"""

from __future__ import annotations

import re
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
    """A shipped profile by name, or a site's own profile file when `name` is a path ending in .yaml."""
    if name.endswith((".yaml", ".yml")):
        path = Path(name)
        if not path.is_file():
            raise UnknownProfileError(f"stack profile file {name} does not exist")
        expected = None
    else:
        path = PROFILE_DIR / f"{name}.yaml"
        if not path.is_file():
            raise UnknownProfileError(f"unknown stack profile {name!r}; known: {', '.join(list_profiles())}")
        expected = name
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise UnknownProfileError(f"profile file {path} is not valid YAML{where}: {problem}") from error
    except (OSError, UnicodeDecodeError) as error:
        raise UnknownProfileError(f"profile file {path} cannot be read: {error}") from error
    if not isinstance(data, dict) or data.get("generation") not in GENERATIONS or not data.get("name"):
        raise UnknownProfileError(f"profile file {path} must set name and generation: current|legacy")
    if expected and data["name"] != expected:
        raise UnknownProfileError(f"profile file {path} must set name: {expected}")
    python_versions(data)
    _check_envs(data, path)
    return data


# Each list field of an env and the string keys every entry of it needs (None: the entries are strings).
_ENV_LISTS = {
    "packages": None,
    "exclude": None,
    "wheels": ("name", "file"),
    "git": ("name", "repo"),
    "conda_patches": ("packages",),
}


def _check_envs(profile: dict, path: Path) -> None:
    """envs must map env keys to settings whose lists hold what env_spec and the installers read."""
    envs = profile.get("envs")
    if envs is None:
        return
    where = f"profile file {path}"
    if not isinstance(envs, dict):
        raise UnknownProfileError(f"{where}: envs must map env keys ({', '.join(ENV_KEYS)}) to env settings")
    for key, env in envs.items():
        if not isinstance(env, dict) or not isinstance(env.get("name"), str) or not env["name"]:
            raise UnknownProfileError(f"{where}: envs.{key} must be a mapping with a name")
        for field, needs in _ENV_LISTS.items():
            items = env.get(field) or []
            if not isinstance(items, list):
                raise UnknownProfileError(f"{where}: envs.{key}.{field} must be a list")
            for item in items:
                if needs is None and not isinstance(item, str):
                    raise UnknownProfileError(f"{where}: envs.{key}.{field} must list strings, got {item!r}")
                if needs is not None and not (isinstance(item, dict) and all(item.get(n) for n in needs)):
                    raise UnknownProfileError(
                        f"{where}: each of envs.{key}.{field} must be a mapping with {', '.join(needs)}"
                    )
        for field in ("disk_bytes", "download_bytes"):
            value = env.get(field, 0)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise UnknownProfileError(f"{where}: envs.{key}.{field} must be a whole number of bytes >= 0")


def python_versions(profile: dict) -> list[str]:
    """The Python versions a profile installs with, preferred first (`python: "3.11"` or a list)."""
    wanted = profile.get("python")
    versions = [wanted] if isinstance(wanted, str) else wanted if isinstance(wanted, list) else []
    if not versions or not all(isinstance(v, str) and re.fullmatch(r"3\.\d+", v) for v in versions):
        raise UnknownProfileError(
            f'profile {profile.get("name")}: python must be a version like "3.11" or a list of them'
        )
    return versions


ENV_KEYS = ("inference", "sft")
_PIN = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?\s*==\s*([^\s;#]+)")
_WHEEL_NAME = re.compile(r"^([A-Za-z0-9_.]+)-([^-]+)-")


def normalize(name: str) -> str:
    """PEP 503 name normalisation: `Flash_Attn` and `flash-attn` are one distribution."""
    return re.sub(r"[-_.]+", "-", name).lower()


def wheel_version(filename: str) -> str:
    match = _WHEEL_NAME.match(Path(filename).name)
    if not match or not filename.endswith(".whl"):
        raise ValueError(f"{filename!r} is not a wheel file name (name-version-...-platform.whl)")
    return match.group(2)


def env_spec(profile: dict, key: str) -> dict:
    """One env of a profile with every optional list present, wheels pinned as name==version."""
    envs = profile.get("envs") or {}
    if key not in envs:
        raise UnknownProfileError(f"profile {profile['name']} has no env {key!r}; it has: {', '.join(envs)}")
    env = dict(envs[key])
    env["key"] = key
    for field in ("packages", "exclude", "wheels", "git", "conda_patches"):
        env[field] = list(env.get(field) or [])
    env["wheels"] = [dict(w, version=w.get("version") or wheel_version(w["file"])) for w in env["wheels"]]
    env.setdefault("disk_bytes", 0)
    env.setdefault("download_bytes", 0)
    return env


def pins(env: dict) -> dict[str, str]:
    """Normalised distribution name -> exact version the env must end up with."""
    found = {}
    for requirement in env["packages"]:
        match = _PIN.match(requirement)
        if match:
            found[normalize(match.group(1))] = match.group(3)
    for wheel in env["wheels"]:
        found[normalize(wheel["name"])] = wheel["version"]
    return found


def parse_freeze(text: str) -> dict[str, str]:
    """`pip freeze` output -> {normalised name: version}; editable/VCS lines map to their reference."""
    installed = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("-e "):
            egg = re.search(r"[#&]egg=([A-Za-z0-9._-]+)", line)
            if egg:
                installed[normalize(egg.group(1))] = line[3:]
            continue
        if " @ " in line:
            name, ref = line.split(" @ ", 1)
            installed[normalize(name)] = ref.strip()
            continue
        match = _PIN.match(line)
        if match:
            installed[normalize(match.group(1))] = match.group(3)
    return installed


def _same_version(installed: str, pinned: str) -> bool:
    """PEP 440 `==`: a pin without a local label (`torch==2.7.1`) matches `2.7.1+cu128`."""
    return installed == pinned or ("+" not in pinned and installed.split("+", 1)[0] == pinned)


def freeze_drift(env: dict, freeze_text: str) -> list[str]:
    """Problems when the installed env differs from the profile: wrong pin, missing, or excluded present."""
    installed = parse_freeze(freeze_text)
    problems = []
    for name, version in sorted(pins(env).items()):
        if name not in installed:
            problems.append(f"{env['name']}: {name}=={version} is pinned by the profile but not installed")
        elif not _same_version(installed[name], version):
            problems.append(f"{env['name']}: {name} is {installed[name]}, the profile pins {version}")
    for git in env["git"]:
        if normalize(git["name"]) not in installed:
            problems.append(f"{env['name']}: {git['name']} from {git['repo']} is not installed")
    for name in env["exclude"]:
        if normalize(name) in installed:
            problems.append(
                f"{env['name']}: {name} must not be in this env, found {installed[normalize(name)]}"
            )
    return problems
