"""Before installing a stack profile's Python envs on this host: resolve where each env goes and find
every reason the install would fail (missing interpreter, conda needed, wheel sha256, disk) up front."""

from __future__ import annotations

import configparser
import email.parser
import json
import os
import re
import shutil
import urllib.parse
import zipfile
import zlib
from pathlib import Path

from packaging import tags
from packaging.markers import InvalidMarker, Marker, default_environment
from packaging.tags import Tag
from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import Version

from ktinfra.digest import sha256_of
from ktinfra.profiles import (
    _same_version,
    env_spec,
    normalize,
    pins,
    python_versions,
    shared_download_bytes,
    wheel_entry,
    wheel_version,
)

CONDA_CANDIDATES = ("/root/miniconda3/bin/conda", "/opt/conda/bin/conda", "/root/anaconda3/bin/conda")
MANAGERS = ("auto", "conda", "venv")
# kt_python_env_state_files (roles/kt_python_env/vars/main.yml): what the role keeps next to an env
FREEZE_FILE = "ktinfra-freeze.txt"
REQUIREMENTS_FILE = "ktinfra-requirements.txt"
INSTALLED_FILE = "ktinfra-requirements.installed.txt"  # the requirements of the last install that finished


def _executable_file(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)  # a directory is "executable" too


def find_conda(conda_exe: str | None) -> str | None:
    if conda_exe is not None:
        return conda_exe if _executable_file(conda_exe) else None
    found = shutil.which("conda")
    return found or next((c for c in CONDA_CANDIDATES if _executable_file(c)), None)


def parse_wheel_override(text: str) -> tuple[str, dict]:
    """`NAME=PATH_OR_URL[#sha256=HEX]` -> (NAME, {path|url, sha256})."""
    name, sep, location = text.partition("=")
    if not sep or not name or not location:
        raise ValueError(f"wheel override {text!r} must look like NAME=PATH_OR_URL#sha256=HEX")
    location, _, fragment = location.partition("#sha256=")
    key = "url" if location.startswith(("http://", "https://")) else "path"
    return name, {key: location, "sha256": fragment.lower() or None}


# What an override may set, each a string (or null: keep the profile's); --wheels-json is a few lines.
_OVERRIDE_KEYS = ("path", "url", "sha256", "file")
MAX_WHEELS_JSON_BYTES = 1 << 20


def parse_wheels_json(text: str) -> dict[str, dict]:
    """{"NAME": {"path"|"url": ..., "sha256": ...}} as Ansible passes kt_python_env_wheels."""
    if len(text) > MAX_WHEELS_JSON_BYTES:
        raise ValueError(f"wheel overrides JSON is longer than {MAX_WHEELS_JSON_BYTES} characters")
    try:
        data = json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise ValueError(
            "wheel overrides JSON nests too deeply: it must map names to {path|url, sha256}"
        ) from None
    except ValueError as error:  # JSONDecodeError, NaN/Infinity, an integer of thousands of digits
        raise ValueError(f"wheel overrides are not valid JSON: {error}") from None
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise ValueError("wheel overrides must map each wheel name to {path|url, sha256}")
    for name, value in data.items():
        if not name:
            raise ValueError("wheel overrides: a wheel name must not be empty")
        unknown = sorted(set(value) - set(_OVERRIDE_KEYS))
        if unknown:
            raise ValueError(f"wheel override {name}: unknown keys {unknown}")
        for key, setting in value.items():
            if setting is not None and (not isinstance(setting, str) or not setting):
                raise ValueError(
                    f"wheel override {name}: {key} must be a non-empty string or null, got {_short(setting)}"
                )
    return {
        name: {k: (v.lower() if k == "sha256" and v is not None else v) for k, v in w.items()}
        for name, w in data.items()
    }


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not a JSON value")


