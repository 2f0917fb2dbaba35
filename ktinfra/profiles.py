"""Stack profiles: one YAML file per KT stack generation under ktinfra/data/profiles/.

Versions are data, not code: roles, image builds and the planner read pins from here.
"""

from __future__ import annotations

import datetime
import math
import re
import reprlib
from pathlib import Path, PurePosixPath

import yaml

PROFILE_DIR = Path(__file__).parent / "data" / "profiles"
DEFAULT_PROFILE = "kt-0.7"
# The shipped profile of the legacy stack (ktransformers 0.4.x, sglang fork and LLaMA-Factory from git).
LEGACY_PROFILE = "kt-0.4-autodl"
# Where kt_python_env checks out a profile's git sources: SRC_DIR/<the source's name> (kt_python_env_src_dir's
# default). render train (LLaMA-Factory's kt_optimize_rules), render lora-convert and `ktinfra lora` (the
# sglang fork's convert_lora.py) find the checkouts through checkout_dir, so there is one layout.
SRC_DIR = "/opt/kt/src"
GENERATIONS = ("current", "legacy")
# A profile is a few KB: bounds on what a site's file may hold before it is parsed and walked.
MAX_PROFILE_BYTES = 1 << 20
MAX_DEPTH = 32
MAX_VALUES = 100_000
# names that become directories, image tags and build folders
_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")
_MIN_VERSION = re.compile(r"\d+(\.\d+)*")
_SHA256 = re.compile(r"[0-9a-f]{64}")
# a PEP 440 version as a wheel file name holds it: no "-" (the name's separator), no "/"
_WHEEL_VERSION = re.compile(r"v?[0-9][0-9A-Za-z.!+_]*")
_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = 80


class UnknownProfileError(ValueError):
    pass


def list_profiles() -> list[str]:
    return sorted(p.stem for p in PROFILE_DIR.glob("*.yaml"))


def is_profile_file(name: str) -> bool:
    """Whether `name` is a site's profile file (a path) rather than a shipped profile's name. kt_common's
    ktinfra_site_profile filter answers the same for the roles (a test keeps them equal)."""
    return name.endswith((".yaml", ".yml"))


def load_profile(name: str = DEFAULT_PROFILE) -> dict:
    """A shipped profile by name, or a site's own profile file when `name` is a path ending in .yaml.

    Every value is checked to be what the readers of the profile expect (strings where a string is read,
    whole numbers of bytes, ...) and the whole file to be plain JSON data: no YAML dates, binary, sets,
    NaN/inf or non-string keys, at most MAX_DEPTH levels deep; anything else is an UnknownProfileError."""
    if is_profile_file(name):
        path = Path(name)
        if not path.is_file():
            missing = "is not a regular file" if path.exists() else "does not exist"
            raise UnknownProfileError(f"stack profile file {name} {missing}")
        expected = None
    else:
        # shipped names in any case, as --model and --cpu-format take theirs (KT-0.7 is kt-0.7)
        name = next((known for known in list_profiles() if known.lower() == name.lower()), name)
        path = PROFILE_DIR / f"{name}.yaml"
        if not path.is_file() and Path(name).exists():  # a file meant as a profile, but not *.yaml/*.yml
            raise UnknownProfileError(
                f"stack profile file {name}: a profile file must end in .yaml or .yml "
                f"(shipped profiles: {', '.join(list_profiles())})"
            )
        if not path.is_file():
            raise UnknownProfileError(f"unknown stack profile {name!r}; known: {', '.join(list_profiles())}")
        expected = name
    data = _read_yaml(path) or {}
    where = f"profile file {path}"
    if not isinstance(data, dict) or data.get("generation") not in GENERATIONS or not data.get("name"):
        raise UnknownProfileError(f"profile file {path} must set name and generation: current|legacy")
    if not isinstance(data["name"], str) or not _SAFE_NAME.fullmatch(data["name"]):
        raise UnknownProfileError(
            f"{where}: name must be letters, digits and . _ + - (it names images and build folders), "
            f"got {_show(data['name'])}"
        )
    if expected and data["name"] != expected:
        raise UnknownProfileError(f"profile file {path} must set name: {expected}")
    python_versions(data)
    _check_fields(data, where)
    _check_envs(data, path)
    _check_plain(data, where)
    return data


