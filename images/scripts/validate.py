#!/usr/bin/env python3
"""Validate step of an image build (runs inside the image, stdlib only).

usage: validate.py SPEC_JSON OUT_JSON WHEELHOUSE

SPEC_JSON: {"profile": "kt-0.7", "envs": {"kt-kernel": {"python": "/opt/kt/envs/kt-kernel/bin/python",
            "pins": ["kt-kernel==0.7.2", ...], "imports": ["kt_kernel"]  # optional}}}
For every env: its python runs, each pin is installed at exactly the pinned version, and each pinned
distribution's top-level modules import (the names in its top_level.txt, else those its RECORD installed;
a distribution with neither is listed as not checked, never as passed). OUT_JSON lists every installed
distribution with its version and the sha256 of the wheel it came from (looked up in WHEELHOUSE), plus the
env's size on disk, the result of each import and the pins whose imports were not checked.
Exits 1 with one line per problem when anything does not match; an unchecked import is a warning line.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import select
import signal
import subprocess
import sys
import tempfile
import time

# The top-level import names of a distribution that has no top_level.txt (hatchling, flit, maturin and
# other modern backends write none), from the paths its RECORD lists. Defined here and run inside each
# env's python as part of PROBE, so it keeps to the syntax of the oldest python an env may have.
TOP_LEVEL_FROM_RECORD = r"""
def module_name(filename):
    # mod.py -> mod; name.cpython-312-x86_64-linux-gnu.so, name.abi3.so, name.so, name.pyd -> name
    if filename.endswith(".py"):
        name = filename[:-3]
    elif filename.endswith((".so", ".pyd")):
        name = filename.split(".", 1)[0]
    else:
        return None
    return name if name.isidentifier() else None


def top_level_from_record(paths):
    # pkg/__init__.py -> pkg; mod.py -> mod; an extension module -> its name; in a namespace package (no
    # __init__ of its own: nvidia/, google/) its first regular packages or modules, ns.sub. Left out:
    # *.dist-info, *.data, __pycache__, paths outside site-packages (../../bin/tool) and bin scripts.
    files = set()
    for path in paths:
        parts = tuple(p for p in str(path).replace("\\", "/").split("/") if p not in ("", "."))
        if not parts or str(path).startswith("/") or ".." in parts or "__pycache__" in parts:
            continue
        if parts[0].endswith((".dist-info", ".data", ".egg-info")):
            continue
        files.add(parts)
    packages = set(p[:-1] for p in files if len(p) > 1 and module_name(p[-1]) == "__init__")
    tops = set()
    for parts in files:
        for i in range(1, len(parts)):
            if parts[:i] in packages:
                if all(p.isidentifier() for p in parts[:i]):
                    tops.add(".".join(parts[:i]))
                break
        else:
            name = module_name(parts[-1])
            if parts[0] in ("bin", "Scripts") and len(parts) > 1:
                continue  # scripts of a --prefix/--target install
            if name and name != "__init__" and all(p.isidentifier() for p in parts[:-1]):
                tops.add(".".join(parts[:-1] + (name,)))
    return sorted(t for t in tops if not t.startswith("__editable__"))
"""

# Runs inside each env's python: lists distributions and the top-level modules of each (top_level.txt,
# else RECORD; none: the dist's imports cannot be checked), and whether it has a RECORD.
PROBE = (
    TOP_LEVEL_FROM_RECORD
    + r"""
import json, importlib.metadata as md, re, sys
out = {"python": sys.version.split()[0], "prefix": sys.prefix, "dists": {}}
seen = set()
for d in md.distributions():
    name = d.metadata["Name"]
    if not name:
        continue
    key = re.sub(r"[-_.]+", "-", name).lower()
    if key in seen:
        continue  # shadowed: sys.path's first copy is the one imported (and importlib.metadata.version's)
    seen.add(key)
    tops = [t.replace("/", ".") for t in (d.read_text("top_level.txt") or "").split()]
    files = d.files  # None: no RECORD (nor an egg-info's installed-files.txt)
    if not tops:
        tops = top_level_from_record(files or [])
    # the tags of the wheel it was installed from: which of several same-version wheels it is
    wheel = (d.read_text("WHEEL") or "").splitlines()
    tags = [line.split(":", 1)[1].strip() for line in wheel if line.startswith("Tag:")]
    out["dists"][name] = {
        "version": d.version,
        "top_level": sorted(set(tops)),
        "record": files is not None,
        "tags": tags,
    }