def _short(value: object) -> str:
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _apply_overrides(wheel: dict, overrides: dict[str, dict]) -> dict:
    override = overrides.get(wheel["name"])
    if not override:
        return wheel
    for key, value in override.items():  # parse_wheel(s)_override made them; a caller's dict is checked too
        if key not in _OVERRIDE_KEYS or not (value is None or (isinstance(value, str) and value)):
            raise ValueError(f"wheel override {wheel['name']}: {key} must be a non-empty string or null")
    merged = dict(wheel)
    relocated = bool(override.get("path") or override.get("url"))
    if relocated:
        merged.update(path=None, url=None)
    merged.update({k: v for k, v in override.items() if v is not None})
    if relocated and "file" not in override:
        # a URL's file is the last part of its path, %-decoded (as pip reads it): a presigned URL's
        # ?X-Amz-Signature=... or a GitHub asset's %2B is no part of the wheel's name
        where = merged.get("path") or urllib.parse.unquote(urllib.parse.urlsplit(merged["url"]).path)
        merged["file"] = Path(where).name
    named = wheel_version(merged["file"])
    # a profile that names the version the wheel's METADATA holds where its file name says more (flash-attn's
    # release wheels: 2.8.3 inside, +cu12torch2.7cxx11abiTRUE added to the name after the build) keeps it for
    # another file of that release; before, the file name's version came back and nothing could install it
    stated = wheel["version"] != wheel_version(wheel["file"])
    release = wheel["version"].split("+", 1)[0]
    version = wheel["version"] if stated and named.split("+", 1)[0] == release else named
    return wheel_entry(merged, version)


def _wheel_problems(wheel: dict) -> list[str]:
    if not wheel.get("sha256"):
        return [
            f"wheel {wheel['name']} ({wheel['file']}) has no sha256 pin: download it, run sha256sum and pass "
            f"kt_python_env_wheels: {{{wheel['name']}: {{path: ..., sha256: ...}}}}"
        ]
    path = wheel.get("path")
    if not path:
        return [] if wheel.get("url") else [f"wheel {wheel['name']} has neither url nor path"]
    if not Path(path).is_file():
        what = (
            "is not a file (the wheel itself, not its folder)"
            if Path(path).is_dir()
            else "is not a regular file (a FIFO or a device), not a wheel"
            if Path(path).exists()
            else "does not exist"
        )
        return [f"wheel {wheel['name']}: {path} {what}"]
    try:
        actual = sha256_of(Path(path))
    except OSError as exc:
        return [f"wheel {wheel['name']}: cannot read {path}: {exc.strerror or exc}"]
    if actual != wheel["sha256"]:
        return [f"wheel {wheel['name']}: sha256 of {path} is {actual}, expected {wheel['sha256']}"]
    return []


def _existing_parent(path: Path) -> Path:
    while not path.exists():
        path = path.parent
    return path


# Requires-Dist: NAME[extras] (==X) or NAME[extras]==X; marker -> name, extras, specifier, marker
_REQUIRES = re.compile(
    r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?\s*\(?\s*([^;()]*?)\s*\)?\s*(?:;(.*))?"
)
_EXACT = re.compile(r"===?\s*([^\s,*]+)")
_EXTRA = re.compile(r"""extra\s*==\s*['"]([^'"]+)['"]""")
_NAME = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?")
Needed = tuple[str, "str | None", frozenset]  # normalised name, exact version or None, extras asked for


def _extras(text: str | None) -> frozenset:
    return frozenset(normalize(e.strip()) for e in (text or "").split(",") if e.strip())


_VERSION_LITERAL = re.compile(r"""['"]\s*(\d+)\.(\d+)(?:\.(\d+))?""")


def _micros(marker: str, python: str) -> list[int]:
    """Micro versions of Python `python` (X.Y) at which `marker` may change its value: those its version
    literals of X.Y name, each with its neighbours, and 0 (a comparison changes value only at its literal)."""
    found = {0}
    for major, minor, micro in _VERSION_LITERAL.findall(marker):
        if f"{major}.{minor}" == python:
            found.update({int(micro or 0) - 1, int(micro or 0), int(micro or 0) + 1})
    return sorted(m for m in found if m >= 0)