def _read_yaml(path: Path) -> object:
    """The YAML document of `path`: read as UTF-8, at most MAX_PROFILE_BYTES and MAX_DEPTH levels deep
    (checked on the parser's events, which recurse no Python frames, before the recursive composer runs)."""
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_PROFILE_BYTES + 1)
        if len(raw) > MAX_PROFILE_BYTES:
            raise UnknownProfileError(f"profile file {path} is larger than {MAX_PROFILE_BYTES} bytes")
        text = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise UnknownProfileError(f"profile file {path} cannot be read: {error}") from error
    try:
        depth = 0
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_DEPTH:
                    line = event.start_mark.line + 1 if event.start_mark else "?"
                    raise _TooDeep(
                        f"profile file {path} nests more than {MAX_DEPTH} levels deep (line {line})"
                    )
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
        return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 (a SafeLoader subclass)
    except _TooDeep as error:
        raise UnknownProfileError(str(error)) from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise UnknownProfileError(f"profile file {path} is not valid YAML{where}: {problem}") from error
    except RecursionError:
        raise UnknownProfileError(f"profile file {path} nests too deeply to be read") from None
    except (ValueError, OverflowError) as error:  # a YAML value Python cannot hold: 2024-02-30, 10**5000
        raise UnknownProfileError(f"profile file {path} has a value that cannot be read: {error}") from error


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key given twice in one mapping (YAML would keep the last without a word)."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            # `<<: *base` (a YAML merge key) has no constructor of its own: the SafeLoader merges it below,
            # and the mapping's own keys override what it brings in
            merge = key_node.tag == "tag:yaml.org,2002:merge"
            key = "<<" if merge else self.construct_object(key_node, deep=deep)
            if isinstance(key, (str, int, float, bool)) or key is None:
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"key {key!r} is given twice in one mapping", key_node.start_mark
                    )
                seen.add(key)
        return super().construct_mapping(node, deep=deep)


class _TooDeep(Exception):
    pass


def _show(value: object) -> str:
    """A value as a message shows it: dates as the YAML wrote them, long values shortened."""
    if isinstance(value, datetime.date):
        return f"the date {value.isoformat()}"
    return _REPR.repr(value)


def _type_error(where: str, key: str, wanted: str, value: object) -> UnknownProfileError:
    hint = (
        " (quote it in the YAML)"
        if "string" in wanted and isinstance(value, (int, float, datetime.date))
        else ""
    )
    return UnknownProfileError(f"{where}: {key} must be {wanted}, got {_show(value)}{hint}")


def _check_string(
    where: str,
    mapping: dict,
    field: str,
    key: str,
    *,
    pattern: re.Pattern | None = None,
    wanted: str = "a string",
) -> None:
    value = mapping.get(field)
    if value is None:
        return
    if not isinstance(value, str) or not value or (pattern is not None and not pattern.fullmatch(value)):
        raise _type_error(where, key, wanted, value)


def _check_string_list(where: str, mapping: dict, field: str, key: str, *, required: bool = False) -> None:
    value = mapping.get(field)
    if value is None and not required:
        return
    if not isinstance(value, list) or (required and not value) or not all(isinstance(v, str) for v in value):
        raise _type_error(
            where, key, "a non-empty list of strings" if required else "a list of strings", value
        )


def _check_fields(profile: dict, where: str) -> None:
    """The top-level settings other code reads: planner (glibc_min, kernel_min), model store (upstream.ref),
    installer (pip), image build (image.root_volume_gb), `profile list` (description)."""
    _check_string(where, profile, "description", "description")
    for field in ("glibc_min", "kernel_min", "nvidia_driver_min"):
        _check_string(
            where, profile, field, field, pattern=_MIN_VERSION, wanted='a version string like "2.35"'
        )
    for field, inner in (("upstream", ("repo", "ref")), ("pip", ("index_url",))):
        value = profile.get(field)
        if value is None:
            continue
        if not isinstance(value, dict):
            raise _type_error(where, field, f"a mapping with {', '.join(inner)}", value)
        for name in inner:
            _check_string(where, value, name, f"{field}.{name}")
    _check_string_list(where, profile.get("pip") or {}, "extra_index_urls", "pip.extra_index_urls")
    image_settings(profile, where)