print(json.dumps(out))
"""
)
exec(TOP_LEVEL_FROM_RECORD)  # the same functions here, for the tests

# Runs inside an env's python: imports each module named, reporting on the file descriptor argv[1] a line
# "start<TAB>MOD" before each import and "done<TAB>MOD<TAB>RESULT-JSON" after it, so that the caller can bound
# each import in time and name the module when one hangs or takes the interpreter down (SIGILL, os._exit).
# The module's own output goes to stdout/stderr and cannot be taken for a report.
IMPORT = r"""
import importlib, json, os, sys
report = os.fdopen(int(sys.argv[1]), "w", buffering=1)
for mod in sys.argv[2:]:
    report.write("start\t" + mod + "\n")
    try:
        importlib.import_module(mod)
        res = "ok"
    except BaseException as exc:  # an import may sys.exit or raise anything
        res = ("%s: %s" % (type(exc).__name__, exc))[:300]
    report.write("done\t" + mod + "\t" + json.dumps(res) + "\n")
"""

# Seconds one import (and the probe) may take before it is stopped and reported as hung; sglang with torch
# takes about a minute on a cold disk. KTINFRA_VALIDATE_IMPORT_TIMEOUT sets another limit.
IMPORT_TIMEOUT = 600.0


class ValidateError(Exception):
    """A python that cannot be probed: reported as the env's problem, not a traceback."""