def _marker_applies(marker: str, python: str, extras: frozenset) -> bool | None:
    """Whether a PEP 508 environment marker holds for an env of Python `python` on this host with `extras`
    asked for (or none); None where it cannot be told: the marker does not parse, or `python` is X.Y only
    (an env not made yet: conda takes the newest X.Y.Z it has, a venv this host's pythonX.Y) and the
    marker's value depends on the micro version (`python_full_version >= "3.11.4"`). The env's Python
    (X.Y.Z of an existing env) decides, not ktinfra's own."""
    try:
        parsed = Marker(marker)
    except InvalidMarker:
        return None
    xy = minor_version(python)
    fulls = [python] if python.count(".") >= 2 else [f"{xy}.{micro}" for micro in _micros(marker, xy)]
    here = default_environment()
    found = set()
    try:
        for full in fulls:
            env = {**here, "python_version": xy, "python_full_version": full}
            if here["implementation_name"] == "cpython":  # the envs are CPython: its version is Python's
                env["implementation_version"] = full
            found.add(any(parsed.evaluate({**env, "extra": extra}) for extra in sorted(extras) or [""]))
    except Exception:  # an undefined name or comparison in an old packaging: cannot be told
        return None
    return found.pop() if len(found) == 1 else None


def _requirements(wheel: Path, extras: frozenset, python: str | None = None) -> list[Needed]:
    """What a wheel file's Requires-Dist asks for (with `extras` of it asked for) in an env of Python `python`
    (X.Y, or X.Y.Z where known) on this host: a requirement whose marker does not hold there
    (`; python_version < "3.11"`, `; platform_machine == "aarch64"`) is not installed; one whose marker
    cannot be told is counted, as pip would install it (conda's newest X.Y.Z passes the usual
    `python_full_version >= ...` of a dependency needed from a fix release on); [] if unreadable.
    METADATA is an email header as pip reads it (CRLF line ends, folded lines): its body, the package's
    description, is not read."""
    try:
        with zipfile.ZipFile(wheel) as archive:
            member = next(
                (n for n in archive.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n)), None
            )
            text = archive.read(member).decode("utf-8", "replace") if member else ""
    except (OSError, zipfile.BadZipFile, RuntimeError, ValueError, EOFError, NotImplementedError, zlib.error):
        return []  # zlib.error / EOFError: a wheel cut short or damaged (a download interrupted)
    found = []
    for value in email.parser.HeaderParser().parsestr(text).get_all("Requires-Dist") or []:
        match = _REQUIRES.fullmatch(" ".join(str(value).split()))  # a folded line: one line
        if not match:
            continue
        applies = _marker_applies(match.group(4), python, extras) if match.group(4) and python else None
        wanted = {normalize(e) for e in _EXTRA.findall(match.group(4) or "")}
        if applies is False or (applies is None and wanted and not wanted & extras):
            continue  # `; extra == "sglang"` of an install without that extra, a marker for another host
        exact = _EXACT.fullmatch(match.group(3))
        found.append((normalize(match.group(1)), exact.group(1) if exact else None, _extras(match.group(2))))
    return found


def _env_tags(python: str | None, platforms: list[str] | None = None) -> dict[Tag, int] | None:
    """The wheel tags pip takes in an env of CPython `python` (X.Y) on this host (ktinfra runs on the target),
    each with its rank (0: the one pip prefers most): its platforms are this host's (linux_x86_64 and the
    manylinux tags up to this host's glibc), or `platforms`. None for an env whose Python is not known
    (every wheel counts)."""
    if python is None:
        return None
    version = tuple(int(part) for part in python.split(".")[:2])
    on = list(tags.platform_tags()) if platforms is None else platforms
    ordered = [
        *tags.cpython_tags(version, platforms=on),
        *tags.compatible_tags(version, f"cp{version[0]}{version[1]}", on),
    ]
    return {tag: rank for rank, tag in reversed(list(enumerate(ordered)))}


def _rank(filename: str, wanted: dict[Tag, int] | None) -> int | None:
    """How much pip prefers the wheel `filename` where it takes the tags `wanted` (lower: more), None where it
    does not take it: a cp311 wheel is not for a 3.12 env, nor a macOS, aarch64 or musllinux one for this
    x86_64 glibc host (a wheelhouse shared with another profile or host holds them); a file name that is no
    wheel's is passed over, as pip does."""
    try:
        *_, found = parse_wheel_filename(filename)
    except InvalidWheelFilename:
        return None
    if wanted is None:
        return 0
    return min((wanted[tag] for tag in found if tag in wanted), default=None)