def image_settings(profile: dict, where: str) -> dict:
    """The profile's image mapping ({} when unset), its root_volume_gb a whole number of GB above 0 or null;
    read by the image build (ktinfra.image.spec.root_volume_gb) too."""
    image = profile.get("image")
    if image is not None and not isinstance(image, dict):
        raise UnknownProfileError(f"{where}: image must be a mapping, got {_show(image)}")
    size = (image or {}).get("root_volume_gb")
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size <= 0):
        raise UnknownProfileError(
            f"{where}: image.root_volume_gb must be a whole number of GB above 0, not {_show(size)}"
        )
    return image or {}


# Each list field of an env and the string keys every entry of it needs (None: the entries are strings).
_ENV_LISTS = {
    "packages": None,
    "os_packages": None,  # OS packages its git sources build with (kt_python_env installs them first)
    "exclude": None,
    "wheels": ("name", "file"),
    "git": ("name", "repo"),
    "conda_patches": ("packages",),
}
# The type of every setting of an entry that the installers read: "str", "strs" (a list of strings), "bool".
_ENTRY_FIELDS = {
    "wheels": {
        "name": "str",
        "file": "str",
        "version": "version",  # the wheel's METADATA version, where its file name says another
        "url": "str",
        "path": "str",
        "sha256": "sha256",
    },
    "git": {
        "name": "str",
        "repo": "str",
        "ref": "str",
        "subdir": "str",
        "editable": "bool",
        "extras": "strs",
        "host_cpu": "bool",  # built for the CPU it is built on (-march=native): never copied to another host
    },
    "conda_patches": {"channel": "str", "packages": "strs"},
}


def _check_envs(profile: dict, path: Path) -> None:
    """envs must map env keys to settings whose lists hold what env_spec and the installers read."""
    envs = profile.get("envs")
    if envs is None:
        return
    where = f"profile file {path}"
    if not isinstance(envs, dict):
        raise UnknownProfileError(f"{where}: envs must map env keys ({', '.join(ENV_KEYS)}) to env settings")
    seen: dict[str, str] = {}
    for key, env in envs.items():
        _check_env(where, key, env)
        if env["name"] in seen:  # one directory, one image env: the second would silently replace the first
            raise UnknownProfileError(
                f"{where}: envs.{seen[env['name']]} and envs.{key} are both named {env['name']!r} "
                "(the name is the env's directory)"
            )
        seen[env["name"]] = key
    for key, env in envs.items():
        others = set(envs) - {key}
        unknown = sorted(set(env.get("download_shared_bytes") or {}) - others)
        if unknown:
            raise UnknownProfileError(
                f"{where}: envs.{key}.download_shared_bytes names {', '.join(unknown)}, not another env of "
                f"this profile ({', '.join(k for k in envs if k != key)})"
            )


