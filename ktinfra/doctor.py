"""`ktinfra doctor`: run the KT host suite (tests/infra, pytest-testinfra) and report every check.

Unlike `kt doctor`, which exits 0 whatever it finds, a failed check here fails the run. Skips are listed
with their reason: a part that is not installed, or hardware the chosen role does not require.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.parse
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ktinfra.profiles import load_profile
from ktinfra.render.serve import KT_METHODS

SUITE_ENV = "KTINFRA_INFRA_SUITE"
ROLES = ("serve", "sft", "any")
BACKENDS = ("local", "docker", "podman", "ssh", "paramiko", "ansible", "kubectl", "lxc", "openshift", "winrm")
# Backends that run on this machine or pick their hosts themselves (ansible:// = every inventory host);
# every other one needs a host, container or pod after the "://".
HOSTLESS_BACKENDS = ("local", "ansible")
# Backends that connect to HOST[:PORT] (testinfra passes the port on to ssh, paramiko, winrm as it is); the
# others name a container or pod, and ansible:// takes an Ansible pattern (where ":" joins groups).
PORT_BACKENDS = ("ssh", "paramiko", "winrm")
SCHEMA = 1


class DoctorError(RuntimeError):
    """Bad input, or the suite could not run at all (as opposed to checks that failed)."""


@dataclass
class Check:
    id: str
    host: str
    status: str  # passed | failed | error | skipped
    message: str = ""
    output: str = ""
    seconds: float = 0.0


@dataclass
class DoctorReport:
    hosts: list[str]
    role: str
    profile: str
    checks: list[Check] = field(default_factory=list)
    pytest_rc: int = 0

    def count(self, *statuses: str) -> int:
        return sum(c.status in statuses for c in self.checks)

    @property
    def ok(self) -> bool:
        """No check failed, and at least one passed: a run where everything was skipped checked nothing."""
        return self.count("passed") > 0 and self.count("failed", "error") == 0

    def to_dict(self) -> dict:
        return {
            "schema": SCHEMA,
            "ok": self.ok,
            "role": self.role,
            "profile": self.profile,
            "hosts": self.hosts,
            "summary": {s: self.count(s) for s in ("passed", "failed", "error", "skipped")},
            "checks": [asdict(c) for c in self.checks],
        }


def suite_dir() -> Path:
    path = Path(os.environ.get(SUITE_ENV) or Path(__file__).resolve().parents[1] / "tests" / "infra")
    if not (path / "conftest.py").is_file():
        raise DoctorError(f"KT host suite not found at {path} (set {SUITE_ENV} to the tests/infra folder)")
    return path


def mask_password(spec: str) -> str:
    """A host URL with its password (scheme://user:PASSWORD@host) shown as ***."""
    scheme, sep, rest = spec.partition("://")
    netloc, slash, tail = rest.partition("/")
    netloc, query, after = netloc.partition("?")
    userinfo, at, hostport = netloc.rpartition("@")
    if not sep or not at or ":" not in userinfo:
        return spec
    return f"{scheme}://{userinfo.split(':', 1)[0]}:***@{hostport}{query}{after}{slash}{tail}"


def _host_name(netloc: str) -> str:
    """The host part of a testinfra URL's netloc: without USER[:PASSWORD]@ and :PORT."""
    name = netloc.rsplit("@", 1)[-1]
    if name.startswith("["):
        return name[1:].split("]", 1)[0]
    return name.split(":", 1)[0]


def _netloc_problem(backend: str, netloc: str) -> str | None:
    """Why testinfra could not use HOST[:PORT] (None when it can): brackets that do not enclose exactly
    one address, or a port that is not a number from 1 to 65535 on a backend that connects to a port."""
    name = netloc.rsplit("@", 1)[-1]
    if name.startswith("["):
        address, close, after = name[1:].partition("]")
        if not close or "[" in address or "]" in after:
            return "unbalanced brackets: an IPv6 address goes as [ADDRESS] or [ADDRESS]:PORT"
        if after and not after.startswith(":"):
            return f"{after!r} after [{address}]: only :PORT may follow it"
        port = after[1:]
    elif "[" in name or "]" in name:
        return "unbalanced brackets: an IPv6 address goes as [ADDRESS] or [ADDRESS]:PORT"
    else:
        port = name.partition(":")[2]
    if (
        backend in PORT_BACKENDS
        and port
        and not (port.isascii() and port.isdigit() and 0 < int(port) < 65536)
    ):
        hint = " (an IPv6 address goes in brackets: [ADDRESS]:PORT)" if ":" in port else ""
        return f"port {port!r} is not a number from 1 to 65535{hint}"
    return None


def _raw_delimiter_password(given: str) -> str | None:
    """The host URL shown with everything between USER: and the last @ as ***, where that password holds a
    '/', '?' or '#' as it is: a URL's host part ends there, so testinfra (and mask_password) read the
    password's start as the host's port ('ssh://kt:se?cret@gpu1' -> port 'se'), which the error or ssh's
    own 'Bad port' message then printed. None where there is no such password."""
    scheme, sep, rest = given.partition("://")
    user, colon, after = rest.partition(":")
    found = (  # not ansible://: there ":" joins groups of a pattern, and no password goes in the URL
        re.match(r"([^/?#@]*)[/?#][^@]*@", after)
        if sep and colon and scheme not in HOSTLESS_BACKENDS and not re.search(r"[/?#@]", user)
        else None
    )
    if not found or found.group(1).isdigit():  # HOST:PORT?QUERY with an @ in a query value
        return None
    return f"{scheme}://{user}:***@{rest.rpartition('@')[2]}"


def validate_host(given: str) -> None:
    raw = _raw_delimiter_password(given)
    if raw:
        raise DoctorError(
            f"bad host {raw!r}: a '/', '?' or '#' in a password ends the host part of a URL; write it as "
            "%2F, %3F, %23 (testinfra decodes them)"
        )
    spec = mask_password(given)  # as every message shows it; the checks below read only its other parts
    backend, sep, rest = spec.partition("://")
    if not sep or backend not in BACKENDS:
        raise DoctorError(f"bad host {spec!r}: use BACKEND://HOST with BACKEND in {', '.join(BACKENDS)}")
    netloc = rest.split("?", 1)[0].split("/", 1)[0]
    problem = None if backend in HOSTLESS_BACKENDS else _netloc_problem(backend, netloc)
    if problem:
        raise DoctorError(f"bad host {spec!r}: {problem}")
    try:  # testinfra reads every host URL with urllib: what it refuses ends the run in a traceback
        urllib.parse.urlsplit(given)
    except ValueError as exc:
        raise DoctorError(f"bad host {spec!r}: {exc}") from exc
    if backend not in HOSTLESS_BACKENDS and not _host_name(netloc):
        raise DoctorError(f"bad host {spec!r}: the {backend} backend needs a host: {backend}://HOST")


def validate_select(expression: str) -> None:
    """A bad pytest -k expression is refused here, with pytest's own parser, rather than by a pytest run."""
    try:
        from _pytest.mark.expression import Expression
    except ImportError:  # pytest moved it: the run's own check (exit 4) still reports it in one line
        return
    try:
        Expression.compile(expression)
    except Exception as exc:  # pytest's ParseError / SyntaxError differ between versions
        reason = _first_line(str(getattr(exc, "msg", None) or exc))
        if getattr(exc, "offset", None):
            reason += f" (column {exc.offset})"
        raise DoctorError(f"bad -k expression {expression!r}: {reason}") from exc


def validate(
    hosts: list[str], role: str, profile: str, method: str | None = None, select: str | None = None
) -> None:
    if role not in ROLES:
        raise DoctorError(f"unknown role {role!r}; choose one of {', '.join(ROLES)}")
    if not hosts:
        raise DoctorError("no host given: --hosts takes testinfra URLs, comma separated (local:// for here)")
    for spec in hosts:
        validate_host(spec)
    if method is not None and method.upper() not in KT_METHODS:
        raise DoctorError(f"unknown --method {method!r}; kt-kernel methods: {', '.join(sorted(KT_METHODS))}")
    if select is not None:
        validate_select(select)
    load_profile(profile)  # UnknownProfileError names the known ones


def validate_options(options: dict) -> None:
    """--python/--sft-python/--health-url/--supervisor-dir: an empty one was dropped without a word, a health
    URL that is not http(s) became a failed check instead of bad input."""
    for key in ("python", "sft_python", "health_url", "supervisor_dir"):
        value = options.get(key)
        if value is not None and not value.strip():
            raise DoctorError(f"--{key.replace('_', '-')} is empty")
    supervisor_dir = options.get("supervisor_dir")
    if supervisor_dir is not None and not supervisor_dir.startswith("/"):
        raise DoctorError(f"--supervisor-dir {supervisor_dir!r}: give its absolute path on the host")
    if options.get("health_url") is not None:
        from ktinfra.bench.client import check_url

        try:
            check_url(options["health_url"], base=False)  # fetched as given, ?query and all
        except ValueError as exc:
            raise DoctorError(f"--health-url: {_masked(str(exc), options['health_url'])}") from None


def _masked(text: str, url: str) -> str:
    """`text` with `url` (also as repr() writes it) shown as bench shows URLs: user:password@ as ***@."""
    from ktinfra.bench.client import shown_url

    try:
        shown = shown_url(url)
    except ValueError:  # urlsplit refuses it (an unbalanced [): hide everything before the host
        userinfo, at, rest = url.partition("://")[2].split("/", 1)[0].rpartition("@")
        shown = url.replace(userinfo + at, "***@", 1) if at else url
    if shown == url:
        return text
    return text.replace(repr(url)[1:-1], repr(shown)[1:-1]).replace(url, shown)


def _hidden(text: str, url: str | None) -> str:
    """`text` with `url` masked (_masked) and then each secret it carries, wherever it stands alone: the
    password and every secret-named query value (?api_key=, token, ...), as given and %-decoded. The health
    check's own errors quote parts of the URL (urllib's InvalidURL names the path and query it refused: a
    '/he alth?api_key=KEY' whose space requests would have quoted), which the whole URL's masking misses.
    Secrets shorter than 4 characters are left: masking every '1' of the report would say nothing."""
    if not url:
        return text
    from ktinfra.bench.client import _SECRET_PARAM

    text = _masked(text, url)
    try:
        parts = urllib.parse.urlsplit(url)
        secrets = [parts.password or ""]
    except ValueError:
        parts, secrets = None, []
    if parts is not None:
        for name, eq, value in (f.partition("=") for f in parts.query.split("&")):
            if eq and _SECRET_PARAM.search(name):
                secrets.append(value)
    found = {s for secret in secrets for s in (secret, urllib.parse.unquote_plus(secret)) if len(s) >= 4}
    for secret in sorted(found, key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


HEALTH_URL_ENV = "KTINFRA_SUITE_HEALTH_URL"  # tests/infra/conftest.py's default for --kt-health-url


def _suite_env(health_url: str | None = None, ansible: bool = True) -> dict:
    """The suite's environment: for ansible:// hosts the venv's bin first (testinfra's ansible backend calls
    ansible-inventory and ansible from PATH), and its output in UTF-8 whatever this process's locale or
    PYTHONIOENCODING says. Without PYTEST_ADDOPTS: a developer's `-k unit` or `-x` there ran a part of the
    suite (the rest deselected without a word) and doctor said every check passed.
    Otherwise the venv's bin goes last: local:// runs the target's commands with this PATH, and ktinfra's
    python3 first hid the one of the env the user activated (a conda env named otherwise than the
    profile's, found as python3 on PATH): that env was 'not installed'. Last, it is still the python3 of
    the probes where the PATH has none (ktinfra run by its path, a uv-managed python)."""
    venv_bin, path = str(Path(sys.executable).parent), os.environ.get("PATH", "")
    path = f"{venv_bin}{os.pathsep}{path}" if ansible else f"{path}{os.pathsep}{venv_bin}"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_ADDOPTS", HEALTH_URL_ENV)}
    if health_url:  # a key in it stays out of the suite's argv, which any user of the host may read
        env[HEALTH_URL_ENV] = health_url
    return {**env, "PATH": path, "PYTHONIOENCODING": "utf-8:backslashreplace"}


def _plugin_args(env: dict) -> list[str]:
    """-p testinfra.plugin where PYTEST_DISABLE_PLUGIN_AUTOLOAD is set (a developer's or CI's environment):
    pytest then loaded no testinfra, and the run ended 'the suite did not run (pytest exit 4) ...
    unrecognized arguments: --hosts=local://'. Only there: beside the autoloaded plugin pytest refuses it
    ('Plugin already registered under a different name')."""
    return ["-p", "testinfra.plugin"] if env.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD") else []


def resolve_hosts(hosts: list[str]) -> None:
    """Each --hosts entry read as the suite's testinfra reads it, before the suite runs: a backend whose
    Python package is not installed (paramiko, pywinrm) or an ansible:// inventory that cannot be read ended
    the run in a 20-line INTERNALERROR dump, and an ansible:// pattern matching no inventory host was left
    out without a word (with local:// beside it, doctor passed on local:// alone)."""
    try:
        from testinfra.backend import get_backends
    except ImportError:  # the suite's own run says pytest-testinfra is missing (--hosts unknown)
        return
    path = _suite_env()["PATH"]
    for given in hosts:
        spec = mask_password(given)
        if given.startswith("ansible://") and shutil.which("ansible-inventory", path=path) is None:
            raise DoctorError(f"bad host {spec!r}: ansible:// needs ansible-inventory (ansible-core) on PATH")
        saved = os.environ.get("PATH")
        os.environ["PATH"] = path  # testinfra runs ansible-inventory with this process's environment
        try:
            found = get_backends([given])
        except Exception as exc:  # RuntimeError (package missing, no inventory parsed), AssertionError ...
            reason = _first_line(str(exc)).replace(given, spec) or type(exc).__name__
            raise DoctorError(f"bad host {spec!r}: {reason}") from None
        finally:
            if saved is None:
                os.environ.pop("PATH", None)
            else:
                os.environ["PATH"] = saved
        if not found:
            query = urllib.parse.parse_qs(urllib.parse.urlsplit(given).query)
            inventory = query.get("ansible_inventory", ["ansible.cfg's"])[0]
            raise DoctorError(f"bad host {spec!r}: matches no host of the inventory ({inventory})")


def pytest_args(suite: Path, junit: Path, hosts: list[str], role: str, profile: str, options: dict) -> list:
    args = [str(suite), f"--hosts={','.join(hosts)}", f"--kt-role={role}", f"--kt-profile={profile}"]
    args += [
        "-p",
        "no:cacheprovider",
        "-q",
        "-rN",
        "-o",
        "junit_logging=system-out",
        "-o",
        "junit_family=xunit1",
        f"--junitxml={junit}",
    ]
    for name, value in options.items():
        if name == "select" and value:
            args += ["-k", value]
        elif name == "health_url":  # by the environment (_suite_env): an argv is in every user's `ps`
            continue
        elif value:
            args.append(f"--kt-{name.replace('_', '-')}={value}")
    return args


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def check_ids(suite: Path) -> list[str]:
    """The suite's checks as MODULE.NAME (read from its source, without running it). A file that does not
    parse is left out: the suite's own run reports it."""
    ids = []
    for path in sorted(suite.glob("test_*.py")):
        module = path.stem.removeprefix("test_")
        try:
            tree = ast.parse(path.read_bytes())
        except (SyntaxError, ValueError):  # ValueError: a null byte in the source
            continue
        ids += [
            f"{module}.{node.name.removeprefix('test_')}"
            for node in tree.body
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")
        ]
    return ids


# a -k identifier as pytest's expression lexer reads one
_SELECT_IDENT = re.compile(r"(?:\w|:|\+|-|\.|\[|\]|\\|/)+")


def pytest_select(select: str, ids: list[str]) -> str:
    """`-k` with each check id as the report shows it (MODULE.NAME, MODULE.NAME[PARAMS]) written in the names
    pytest matches -k against (test_MODULE.py, test_NAME[HOST-PARAMS]): as given, an id matched no check, so
    `-k services.health_endpoint_answers`, copied from the report or from doctor's own list of checks, ended
    in 'no check matches'. Every other word goes to pytest as it is."""
    known = set(ids)

    def as_pytest_names(found: re.Match) -> str:
        word = found.group()
        base, bracket, params = word.partition("[")
        if base not in known or (bracket and (not params.endswith("]") or "[" in params)):
            return word
        module, name = base.split(".", 1)
        terms = [f"test_{module}.py", f"test_{name}["] + ([f"-{params}"] if params not in ("", "]") else [])
        return f"({' and '.join(terms)})"

    return _SELECT_IDENT.sub(as_pytest_names, select)


def _no_match(select: str, suite: Path) -> DoctorError:
    ids = check_ids(suite)
    shown = ", ".join(ids[:6]) + (", ..." if len(ids) > 6 else "")
    return DoctorError(f"no check matches -k {select!r} (checks: {shown})")


def _full_message(node: ET.Element) -> str | None:
    """The whole message where pytest (>= 9) cut the `message` attribute at 500 characters and added
    "[+N more lines; full report in element text]" (or "[truncated; ...]"): the element text holds the
    report, a traceback whose "E   " lines are the message, or for pytest.fail(pytrace=False) the message
    alone. None where the attribute is whole."""
    short = node.get("message") or ""
    if not short.endswith("full report in element text]") or not node.text:
        return None
    lines = node.text.splitlines()
    starts = [  # where a block of "E   " lines begins
        i
        for i, line in enumerate(lines)
        if re.match(r"E {3,}\S", line) and (i == 0 or not lines[i - 1].startswith("E"))
    ]
    if not starts:
        return node.text
    first = starts[-1]  # the last block: a chained exception's own, as pytest's crash message reads
    indent = len(re.match(r"E +", lines[first]).group())
    block = []
    for line in lines[first:]:
        if not line.startswith("E"):
            break
        block.append(line[indent:])
    return "\n".join(block)


def _message(node: ET.Element) -> str:
    text = (_full_message(node) or node.get("message") or node.text or "").strip()
    text = text.removeprefix("failed on setup with ").strip('"')
    for prefix in ("Failed: ", "AssertionError: ", "Skipped: "):
        text = text.removeprefix(prefix)
    return _first(text.split("\nassert ")[0], KEPT_CHARS)


# a check's message and output are kept to this many characters each: the junit file they come from is gone
# with the suite's temp dir, so a cut says how much went
KEPT_CHARS = 2000


def _first(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n[... {len(text) - limit} more characters not kept]"


def _last(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"[{len(text) - limit} earlier characters not kept ...]\n{text[-limit:]}"


def parse_junit(path: Path) -> list[Check]:
    checks = []
    for case in ET.parse(path).iter("testcase"):
        module = case.get("classname", "").rsplit(".", 1)[-1].removeprefix("test_")
        name = case.get("name", "")
        base, _, params = name.partition("[")
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        params = params.rstrip("]")
        host = props.get("kt_host") or ("local" if params.split("-")[0] == "local" else params)
        # the suite records the check's own parameters; older results carry them only in the test id
        extra = props["kt_params"] if "kt_params" in props else params.removeprefix(host).strip("-")
        check_id = f"{module}.{base.removeprefix('test_')}" + (f"[{extra}]" if extra else "")
        status, message = "passed", ""
        for tag in ("failure", "error", "skipped"):
            node = case.find(tag)
            if node is not None:
                status = {"failure": "failed"}.get(tag, tag)
                message = _message(node)
                break
        out = case.find("system-out")
        output = (out.text or "").strip() if out is not None else ""
        output = output.split("Captured Out ---", 1)[-1].strip("- \n")
        checks.append(
            Check(check_id, host, status, message, _last(output, KEPT_CHARS), float(case.get("time", 0)))
        )
    return checks


# module -> the distribution that brings it: what the suite runs with (ktinfra's ops extra)
SUITE_TOOLS = {"pytest": "pytest", "testinfra": "pytest-testinfra"}


def check_suite_tools() -> None:
    """pytest and pytest-testinfra in this python (the suite runs with it): without them the run ended in
    'the suite did not run (pytest exit 1): ... No module named pytest', or in pytest's own usage error,
    without a word on what to install."""
    missing = [dist for module, dist in SUITE_TOOLS.items() if importlib.util.find_spec(module) is None]
    if missing:
        raise DoctorError(
            f"the KT host suite runs with pytest and pytest-testinfra; {' and '.join(missing)} not installed "
            f"for {sys.executable}: install them there (in a ktinfra checkout: pip install -e '.[ops]')"
        )


def run(hosts: list[str], role: str = "serve", profile: str = "kt-0.7", **options) -> DoctorReport:
    """Run the suite against `hosts`; raises DoctorError when it cannot run, never on failed checks."""
    validate(hosts, role, profile, options.get("method"), options.get("select"))
    validate_options(options)
    check_suite_tools()
    suite = suite_dir()
    resolve_hosts(hosts)
    with tempfile.TemporaryDirectory(prefix="ktinfra-doctor-") as tmp:
        junit = Path(tmp) / "junit.xml"
        env = _suite_env(options.get("health_url"), any(h.startswith("ansible://") for h in hosts))
        cmd = [sys.executable, "-m", "pytest", *_plugin_args(env)]
        select = options.get("select")
        selected = {**options, "select": pytest_select(select, check_ids(suite))} if select else options
        cmd += pytest_args(suite, junit, hosts, role, profile, selected)
        done = subprocess.run(
            cmd, capture_output=True, text=True, encoding="utf-8", errors="replace", env=env
        )
        output = done.stdout + done.stderr
        if select and done.returncode == 4 and "Wrong expression passed to '-k'" in output:
            detail = output.split("Wrong expression passed to '-k'", 1)[1]
            raise DoctorError(f"bad -k expression {select!r}{_first_line(detail)}")
        if select and done.returncode == 5:  # pytest: nothing collected, i.e. -k deselected every check
            raise _no_match(select, suite)
        if done.returncode not in (0, 1) or not junit.is_file():
            tail = output.strip()[-1500:]
            tail = _hidden(tail, options.get("health_url"))  # pytest echoes its arguments in some errors
            raise DoctorError(f"the suite did not run (pytest exit {done.returncode}):\n{tail}")
        checks = parse_junit(junit)
    for check in checks:
        check.message = _hidden(check.message, options.get("health_url"))
        check.output = _hidden(check.output, options.get("health_url"))
    if not checks:
        if options.get("select"):
            raise _no_match(options["select"], suite)
        raise DoctorError("the suite selected no checks")
    shown = [mask_password(h) for h in hosts]
    return DoctorReport(hosts=shown, role=role, profile=profile, checks=checks, pytest_rc=done.returncode)