def _wheelhouse_bytes(
    wheelhouse: Path,
    envs: list[dict],
    python: str | None = None,
    platforms: list[str] | None = None,
    made_with: dict[str, str] | None = None,
) -> int:
    """Bytes of the wheelhouse's wheels that installing `envs` (made with Python `python`, X.Y; an env that
    exists already with the X.Y.Z `made_with` names for it) takes from it instead of downloading: those of
    the envs' pins (at the pinned version) and, through each such wheel's Requires-Dist, what they need
    where its marker holds. The wheelhouse is shared (other profiles, earlier pins): its other wheels
    download nothing for these. pip installs one file of a distribution: the newest version asked for, of
    the tag it prefers most (a local linux_x86_64 build next to the manylinux wheel of the same version, or
    an older version next to a newer one, saves nothing more)."""
    if not wheelhouse.is_dir():
        return 0
    files: dict[str, list[tuple[str, Version, int, Path]]] = {}
    wanted = _env_tags(python, platforms)
    for path in wheelhouse.iterdir():
        rank = _rank(path.name, wanted)
        if rank is None:  # pip passes it over and downloads one that fits
            continue
        if path.is_file():  # never a FIFO: opening one waits for ever
            dist, _, rest = path.name.partition("-")
            have = rest.split("-", 1)[0]
            files.setdefault(normalize(dist), []).append(
                (have, parse_wheel_filename(path.name)[1], rank, path)
            )
    pinned: dict[str, str] = {}
    todo: list[tuple[str, str | None, frozenset, str | None]] = []  # Needed, and the env's Python
    for env in envs:
        pinned.update(pins(env))
        env_python = (made_with or {}).get(env["name"], python)
        for requirement in env["packages"]:
            name = _NAME.match(requirement)
            marker = requirement.partition(";")[2].strip()
            if marker and env_python and _marker_applies(marker, env_python, frozenset()) is False:
                continue  # pip skips it on this host / Python
            if name:
                todo.append((normalize(name.group(1)), None, _extras(name.group(2)), env_python))
        todo.extend((normalize(w["name"]), None, frozenset(), env_python) for w in env["wheels"])
    seen: set[tuple[Path, frozenset, str | None]] = set()
    credited: dict[str, Path] = {}
    while todo:
        name, version, extras, env_python = todo.pop()
        version = pinned.get(name, version)  # the env's own pin wins over what a dependency asks for
        fitting = [f for f in files.get(name, []) if version is None or _same_version(f[0], version)]
        if not fitting:
            continue
        *_, path = max(fitting, key=lambda f: (f[1], -f[2], f[3].name))
        if (path, extras, env_python) in seen:
            continue
        seen.add((path, extras, env_python))
        credited.setdefault(name, path)
        todo.extend((*needed, env_python) for needed in _requirements(path, extras, env_python))
    return sum(path.stat().st_size for path in credited.values())


def _disk_problems(needs: list[tuple[Path, int]]) -> tuple[list[dict], list[str]]:
    by_device: dict[int, dict] = {}
    for path, need in needs:
        anchor = _existing_parent(path)
        entry = by_device.setdefault(
            anchor.stat().st_dev,
            {"path": str(anchor), "free_bytes": shutil.disk_usage(anchor).free, "need_bytes": 0},
        )
        entry["need_bytes"] += need
    disks = list(by_device.values())
    problems = [
        f"disk too small: {d['path']} has {d['free_bytes'] / 1e9:.1f} GB free, the envs and wheelhouse need "
        f"{d['need_bytes'] / 1e9:.1f} GB"
        for d in disks
        if d["need_bytes"] > d["free_bytes"]
    ]
    return disks, problems


def _downloads(env: dict) -> bool:
    """Whether installing `env` downloads into the wheelhouse: a new env, or one installed again."""
    return not env["installed"] or env["reinstall_due"]