def canon(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_pin(pin: str) -> tuple[str, str | None]:
    m = re.match(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?\s*(?:==\s*([^\s;]+))?", pin)
    if not m:
        raise ValueError(f"cannot parse pin {pin!r}")
    return canon(m.group(1)), m.group(3)


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


def same_version(installed: str, pinned: str) -> bool:
    """PEP 440 `==`: 2.0 is 2.0.0, and a pin without a local label (`torch==2.9.1`) is met by any local
    build of that version (`2.9.1+cu128` from a CUDA index)."""
    have, want = _pep440_parts(installed), _pep440_parts(pinned)
    if have is None or want is None:
        return installed.strip() == pinned.strip()
    return have[:3] == want[:3] and (want[3] is None or have[3] == want[3])


def wheel_tags(filename: str) -> set[str]:
    """The tags a wheel file name stands for, compressed tag sets expanded (cp311.cp312-abi3-x.y)."""
    parts = filename[:-4].split("-")
    pys, abis, plats = (parts[-3].split("."), parts[-2].split("."), parts[-1].split("."))
    return {f"{py}-{abi}-{plat}" for py in pys for abi in abis for plat in plats}


def wheel_index(wheelhouse: str) -> dict[tuple[str, str], list[str]]:
    """(canonical name, version) -> paths of its wheels in the wheelhouse, else of its sdist. A shared
    wheelhouse can hold several wheels of one version (cp311 and cp312, other platforms)."""
    wheels: dict[tuple[str, str], list[str]] = {}
    sdists: dict[tuple[str, str], list[str]] = {}
    if not os.path.isdir(wheelhouse):
        return wheels
    for fn in sorted(os.listdir(wheelhouse)):
        if fn.endswith(".whl"):
            parts = fn[:-4].split("-")
            if len(parts) >= 5:
                wheels.setdefault((canon(parts[0]), parts[1]), []).append(os.path.join(wheelhouse, fn))
        elif fn.endswith((".tar.gz", ".zip")):
            stem = fn[: -len(".tar.gz")] if fn.endswith(".tar.gz") else fn[:-4]
            name, _, version = stem.rpartition("-")
            if name:
                sdists.setdefault((canon(name), version), [os.path.join(wheelhouse, fn)])
    return {**sdists, **wheels}


def installed_from(candidates: list[str], tags: list[str]) -> str | None:
    """The wheelhouse file a distribution was installed from: the one wheel whose tags it records, or the
    only candidate; None when several could be it (a checksum of the wrong file is worse than none)."""
    if len(candidates) == 1:
        return candidates[0]
    matching = [c for c in candidates if c.endswith(".whl") and wheel_tags(os.path.basename(c)) & set(tags)]
    return matching[0] if len(matching) == 1 else None


def sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def du(path: str) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for fn in files:
            try:
                st = os.lstat(os.path.join(root, fn))
            except OSError:
                continue
            total += st.st_blocks * 512
    return total


def _tail(log, limit: int = 500) -> str:
    log.seek(0)
    return log.read().decode("utf-8", "replace").strip()[-limit:]


def _stop(proc: subprocess.Popen) -> None:
    """Kill the python and whatever it started (its own session), and reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    proc.wait()


def _how_it_ended(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit status {returncode}"


def run_json(python: str, code: str, *args: str, timeout: float = IMPORT_TIMEOUT) -> dict:
    with tempfile.TemporaryFile() as log:
        try:
            proc = subprocess.Popen(
                [python, "-c", code, *args],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=log,
                start_new_session=True,
            )
        except OSError as exc:
            raise ValidateError(f"{python} cannot run: {exc}") from None
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _stop(proc)
            raise ValidateError(f"{python} did not answer within {timeout:g} s") from None
        if proc.returncode != 0:
            raise ValidateError(f"{python} failed ({_how_it_ended(proc.returncode)}): {_tail(log)}")
    return json.loads(out.decode().strip().splitlines()[-1])


def _import_some(python: str, mods: list[str], timeout: float, results: dict[str, str]) -> None:
    """One python importing mods in turn until one hangs past timeout or ends the interpreter; fills
    results for the modules it got through (and the one that hung or crashed)."""
    r, w = os.pipe()
    with tempfile.TemporaryFile() as log:
        try:
            proc = subprocess.Popen(
                [python, "-c", IMPORT, str(w), *mods],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                pass_fds=(w,),
                start_new_session=True,
            )
        finally:
            os.close(w)
        current, deadline, buf = None, time.monotonic() + timeout, b""
        with os.fdopen(r, "rb", buffering=0) as status:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    _stop(proc)
                    mod = current or mods[0]
                    started = "" if current else " (python did not start it)"
                    results[mod] = f"timed out: the import did not finish within {timeout:g} s{started}"
                    return
                # wake up now and then: a child of the import may hold the pipe open after python ended
                ready, _, _ = select.select([status], [], [], min(left, 1.0))
                chunk = status.read(65536) if ready else b""
                if (ready and not chunk) or (not ready and proc.poll() is not None):
                    break
                buf += chunk
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    kind, _, rest = line.decode("utf-8", "replace").partition("\t")
                    if kind == "start":
                        current, deadline = rest, time.monotonic() + timeout
                    elif kind == "done":
                        mod, _, res = rest.partition("\t")
                        results[mod] = json.loads(res)
                        current = None
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
        _stop(proc)
        if current is not None or not any(m in results for m in mods):
            how = _how_it_ended(proc.returncode)
            if current is None:  # python ended before its first import
                results[mods[0]] = f"python ended before the import ({how}): {_tail(log, 300)}"
            else:
                results[current] = f"the import ended python ({how}): {_tail(log, 300)}"


def run_imports(python: str, mods: list[str], timeout: float = IMPORT_TIMEOUT) -> dict[str, str]:
    """{module: "ok" or why not}: each import bounded by timeout; after a hung or crashed import the
    rest are imported by a fresh python."""
    results: dict[str, str] = {}
    pending = list(mods)
    while pending:
        _import_some(python, pending, timeout, results)
        pending = [m for m in pending if m not in results]
    return {m: results[m] for m in mods}


def check_env(
    name: str, spec: dict, wheels: dict, problems: list[str], timeout: float = IMPORT_TIMEOUT
) -> dict:
    python = spec["python"]
    if not os.access(python, os.X_OK):
        problems.append(f"env {name}: no python at {python}")
        return {}
    try:
        probe = run_json(python, PROBE, timeout=timeout)
    except ValidateError as exc:
        problems.append(f"env {name}: its python cannot list its packages: {exc}")
        return {}
    installed = {canon(d): (d, info) for d, info in probe["dists"].items()}
    pinned, imports = set(), list(spec.get("imports") or [])
    not_checked: dict[str, str] = {}
    for pin in spec.get("pins", []):
        key, want = parse_pin(pin)
        pinned.add(key)
        if key not in installed:
            problems.append(f"env {name}: {pin} is not installed")
            continue
        dist, info = installed[key]
        if want is not None and not same_version(info["version"], want):
            problems.append(f"env {name}: {key} is {info['version']}, profile pins {want}")
        if spec.get("imports"):
            continue  # the spec names the modules to import
        if info["top_level"]:
            imports += info["top_level"]
        else:
            # nothing to import is not an import that worked: say so rather than count it as passed
            not_checked[dist] = (
                "no top_level.txt and no RECORD"
                if not info.get("record")
                else "no top_level.txt, and its RECORD lists no importable module"
            )
    import_results = run_imports(python, sorted(set(imports)), timeout) if imports else {}
    for mod, res in import_results.items():
        if res != "ok":
            problems.append(f"env {name}: import {mod} failed: {res}")
    packages = []
    for key, (dist, info) in sorted(installed.items()):
        wheel = installed_from(wheels.get((key, info["version"]), []), info.get("tags") or [])
        packages.append(
            {
                "name": dist,
                "version": info["version"],
                "pinned": key in pinned,
                "wheel": os.path.basename(wheel) if wheel else None,
                "sha256": sha256(wheel) if wheel else None,
            }
        )
    return {
        "python": python,
        "python_version": probe["python"],
        "prefix": probe["prefix"],
        "size_bytes": du(probe["prefix"]),
        "imports": import_results,
        # pinned distributions whose imports were not checked, and why
        "not_checked": not_checked,
        "packages": packages,
    }


def main(argv: list[str]) -> int:
    if len(argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    raw = os.environ.get("KTINFRA_VALIDATE_IMPORT_TIMEOUT", "")
    try:
        timeout = float(raw) if raw.strip() else IMPORT_TIMEOUT
    except ValueError:
        timeout = -1.0
    if not 0 < timeout < float("inf"):
        print(
            f"validate: KTINFRA_VALIDATE_IMPORT_TIMEOUT={raw!r} is not a number of seconds > 0",
            file=sys.stderr,
        )
        return 2
    with open(argv[1]) as f:
        spec = json.load(f)
    wheels = wheel_index(argv[3])
    problems: list[str] = []
    envs = {name: check_env(name, env, wheels, problems, timeout) for name, env in spec["envs"].items()}
    with open(argv[2], "w") as f:
        json.dump({"profile": spec.get("profile"), "envs": envs, "problems": problems}, f, indent=1)
    for p in problems:
        print(f"validate: {p}", file=sys.stderr)
    for name, env in envs.items():
        for dist, why in (env.get("not_checked") or {}).items():
            print(f"validate: env {name}: import of {dist} NOT CHECKED: {why}", file=sys.stderr)
    if problems:
        return 1
    for name, env in envs.items():
        pinned = [f"{p['name']}=={p['version']}" for p in env["packages"] if p["pinned"]]
        unchecked = f"; imports not checked: {', '.join(env['not_checked'])}" if env["not_checked"] else ""
        print(
            f"validate: env {name} ok ({len(env['packages'])} packages; pins {', '.join(pinned)}{unchecked})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