def _check_env(where: str, key: object, env: object) -> None:
    """One env: its key, name, lists and sizes have the types env_spec and the installers read."""
    if not isinstance(key, str) or not key:
        raise UnknownProfileError(
            f"{where}: env key {_show(key)} of envs must be a string such as {', '.join(ENV_KEYS)} (quote it)"
        )
    if not isinstance(env, dict) or not isinstance(env.get("name"), str) or not env["name"]:
        raise UnknownProfileError(f"{where}: envs.{key} must be a mapping with a name")
    if not _SAFE_NAME.fullmatch(env["name"]):
        raise UnknownProfileError(
            f"{where}: envs.{key}.name must be letters, digits and . _ + - (it names the env's directory), "
            f"got {_show(env['name'])}"
        )
    for field, needs in _ENV_LISTS.items():
        items = env.get(field)
        if items is None:
            continue
        if not isinstance(items, list):
            raise UnknownProfileError(f"{where}: envs.{key}.{field} must be a list")
        for index, item in enumerate(items):
            if needs is None and not isinstance(item, str):
                raise UnknownProfileError(f"{where}: envs.{key}.{field} must list strings, got {_show(item)}")
            if needs is not None and not (isinstance(item, dict) and all(item.get(n) for n in needs)):
                raise UnknownProfileError(
                    f"{where}: each of envs.{key}.{field} must be a mapping with {', '.join(needs)}"
                )
            for name, kind in _ENTRY_FIELDS.get(field, {}).items():
                at = f"envs.{key}.{field}[{index}].{name}"
                value = item.get(name)
                if kind == "strs":
                    _check_string_list(where, item, name, at, required=name in needs)
                elif kind == "bool" and value is not None and not isinstance(value, bool):
                    raise _type_error(where, at, "true or false", value)
                elif kind == "version":  # it becomes part of the wheel's file name in the wheelhouse
                    _check_string(
                        where, item, name, at, pattern=_WHEEL_VERSION, wanted='a version like "2.8.3"'
                    )
                elif kind == "sha256":
                    _check_string(
                        where, item, name, at, pattern=_SHA256, wanted="64 lowercase hex digits or null"
                    )
                elif kind == "str":
                    _check_string(where, item, name, at)
    for field in ("disk_bytes", "download_bytes"):
        value = env.get(field, 0)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise UnknownProfileError(f"{where}: envs.{key}.{field} must be a whole number of bytes >= 0")
    # of this env's download, the bytes another env of the profile downloads too (the same torch and its
    # CUDA wheels): installed in one run, the second env's pip wheel takes them from the wheelhouse
    shared = env.get("download_shared_bytes")
    valid = isinstance(shared, dict) and all(
        isinstance(k, str) and not isinstance(v, bool) and isinstance(v, int) and v >= 0
        for k, v in shared.items()
    )
    if shared is not None and not valid:
        raise UnknownProfileError(
            f"{where}: envs.{key}.download_shared_bytes must map other env keys to whole numbers of "
            "bytes >= 0"
        )


def _check_plain(data: dict, where: str) -> None:
    """The whole profile is JSON data (`profile show --json`, the install check's JSON, ansible read it):
    mappings with string keys, lists, strings, finite numbers, true/false, null. Iterative, and bounded in
    depth and in values visited, so YAML aliases that expand (or refer to themselves) cannot run away."""
    stack: list[tuple[object, str, int]] = [(data, "", 0)]
    visited = 0
    while stack:
        value, key, depth = stack.pop()
        visited += 1
        if visited > MAX_VALUES:
            raise UnknownProfileError(f"{where} holds more than {MAX_VALUES} values (YAML aliases?)")
        if depth > MAX_DEPTH:
            raise UnknownProfileError(
                f"{where}: {_short_key(key)} nests more than {MAX_DEPTH} levels deep (YAML aliases?)"
            )
        if isinstance(value, dict):
            for child_key, child in value.items():
                if not isinstance(child_key, str):
                    inside = _short_key(key) or "the top level"
                    raise UnknownProfileError(
                        f"{where}: key {_show(child_key)} in {inside} must be a string (quote it)"
                    )
                stack.append((child, f"{key}.{child_key}" if key else child_key, depth + 1))
        elif isinstance(value, list):
            stack.extend((child, f"{key}[{index}]", depth + 1) for index, child in enumerate(value))
        elif isinstance(value, float) and not math.isfinite(value):
            raise UnknownProfileError(
                f"{where}: {_short_key(key)} is {value!r}: profile numbers must be finite"
            )
        elif isinstance(value, datetime.date):
            raise UnknownProfileError(
                f"{where}: {_short_key(key)} is {_show(value)}, a YAML timestamp: profile values are text, "
                f'numbers, true/false, lists and mappings; quote it ("{value.isoformat()}") if it is text'
            )
        elif not (value is None or isinstance(value, (str, int, float))):
            kind = _YAML_KINDS.get(type(value), type(value).__name__)
            raise UnknownProfileError(
                f"{where}: {_short_key(key)} is a YAML {kind} ({_show(value)}): profile values are text, "
                "numbers, true/false, lists and mappings"
            )