def requirements_text(profile_name: str, env: dict) -> str:
    """The requirements kt_python_env writes for `env` (roles/kt_python_env/templates/requirements.txt.j2,
    which a test renders to keep the two alike), less its first line (ansible_managed: the controller's
    setting, no input of the env)."""
    lines = [f"# Stack profile {profile_name}, env {env['key']} ({env['name']}).", *env["packages"]]
    lines += [f"{w['name']}=={w['version']}" for w in env["wheels"]]
    lines += [f"# wheel file {w['name']}: {w['file']} sha256={w['sha256']}" for w in env["wheels"]]
    lines += [f"# conda patch {p['channel']}: {' '.join(p['packages'])}" for p in env["conda_patches"]]
    lines += [
        f"# git source {g['name']}: {g['repo']}@{g['ref']} subdir={g['subdir']} editable={g['editable']} "
        f"extras={','.join(g['extras'])}"
        for g in env["git"]
    ]
    return "".join(f"{line}\n" for line in lines)


def _without_header(path: Path) -> str | None:
    """A requirements record of kt_python_env less its ansible_managed line; None where there is none."""
    try:
        return path.read_text(errors="replace").partition("\n")[2] if path.is_file() else None
    except OSError:
        return None


def reinstall_reasons(prefix: Path, profile_name: str, env: dict) -> list[dict]:
    """Why kt_python_env installs the env at `prefix` again ([]: it does not), decided as its tasks/env.yml
    does ("Decide whether to install"): the requirements it writes now differ from those of the last install
    that finished (a pin bumped, a wheel rebuilt under the same version, a git source at another ref, a
    conda patch), there is no record of one, or an install of other requirements was cut off. The env's
    freeze is no input: an env off its pins whose requirements did not change fails the role's pin check,
    it is not installed again."""
    wanted = requirements_text(profile_name, env)
    finished = _without_header(prefix / INSTALLED_FILE)
    if finished is None:
        return [{"kind": "no_record", "text": f"no record of a finished install ({INSTALLED_FILE})"}]
    if finished != wanted:
        return _differences(finished, wanted) or [{"kind": "other", "text": "its requirements changed"}]
    if _without_header(prefix / REQUIREMENTS_FILE) != wanted:
        return [{"kind": "unfinished", "text": "an install of other requirements did not finish"}]
    return []


_PINNED = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*==\s*([^\s;]+)")  # NAME[extras]==X


def _record(text: str) -> dict:
    """A requirements record's lines by what they say: pins, other requirements, wheel files, git sources,
    conda patches, the header."""
    found: dict = {"pins": {}, "requirements": set(), "wheels": {}, "git": {}, "conda": set(), "header": ""}
    for line in text.splitlines():
        if line.startswith("# wheel file "):
            name, _, rest = line.removeprefix("# wheel file ").partition(": ")
            found["wheels"][name] = rest
        elif line.startswith("# git source "):
            name, _, rest = line.removeprefix("# git source ").partition(": ")
            found["git"][name] = rest
        elif line.startswith("# conda patch "):
            found["conda"].add(line.removeprefix("# conda patch "))
        elif line.startswith("#"):
            found["header"] += line
        elif (pin := _PINNED.fullmatch(line.strip())) is not None:
            found["pins"][normalize(pin.group(1))] = pin.group(2)
        elif line.strip():
            found["requirements"].add(line.strip())
    return found


def _differences(finished: str, wanted: str) -> list[dict]:
    old, new = _record(finished), _record(wanted)
    reasons = []
    for name in sorted(set(old["pins"]) | set(new["pins"])):
        before, after = old["pins"].get(name), new["pins"].get(name)
        if before != after:
            text = f"{name} {before or '(not pinned)'} -> {after or '(not pinned)'}"
            reasons.append({"kind": "pin", "package": name, "old": before, "new": after, "text": text})
    for name in sorted(set(old["wheels"]) & set(new["wheels"])):
        before, after = old["wheels"][name], new["wheels"][name]
        if before != after and old["pins"].get(normalize(name)) == new["pins"].get(normalize(name)):
            (old_file, _, old_sha), (new_file, _, new_sha) = (
                w.rpartition(" sha256=") for w in (before, after)
            )
            text = f"wheel {name} rebuilt: sha256 {old_sha[:12]}... -> {new_sha[:12]}..." + (
                f", file {old_file} -> {new_file}" if old_file != new_file else ""
            )
            reasons.append(
                {"kind": "wheel", "package": name, "old_sha256": old_sha, "new_sha256": new_sha}
                | {"old_file": old_file, "new_file": new_file, "text": text}
            )
    for name in sorted(set(old["git"]) | set(new["git"])):
        before, after = old["git"].get(name), new["git"].get(name)
        if before != after:
            old_ref, new_ref = (_git_ref(r) for r in (before, after))
            moved = before and after and old_ref != new_ref
            text = (
                f"git source {name} moved: {old_ref} -> {new_ref}"
                if moved
                else f"git source {name}: {before or '(none)'} -> {after or '(none)'}"
            )
            reasons.append(
                {"kind": "git", "source": name, "old_ref": old_ref, "new_ref": new_ref, "text": text}
            )
    for kind, label in (("requirements", "requirement"), ("conda", "conda patch")):
        for line in sorted(old[kind] - new[kind]):
            reasons.append({"kind": kind, "old": line, "new": None, "text": f"{label} {line} removed"})
        for line in sorted(new[kind] - old[kind]):
            reasons.append({"kind": kind, "old": None, "new": line, "text": f"{label} {line} added"})
    if old["header"] != new["header"]:
        reasons.append({"kind": "other", "text": "the profile or env is named differently"})
    return reasons


def _git_ref(description: str | None) -> str | None:
    """REF of a git source's record `REPO@REF subdir=...`."""
    return description.partition(" subdir=")[0].rpartition("@")[2] if description else None


def _installed_sizes(prefix: Path) -> dict[str, tuple[str, int]]:
    """Normalised name -> (version, bytes) of each distribution installed in the env at `prefix`: the sizes
    its RECORD lists (pip and uv write one for every file, .pyc included)."""
    found = {}
    for record in prefix.glob("lib/python3*/site-packages/*.dist-info/RECORD"):
        name, _, version = record.parent.name.removesuffix(".dist-info").partition("-")
        try:
            rows = record.read_text(errors="replace").splitlines()
        except OSError:
            continue
        size = sum(int(row.rsplit(",", 1)[-1]) for row in rows if row.rsplit(",", 1)[-1].isdigit())
        found[normalize(name)] = (version, size)
    return found


def _kept_bytes(prefix: Path, env: dict) -> int:
    """Bytes of the existing env at `prefix` that a reinstall keeps: the pinned distributions already at their
    pin. Everything else is counted as new: a bumped pin's new version is unpacked before pip removes the old
    one, and it may bring new versions of its unpinned dependencies (torch: its CUDA wheels)."""
    installed = _installed_sizes(prefix)
    return sum(
        size
        for name, pinned in pins(env).items()
        for version, size in [installed.get(name, ("", 0))]
        if version and _same_version(version, pinned)
    )


def made_with_full_python(prefix: Path) -> str | None:
    """The version of the Python an existing env at `prefix` was made with, X.Y.Z where it says (a venv's
    pyvenv.cfg, a conda env's conda-meta record of its python package), else X.Y; None where there is no
    env, or it does not say."""
    try:
        config = prefix / "pyvenv.cfg"
        lines = config.read_text(errors="replace").splitlines() if config.is_file() else []  # not a FIFO
        for line in lines:
            key, _, value = line.partition("=")
            if key.strip() in ("version", "version_info"):  # venv writes version, virtualenv version_info
                found = re.match(r"\s*(3\.\d+(?:\.\d+)?)", value)  # 3.11.7, 3.11.7.final.0
                if found:
                    return found.group(1)
    except OSError:
        pass
    records = sorted((prefix / "conda-meta").glob("python-3.*.json"))  # python-3.11.9-h955ad1f_0.json
    found = re.match(r"python-(3\.\d+(?:\.\d+)?)[.-]", records[0].name) if records else None
    return found.group(1) if found else None


# pip takes index-url from [global], then from the section of the command it runs, then PIP_INDEX_URL, a
# later one winning and an empty value counting as none (pip's ConfigOptionParser: override_order global,
# <command>, :env:). kt_python_env runs `pip wheel` (it fills the wheelhouse) and `pip install` (the git
# sources), so [wheel] counts here; kt_preflight runs `pip install` only and asks its pip (pip config get).
_PIP_COMMANDS = ("wheel", "install")