_YAML_KINDS = {bytes: "!!binary", set: "!!set", tuple: "!!omap/!!pairs entry"}


def _short_key(key: str) -> str:
    """A key path for a message: the deep middle of a[0][0]... left out."""
    return key if len(key) <= 80 else f"{key[:40]}...{key[-30:]}"


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
_PIN = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?\s*===?\s*([^\s;#=][^\s;#]*)")
_WHEEL_NAME = re.compile(r"^([A-Za-z0-9_.]+)-([^-]+)-")


def normalize(name: str) -> str:
    """PEP 503 name normalisation: `Flash_Attn` and `flash-attn` are one distribution."""
    return re.sub(r"[-_.]+", "-", name).lower()


def wheel_version(filename: str) -> str:
    match = _WHEEL_NAME.match(Path(filename).name)
    if not match or not filename.endswith(".whl"):
        raise ValueError(f"{filename!r} is not a wheel file name (name-version-...-platform.whl)")
    return match.group(2)


def wheelhouse_file(filename: str, version: str) -> str:
    """The name a wheel file is kept under in the wheelhouse: its own, with `version` (what the wheel's
    METADATA holds) where the name says another. pip and uv take a --find-links wheel's version from its name
    and discard a wheel whose METADATA differs ("has inconsistent version"): flash-attn's release wheels are
    built as 2.8.3 and renamed flash_attn-2.8.3+cu12torch2.7cxx11abiTRUE-... afterwards, so `flash-attn==` any
    version found nothing to install. Only the file's last path part: it stays inside the wheelhouse."""
    name = Path(filename).name
    dist, named, rest = name.split("-", 2)
    return name if named == version else f"{dist}-{version}-{rest}"


def wheel_entry(wheel: dict, version: str) -> dict:
    """A profile wheel with the version it installs as and the name it is kept under in the wheelhouse."""
    return dict(wheel, version=version, wheelhouse_file=wheelhouse_file(wheel["file"], version))


def env_spec(profile: dict, key: str) -> dict:
    """One env of a profile with every optional list present, wheels pinned as name==version."""
    envs = profile.get("envs") or {}
    if not isinstance(envs, dict) or key not in envs:
        known = ", ".join(str(k) for k in envs) if isinstance(envs, dict) else "none"
        raise UnknownProfileError(f"profile {profile.get('name')} has no env {key!r}; it has: {known}")
    _check_env(f"profile {profile.get('name')}", key, envs[key])
    env = dict(envs[key])
    env["key"] = key
    for field in ("packages", "os_packages", "exclude", "wheels", "git", "conda_patches"):
        env[field] = list(env.get(field) or [])
    env["wheels"] = [wheel_entry(w, w.get("version") or wheel_version(w["file"])) for w in env["wheels"]]
    env["git"] = [_git_source(g) for g in env["git"]]
    env.setdefault("disk_bytes", 0)
    env.setdefault("download_bytes", 0)
    env["download_shared_bytes"] = dict(env.get("download_shared_bytes") or {})
    return env


def shared_download_bytes(env: dict, before: list[dict]) -> int:
    """Bytes of `env`'s download (env_spec dicts) that an env installed before it in the same run put in the
    wheelhouse: kt_python_env fills it with `pip wheel --find-links <wheelhouse>`, so the second env of
    kt-0.7 downloads torch 2.9.1 and its CUDA wheels no more. The profile says how much two envs share
    (envs.X.download_shared_bytes: {Y: bytes}, on either of the two); the largest share with one earlier env,
    never more than either env's download. envcheck's disk check and the image's root volume use it."""
    return max(
        (
            min(
                env["download_bytes"],
                other["download_bytes"],
                max(
                    env["download_shared_bytes"].get(other["key"], 0),
                    other["download_shared_bytes"].get(env["key"], 0),
                ),
            )
            for other in before
        ),
        default=0,
    )


def checkout_dir(repository: str, src_dir: str = SRC_DIR, profile: str = LEGACY_PROFILE) -> str:
    """Where kt_python_env checks out `profile`'s git source cloned from `repository` (the last part of its
    URL, e.g. LLaMA-Factory): src_dir/<the source's name>, as roles/kt_python_env/tasks/pip.yml clones it."""
    data = load_profile(profile)
    for key in data.get("envs") or {}:
        for source in env_spec(data, key)["git"]:
            if _repository_name(source["repo"]) == repository.lower():
                return str(PurePosixPath(src_dir) / source["name"])
    raise UnknownProfileError(f"profile {data['name']} checks out no git source of {repository}")


def _repository_name(url: str) -> str:
    """https://github.com/hiyouga/LLaMA-Factory.git -> llama-factory"""
    return url.rstrip("/").removesuffix(".git").rsplit("/", 1)[-1].lower()


def _git_source(entry: dict) -> dict:
    """A git source with every setting the installer reads: ansible's git checks out HEAD without a ref, pip
    installs the checkout's top folder, editable, without extras."""
    return dict(entry, ref=entry.get("ref") or "HEAD", subdir=entry.get("subdir") or "",
                editable=entry.get("editable", True), extras=list(entry.get("extras") or []))  # fmt: skip


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
    for line in text.removeprefix("\ufeff").splitlines():  # a freeze saved by a Windows editor has a BOM
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


# PEP 440, enough for `==` between a pin and an installed version (packaging is not a dependency here):
# the epoch, the release with its trailing zeros dropped (2.0 == 2.0.0), the rest in its normal spelling
_PEP440 = re.compile(r"v?(?:(\d+)!)?(\d+(?:\.\d+)*)([^+]*)(?:\+(.+))?", re.IGNORECASE)
_PEP440_WORDS = {
    "preview": "rc",
    "alpha": "a",
    "beta": "b",
    "pre": "rc",
    "c": "rc",
    "rev": "post",
    "r": "post",
}


def _pep440_parts(version: str) -> tuple | None:
    match = _PEP440.fullmatch(version.strip())
    if not match:
        return None
    epoch, release, rest, local = match.groups()
    numbers = [int(n) for n in release.split(".")]
    while len(numbers) > 1 and numbers[-1] == 0:
        numbers.pop()
    rest = re.sub(r"\d+", lambda m: str(int(m.group())), rest.lower())
    rest = re.sub(r"^[-_.]?(\d+)", r"post\1", rest)  # 1.0-1 is 1.0.post1
    for word, normal in _PEP440_WORDS.items():
        rest = re.sub(rf"(?<![a-z]){word}(?![a-z])", normal, rest)
    rest = re.sub(r"[-_.]", "", rest)
    local = local and re.sub(r"\d+", lambda m: str(int(m.group())), re.sub(r"[-_]", ".", local.lower()))
    return int(epoch or 0), tuple(numbers), rest, local


def _same_version(installed: str, pinned: str) -> bool:
    """PEP 440 `==`: 2.0 is 2.0.0, and a pin without a local label (`torch==2.9.1`) is met by any local
    build of that version (`2.9.1+cu128` from a CUDA index)."""
    have, want = _pep440_parts(installed), _pep440_parts(pinned)
    if have is None or want is None:
        return installed.strip() == pinned.strip()
    return have[:3] == want[:3] and (want[3] is None or have[3] == want[3])


# the userinfo and the query of an http(s) URL, where a git source or a `name @ URL` wheel keeps its token
# (the rule of kt_common's ktinfra_url_secrets_hidden filter, which the roles use on what they print)
_URL_USERINFO = re.compile(r"(?i)(https?://)[^/\"\s?#]*@")
_URL_QUERY = re.compile(r"(?i)(https?://[^\"\s?#]*)[?][^\"\s#]*")


def without_url_secrets(text: str) -> str:
    """`text` with every http(s) URL's user:token@ and ?query left out."""
    return _URL_QUERY.sub(r"\1", _URL_USERINFO.sub(r"\1", text))


def freeze_drift(env: dict, freeze_text: str) -> list[str]:
    """Problems when the installed env differs from the profile: wrong pin, missing, or excluded present. The
    URLs they name are shown without their secrets: kt_python_env prints these problems in its failure."""
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
    return [without_url_secrets(problem) for problem in problems]