def _pip_config_files(prefix: Path | None = None) -> list[Path]:
    """The configuration files pip reads (pip.pypa.io, topics/configuration; pip's configuration.py), a
    later one winning: the global ones ($XDG_CONFIG_DIRS/pip/pip.conf, /etc/pip.conf), the user's (left out
    where $PIP_CONFIG_FILE is a file that exists), the site one of the env pip runs in (`prefix`/pip.conf, its
    sys.prefix), then $PIP_CONFIG_FILE; none where that is /dev/null."""
    named = os.environ.get("PIP_CONFIG_FILE")
    if named == os.devnull:
        return []
    home = Path(os.path.expanduser("~"))
    dirs = [d for d in (os.environ.get("XDG_CONFIG_DIRS") or "/etc/xdg").split(":") if d]
    user = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
    found = [Path(d) / "pip" / "pip.conf" for d in dirs] + [Path("/etc/pip.conf")]
    if not (named and os.path.exists(named)):
        found += [home / ".pip" / "pip.conf", user / "pip" / "pip.conf"]
    found += [prefix / "pip.conf"] if prefix else []
    return found + ([Path(named)] if named else [])


def host_pip_index(prefix: Path | None = None) -> str | None:
    """Where the configuration pip of the env at `prefix` reads (this host's without one) names an index
    for kt_python_env's pip commands (a lab's local PyPI mirror): PIP_INDEX_URL, or the pip.conf whose
    index-url pip takes; None where none does. The place only: the URL may carry a password."""
    if os.environ.get("PIP_INDEX_URL"):
        return "PIP_INDEX_URL"
    merged: dict[str, tuple[str, Path]] = {}  # section -> (index-url, its file), a later file winning
    for path in _pip_config_files(prefix):
        parser = configparser.RawConfigParser()
        try:
            parser.read(path, encoding="utf-8")  # a file that is not there is passed over
        except (configparser.Error, OSError, UnicodeDecodeError):
            continue  # pip itself stops on it, with its own message
        for section in parser.sections():
            for key, value in parser.items(section):
                if key.replace("_", "-").lstrip("-") == "index-url":
                    merged[section] = (value.strip(), path)
    for command in _PIP_COMMANDS:
        for section in (command, "global"):  # the command's own section wins over [global]
            value, path = merged.get(section, ("", None))
            if value:
                return str(path)
    return None


def _pip_settings(profile: dict, prefix: Path | None = None) -> dict:
    """The profile's pip settings as the installer takes them, for pip of the env at `prefix` (none: this
    host's). A host whose pip configuration names an index keeps it: the profile's index_url (PyPI in the
    shipped profiles) is a default, not passed as --index-url over the host's mirror;
    kt_python_env_pip_index_url, given, still wins over both (the role passes it)."""
    pip = profile.get("pip") or {}
    host = host_pip_index(prefix)
    source = f"host pip configuration ({host})" if host else "profile" if pip.get("index_url") else None
    return {
        **pip,
        "index_url": None if host else pip.get("index_url"),
        **({"index_from": source} if source else {}),  # none: pip's own default index
        "extra_index_urls": pip.get("extra_index_urls") or [],
    }


def minor_version(version: str) -> str:
    """X.Y of a Python version X.Y or X.Y.Z."""
    return ".".join(version.split(".")[:2])


def check_install(
    profile: dict,
    env_keys: list[str],
    *,
    root: Path,
    wheelhouse: Path,
    manager: str = "auto",
    conda_exe: str | None = None,
    wheel_overrides: dict[str, dict] | None = None,
) -> dict:
    """Resolved install plan for `env_keys` of `profile` on this host, with `problems` (empty = go)."""
    if manager not in MANAGERS:
        raise ValueError(f"env manager must be one of {', '.join(MANAGERS)}, not {manager!r}")
    problems: list[str] = []
    conda = find_conda(conda_exe)
    if conda_exe is not None and conda is None:  # asked for: never fall back to a venv without a word
        problems.append(f"conda {conda_exe} (--conda-exe, kt_python_env_conda_exe) is not an executable file")
    elif manager == "conda" and conda is None:
        searched = conda_exe or "PATH, " + ", ".join(CONDA_CANDIDATES)
        problems.append(f"env manager conda requested but no conda found ({searched})")
    resolved = "conda" if manager == "conda" or (manager == "auto" and conda) else "venv"
    versions = python_versions(profile)
    version, python = versions[0], None
    if resolved == "venv":
        found = [(v, shutil.which(f"python{v}")) for v in versions]
        version, python = next(((v, exe) for v, exe in found if exe), (versions[0], None))
        if python is None:
            wanted = " or ".join(f"python{v}" for v in versions)
            problems.append(f"{wanted} not found: install it (apt) or use conda (kt_python_env_manager)")
    envs, needs, downloads, made_with = [], [], 0, {}
    for key in env_keys:
        env = env_spec(profile, key)
        env["wheels"] = [_apply_overrides(w, wheel_overrides or {}) for w in env["wheels"]]
        for wheel in env["wheels"]:
            problems.extend(_wheel_problems(wheel))
        if env["conda_patches"] and resolved != "conda":
            patches = ", ".join(p for patch in env["conda_patches"] for p in patch["packages"])
            problems.append(
                f"{env['name']}: profile {profile['name']} patches the env with conda ({patches}), "
                "but there is no conda here"
            )
        conda_root = Path(conda).resolve().parent.parent if conda else None
        prefix = (
            conda_root / "envs" / env["name"] if conda_root and resolved == "conda" else root / env["name"]
        )
        env["prefix"] = str(prefix)
        env["pip"] = _pip_settings(profile, prefix)  # pip in the env also reads its own pip.conf
        if prefix.exists() and not prefix.is_dir():  # no env can be made there
            problems.append(
                f"{env['name']}: {prefix} is a file, not an env directory: remove it or install into another "
                "root (kt_python_env_root, --root)"
            )
        full = made_with_full_python(prefix)
        made = minor_version(full) if full else None
        if full and made == version:  # pip installs into it: its X.Y.Z decides python_full_version markers
            made_with[env["name"]] = full
        if made and made not in versions:
            problems.append(
                f"{env['name']}: the env at {prefix} was made with Python {made}, profile {profile['name']} "
                f"installs with Python {' or '.join(versions)}: remove it (rm -rf {prefix}) or install into "
                "another root (kt_python_env_root, --root)"
            )
        env["installed"] = (prefix / FREEZE_FILE).is_file()
        env["reinstall_reasons"] = reinstall_reasons(prefix, profile["name"], env) if env["installed"] else []
        env["reinstall_due"] = bool(env["reinstall_reasons"])
        if _downloads(env):
            kept = _kept_bytes(prefix, env) if env["installed"] else 0  # a reinstall: what stays as it is
            needs.append((prefix, max(0, env["disk_bytes"] - kept)))
            earlier = [e for e in envs if _downloads(e)]
            downloads += env["download_bytes"] - shared_download_bytes(env, earlier)
        envs.append(env)
    known = {w["name"] for env in envs for w in env["wheels"]}
    problems.extend(
        f"wheel override {name!r} matches no wheel of these envs ({', '.join(sorted(known)) or 'none'})"
        for name in sorted(set(wheel_overrides or {}) - known)
    )
    # wheels already in the wheelhouse are not downloaded again: those these envs install, not all of it
    downloading = [env for env in envs if _downloads(env)]
    credit = _wheelhouse_bytes(wheelhouse, downloading, version, made_with=made_with)
    needs.append((wheelhouse, max(0, downloads - credit)))
    disks, disk_problems = _disk_problems(needs)
    return {
        "profile": profile["name"],
        "generation": profile["generation"],
        "python": version,
        "python_exe": python,
        "manager": resolved,
        "conda_exe": conda if resolved == "conda" else None,
        "pip": _pip_settings(profile),
        "upstream": profile.get("upstream"),
        "wheelhouse": str(wheelhouse),
        "envs": envs,
        "disks": disks,
        "problems": problems + disk_problems,
    }
