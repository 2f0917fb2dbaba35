"""Services: KT serve units enabled and active (or, where PID 1 is not systemd, kt_serve's supervisord
programs running); each serve health endpoint answers.

Serve units are ktinfra-serve@NAME.service (ktinfra render) or hand-made sglang*.service; the one-shot job
units (ktinfra-convert@, ktinfra-train@) are not expected to stay active and are not checked here.
"""

import configparser
import re
import shlex

import pytest

from ktinfra.bench.client import shown_url

UNIT_PATTERNS = ("ktinfra-serve*", "sglang*")
DEFAULT_HEALTH_URL = "http://127.0.0.1:30000/health"
SERVE_ENV_DIR = "/etc/ktinfra/serve"  # kt_serve_config_dir's default: where render's env files go
SUPERVISOR_DIR = "/etc/ktinfra/supervisor"  # kt_serve_supervisor_dir's default (--kt-supervisor-dir)
# in kt_serve_supervisor_venv's default: asked where the programs' conf names no venv (supervisorctl_path)
SUPERVISORCTL = "/opt/ktinfra/envs/supervisor/bin/supervisorctl"
# supervisorctl waits on supervisord's socket without end: a supervisord that accepts and never answers
# (stopped by SIGSTOP, stuck writing a log to a hung disk) held the check, and doctor, for good
SUPERVISORCTL_TIMEOUT = 30
SUPERVISOR_STATES = ("STOPPED", "STARTING", "RUNNING", "BACKOFF", "STOPPING", "EXITED", "FATAL", "UNKNOWN")
# user:password@ in the URL goes as Basic auth (as curl and requests send it): urllib alone took
# "user:password@host" for the host name and failed with "Name or service not known". A redirect is not
# followed (as curl does not): urlopen went on to wherever it pointed (a proxy's login page answering 200)
# and passed, with the Authorization header sent along to that other place.
# The whole request has a deadline (HEALTH_DEADLINE s, SIGALRM): urlopen's timeout bounds each socket read
# only, so a server that dripped its status line and headers a byte every few seconds held the check (and
# doctor) for minutes. The URL (it may carry user:password@ or ?api_key=) is read from a 0600 file the
# check removes at once, not from argv, where any user's `ps` on the target showed it for the request's
# duration.
HEALTH_DEADLINE = 20
HEALTH_CHECK = (
    "import base64,os,signal,sys,urllib.error,urllib.parse,urllib.request\n"
    "class Late(Exception):\n"
    "    pass\n"
    "def late(*args):\n"
    "    raise Late()\n"
    "signal.signal(signal.SIGALRM, late); signal.alarm(int(sys.argv[2]))\n"
    "with open(sys.argv[1]) as f:\n"
    "    url = f.read()\n"
    "os.unlink(sys.argv[1])\n"
    "u = urllib.parse.urlsplit(url); head = {}\n"
    "if '@' in u.netloc:\n"
    "    who = urllib.parse.unquote(u.username or '') + ':' + urllib.parse.unquote(u.password or '')\n"
    "    head['Authorization'] = 'Basic ' + base64.b64encode(who.encode()).decode()\n"
    "    u = u._replace(netloc=u.netloc.rpartition('@')[2])\n"
    "class Stay(urllib.request.HTTPRedirectHandler):\n"
    "    def redirect_request(self, *args):\n"
    "        return None\n"
    "try:\n"
    "    ask = urllib.request.Request(u.geturl(), headers=head)\n"
    "    r = urllib.request.build_opener(Stay).open(ask, timeout=10)\n"
    "    signal.alarm(0); print(r.status)\n"
    "except Late:\n"
    "    print(f'TimeoutError: no complete answer within {sys.argv[2]} s'); sys.exit(1)\n"
    "except urllib.error.HTTPError as e:\n"
    "    to = e.headers.get('Location') if 300 <= e.code < 400 else None\n"
    "    print(f'{e.code} redirect to {to} (not followed)' if to else f'HTTPError {e}'); sys.exit(1)\n"
    "except Exception as e:\n"
    "    if isinstance(e.__context__, Late) or isinstance(getattr(e, 'reason', None), Late):\n"
    "        print(f'TimeoutError: no complete answer within {sys.argv[2]} s'); sys.exit(1)\n"
    "    print(type(e).__name__, e); sys.exit(1)\n"
)
# The URL goes into a fresh 0600 file by a command that ends at once (printf is a shell builtin): the
# command line holding it lives for milliseconds, not for the request.
URL_FILE = "umask 077 && f=$(mktemp) && printf '%s' {url} > \"$f\" && printf '%s' \"$f\""


@pytest.fixture(scope="session")
def supervisor_dir(pytestconfig) -> str:
    """kt_serve_supervisor_dir on the target: a host set up with another one had its supervised-programs
    check skipped as 'not installed', and doctor passed with every program down."""
    return pytestconfig.getoption("kt_supervisor_dir") or SUPERVISOR_DIR


@pytest.fixture(scope="module")
def init_name(host) -> str:
    return pid1_name(host)


def pid1_name(host) -> str:
    """The name of PID 1's program. Where /proc hides other users' processes (hidepid=2, doctor not root)
    /proc/1/comm is not there, and every service check was an error quoting testinfra's CommandResult:
    systemd's own test (sd_booted(): /run/systemd/system is a directory) then tells systemd apart."""
    read = host.run("cat /proc/1/comm")
    if read.rc == 0 and read.stdout.strip():
        return read.stdout.strip()
    if host.run("test -d /run/systemd/system").rc == 0:
        return "systemd"
    return "unknown (/proc/1/comm hidden)"


@pytest.fixture(scope="module")
def units(host, pytestconfig, init_name) -> list[str]:
    named = pytestconfig.getoption("kt_unit")
    if named or init_name != "systemd":
        return named
    return installed_units(host)


DOWN_STATES = ("inactive", "failed")  # ActiveStates of a unit that does not run and is not starting


def installed_units(host) -> list[str]:
    """The units matching UNIT_PATTERNS. The patterns go quoted: bare, the target's shell expanded them
    against its working directory (ssh: the user's home), so a ~/sglang checkout turned sglang* into
    "sglang", which names no unit, and the hand-made sglang.service went unchecked (skipped)."""
    patterns = shlex.join(UNIT_PATTERNS)
    said = []
    for command in ("list-unit-files", "list-units --all"):
        listed = host.run(f"systemctl {command} --no-legend --plain --type=service {patterns}")
        # list-unit-files exits 1 in silence where no file matches; with a reason (no bus) the empty list
        # was read as 'none installed'
        if listed.rc != 0 and listed.stderr.strip():
            reason = listed.stderr.strip()[-300:]
            pytest.fail(f"cannot list the serve units: systemctl {command}: {reason}", pytrace=False)
        said.append(listed.stdout)
    names = {line.split()[0] for line in "".join(said).splitlines() if line.strip()}
    names = sorted(n for n in names if not n.endswith("@.service"))  # templates are not units that run
    stopped = [name for name in names if set_to_stopped(host, name)]
    if stopped:
        shown = ", ".join(stopped)
        print(f"not checked (instances disabled and down: kt_serve state stopped or absent): {shown}")
    removed = [name for name in names if name not in stopped and removed_and_down(host, name)]
    if removed:
        shown = ", ".join(removed)
        print(f"not checked (unit file removed, the unit down; systemctl reset-failed clears it): {shown}")
    found = UnitList(name for name in names if name not in stopped and name not in removed)
    found.passed_over = [f"{name} (disabled and down)" for name in stopped]
    found.passed_over += [f"{name} (unit file removed)" for name in removed]
    return found


class UnitList(list):
    """The units to check, and those installed_units passed over ('UNIT (why)'): where none is left, the
    skips said 'no unit matching ... installed' / 'no serve unit installed' on a host that lists them."""

    passed_over: list[str] = []


def removed_and_down(host, unit: str) -> bool:
    """A unit whose file was removed (LoadState not-found) and that does not run. One that failed before its
    file went stays listed by list-units --all ('not-found failed failed', until reset-failed; checked in the
    debian12-systemd image), and the units check failed on it with 'no such unit' on a host where it was
    removed on purpose. One still running from a removed file is checked: nothing starts it at boot."""
    props, unknown = unit_properties(host, unit)
    return not unknown and props.get("LoadState") == "not-found" and props.get("ActiveState") in DOWN_STATES


def set_to_stopped(host, unit: str) -> bool:
    """An instance unit (NAME@INSTANCE) disabled and down, as kt_serve leaves one set to stopped (or removed).
    One that failed before it was stopped stays listed (`loaded failed failed`, until reset-failed), and the
    checks failed on it ('not enabled (disabled)', 'failed', its health URL refused) on a host where every
    instance meant to run was up; one that stopped cleanly is unloaded and was never asked."""
    if "@" not in unit:
        return False
    enabled = host.run(f"systemctl is-enabled -- {shlex.quote(unit)}").stdout.strip()
    props, unknown = unit_properties(host, unit)
    return enabled == "disabled" and not unknown and props.get("ActiveState") in DOWN_STATES


def unit_command_url(host, unit: str) -> str:
    """The health URL of the server a unit's own command line starts: sglang's --host and --port where it
    names them (a hand-made sglang.service on --port 8000 was asked on 30000 and failed 'Connection
    refused' while it served), else sglang's default. 0.0.0.0 and :: are asked on the loopback.

    systemctl shows each command as `{ path=P ; argv[]=ARGS ; ignore_errors=...}`, ARGS joined by spaces
    unquoted: an argument's own ';' (sh -c 'set -a; . ENV; exec ... --port 8000') ended ARGS there, and the
    port after it was never seen."""
    shown = host.run(f"systemctl show -p ExecStart --value {shlex.quote(unit)}").stdout
    argv = " ".join(re.findall(r"argv\[\]=(.*?) ; ignore_errors=", shown)).split()
    given = {}
    for i, word in enumerate(argv):
        name, eq, value = word.partition("=")
        if name in ("--host", "--port"):
            given[name] = value if eq else (argv[i + 1] if i + 1 < len(argv) else "")
    port = given.get("--port", "")
    address = given.get("--host", "127.0.0.1")
    if not port.isdigit() and "--host" not in given:
        return DEFAULT_HEALTH_URL
    address = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(address, address)
    address = f"[{address}]" if ":" in address else address
    return f"http://{address}:{port if port.isdigit() else 30000}/health"


def assigned_health_url(env_text: str) -> str:
    """KT_HEALTH_URL as an env file leaves it: the last assignment, indented or not, wins (systemd and sh
    alike), as a later file's wins over an earlier one's. The first was taken: a file where a port change was
    appended (or a second EnvironmentFile= setting it) was asked on the old port."""
    found = re.findall(r"^[ \t]*KT_HEALTH_URL=['\"]?([^'\"\s]+)", env_text, re.M)
    return found[-1] if found else ""


def unit_health_url(host, unit: str) -> str:
    """KT_HEALTH_URL from the unit's environment file (ktinfra render writes it), else the URL its command
    line gives (unit_command_url).

    An optional file (EnvironmentFile=-PATH) that is not there is passed over, as systemd does; one that
    cannot be read (a 0600 env file and doctor not root) fails the check with the reason. Both ended the
    check in a RuntimeError traceback of testinfra's `cat`. Whether it is there is cat's own ENOENT: `test -e`
    is false too for a file in a directory doctor may not enter (0700 root's), which was passed over as
    absent and the unit asked at its command line's (or sglang's default) URL instead."""
    listed = host.run(f"systemctl show -p EnvironmentFiles --value {shlex.quote(unit)}").stdout
    url = ""
    for line in listed.splitlines():
        path, _, ignore = line.strip().partition(" (ignore_errors=")
        if not path.startswith("/"):
            continue
        read = host.run(f"LC_ALL=C cat -- {shlex.quote(path)}")
        if read.rc != 0:
            if ignore.startswith("yes") and "No such file or directory" in read.stderr:
                continue
            said = (read.stderr or read.stdout).strip()
            pytest.fail(
                f"{unit}: cannot read its environment file {path} for KT_HEALTH_URL ({said}): run doctor as "
                "root, or name the URL (ktinfra doctor --health-url, pytest --kt-health-url)",
                pytrace=False,
            )
        url = assigned_health_url(read.stdout) or url
    return url or unit_command_url(host, unit)


RUNNING_STATES = ("active", "reloading", "refreshing")  # what `systemctl is-active` exits 0 on
# the units whose start starts this one: a static unit (no [Install]) none of them names starts by hand only
PULLED_BY = ("WantedBy", "RequiredBy", "UpheldBy", "BoundBy", "TriggeredBy")


def unit_properties(host, unit: str) -> tuple[dict[str, str], str]:
    """The unit's states, and why systemctl could not tell them ("" when it could: no system bus, ...)."""
    names = ("LoadState", "LoadError", "ActiveState", "SubState", "Result", "NRestarts", *PULLED_BY)
    shown = host.run(f"systemctl show {' '.join(f'-p {n}' for n in names)} -- {shlex.quote(unit)}")
    props = dict(line.partition("=")[::2] for line in shown.stdout.splitlines() if "=" in line)
    return props, "" if shown.rc == 0 else (shown.stderr or shown.stdout).strip()[-300:] or f"exit {shown.rc}"


def unit_problems(host, unit: str) -> list[str]:
    """What is wrong with a serve unit, in words that tell its states apart. `activating` covers both a
    server still loading its model (ExecStartPost waits for its health) and systemd's auto-restart after it
    died: the check said "UNIT activating" for either, as for nothing a user could act on."""
    (props, unknown), quoted = unit_properties(host, unit), shlex.quote(unit)
    if unknown:
        return [f"{unit}: systemctl cannot tell its state ({unknown})"]
    if props.get("LoadState") == "not-found":
        return [f"{unit}: no such unit (systemctl list-unit-files --type=service lists those there are)"]
    if props.get("LoadState") == "masked":  # neither enabling nor starting it works until it is unmasked
        return [f"{unit} masked: systemd starts it neither at boot nor by hand; systemctl unmask {quoted}"]
    if props.get("LoadState") in ("bad-setting", "error"):  # `systemctl start` refuses it: fix the file first
        error = props.get("LoadError", "")
        why = error.partition(" ")[2].strip('"') or props["LoadState"]
        return [
            f"{unit} not loaded ({props['LoadState']}: {why}): journalctl -u {quoted} names the line; fix "
            "the unit file, then systemctl daemon-reload"
        ]
    enabled = host.run(f"systemctl is-enabled -- {quoted}")
    bad = []
    if enabled.rc != 0:  # disabled, linked, bad: testinfra's is_enabled raised on all but disabled
        word = enabled.stdout.strip() or (enabled.stderr.strip() or "unknown")
        bad.append(f"{unit} not enabled ({word})")
    elif enabled.stdout.strip() == "static" and not any(props.get(name, "").strip() for name in PULLED_BY):
        # is-enabled exits 0 on static: a hand-made unit without [Install], started by hand, passed as enabled
        bad.append(
            f"{unit} static: no [Install] section and no unit wants it, so nothing starts it at boot; add "
            f"[Install] WantedBy=multi-user.target to it, then systemctl enable {quoted}"
        )
    active, sub = props.get("ActiveState", ""), props.get("SubState", "")
    journal = f"see journalctl -u {quoted}"
    if active in RUNNING_STATES:
        return bad
    if active == "activating" and sub.startswith("auto-restart"):
        bad.append(
            f"{unit} restarting (activating, {sub}): it exited ({props.get('Result', '?')}) and systemd "
            f"starts it again, {props.get('NRestarts', '?')} restarts so far; {journal}"
        )
    elif active == "activating":
        bad.append(
            f"{unit} still starting (activating, {sub}): a server loading its model is not up yet; run "
            f"doctor again once it is, or {journal}"
        )
    elif active == "failed":
        bad.append(f"{unit} failed ({props.get('Result', '?')}): {journal}")
    elif active == "inactive":
        bad.append(f"{unit} inactive ({sub or '?'}): not started; systemctl start {quoted}")
    else:
        bad.append(f"{unit} {active or 'in no known state'} ({sub or '?'})")
    return bad


def test_units_enabled_and_active(host, units, init_name):
    if init_name != "systemd":
        if units:
            pytest.fail(f"units {units} asked for, but PID 1 is {init_name!r}, not systemd", pytrace=False)
        pytest.skip(f"PID 1 is {init_name!r}, not systemd: no units installed")
    over = getattr(units, "passed_over", [])
    if not units and over:
        pytest.skip(f"no unit matching {' '.join(UNIT_PATTERNS)} to check (passed over: {', '.join(over)})")
    if not units:
        pytest.skip(f"no unit matching {' '.join(UNIT_PATTERNS)} installed")
    bad = [problem for unit in units for problem in unit_problems(host, unit)]
    assert not bad, "; ".join(bad)
    print(f"units enabled and active: {', '.join(units)}")


# sudo on the controller reaches local:// only: over ssh:// the target's commands run as the URL's user
# (testinfra's ?sudo=true runs them through sudo there)
ROOT_HINT = "run doctor as root (sudo ktinfra doctor ...; over ssh: ssh://root@HOST, or HOST?sudo=true)"


def listed_names(host, path: str, what: str, hint: str = "") -> list[str]:
    """The names in directory `path`, [] where it is not there. One doctor may not list (0700 root's, doctor
    run as a normal user) fails the check: it read as empty, so its env files or programs were 'not there'
    and the check was skipped while a server was down."""
    listed = host.run(f"LC_ALL=C ls -1 -- {shlex.quote(path)}")
    if listed.rc == 0:
        return listed.stdout.splitlines()
    if "No such file or directory" in listed.stderr:
        return []
    said = (listed.stderr or listed.stdout).strip()[-300:]
    pytest.fail(f"cannot list {what} in {path} ({said}): {ROOT_HINT}{hint}", pytrace=False)


def supervisor_sections(host, sup_dir: str | None = None) -> dict[str, dict[str, str]]:
    """{section: {option: value}} of kt_serve's conf.d as supervisord reads it: its UnhosedConfigParser is a
    RawConfigParser with ';' and '#' inline comments and strict=False, fed the [include] glob's files in
    sorted order. Lines grepped for 'autostart=' were taken from whichever section they stood in, so an
    event listener's autostart= after its program's decided the program's; 'autostart = true' was not seen."""
    conf_d = f"{sup_dir or SUPERVISOR_DIR}/conf.d"
    names = listed_names(host, conf_d, "supervisord's program files")
    parser = configparser.RawConfigParser(inline_comment_prefixes=(";", "#"), strict=False)
    for path in sorted(f"{conf_d}/{name}" for name in names if name.endswith(".conf")):
        read = host.run(f"LC_ALL=C cat -- {shlex.quote(path)}")
        if read.rc != 0:  # its programs were left out without a word: a started one went unchecked
            said = (read.stderr or read.stdout).strip()[-300:]
            pytest.fail(f"cannot read supervisord's program file {path} ({said}): {ROOT_HINT}", pytrace=False)
        try:
            parser.read_string(read.stdout, source=path)
        except configparser.Error as error:
            reason = " ".join(str(error).split())[:300]
            pytest.fail(f"supervisord cannot read {path} either: {reason}", pytrace=False)
    return {name: dict(parser.items(name)) for name in parser.sections()}


SUPERVISOR_FALSE = ("no", "false", "off", "0")  # supervisor.datatypes.boolean's false words, any case


def program_autostart(host, sup_dir: str | None = None) -> dict[str, bool]:
    """{program: autostart} of the programs in kt_serve's supervisord conf.d (state: started -> true,
    stopped -> false), from each [program:NAME] section's own autostart (supervisord's default: true)."""
    return {
        section.partition(":")[2].strip(): options.get("autostart", "true").lower() not in SUPERVISOR_FALSE
        for section, options in supervisor_sections(host, sup_dir).items()
        if section.startswith("program:")
    }


def autostart_programs(host, sup_dir: str | None = None) -> list[str]:
    """The ktinfra-serve-* programs kt_serve told supervisord to start (state: started -> autostart=true)."""
    return sorted(name for name, start in program_autostart(host, sup_dir).items() if start)


def stopped_instances(host, sup_dir: str | None = None) -> list[str]:
    """The instances kt_serve set to stopped (their program autostart=false): their env file stays, and
    their server is not meant to answer."""
    return sorted(
        name.removeprefix("ktinfra-serve-")
        for name, start in program_autostart(host, sup_dir).items()
        if not start and name.startswith("ktinfra-serve-")
    )


def conf_commands(host, sup_dir: str | None = None) -> list[tuple[str, str]]:
    """(section, command) of each section in kt_serve's conf.d that has a command, as '[program:NAME]'."""
    return [
        (f"[{section}]", options["command"])
        for section, options in supervisor_sections(host, sup_dir).items()
        if "command" in options
    ]


def program_env_files(host, sup_dir: str | None = None) -> dict[str, str]:
    """{instance: env file} as each ktinfra-serve-NAME program's command sources it (`. DIR/NAME.env;`): the
    one place kt_serve writes kt_serve_config_dir for supervisord, which may be another than SERVE_ENV_DIR."""
    found = {}
    for section, command in conf_commands(host, sup_dir):
        sourced = re.search(r"\. (/\S+\.env);", command)
        if section.startswith("[program:ktinfra-serve-") and sourced:
            found[section.removeprefix("[program:ktinfra-serve-").rstrip("]")] = sourced.group(1)
    return found


def supervisor_venvs(host, sup_dir: str | None = None) -> list[str]:
    """The venvs kt_serve's programs name: each program's start-limit event listener runs the venv's python
    (command=VENV/bin/python ...), the one place the role writes kt_serve_supervisor_venv on the host."""
    venvs = []
    for section, command in conf_commands(host, sup_dir):
        python = (command.split(None, 1) or [""])[0]
        if section.startswith("[eventlistener:ktinfra-start-limit-") and python.endswith("/bin/python"):
            if python.removesuffix("/bin/python") not in venvs:
                venvs.append(python.removesuffix("/bin/python"))
    return venvs


def supervisorctl_path(host, sup_dir: str | None = None) -> str:
    """supervisorctl of the venv the role runs supervisord from: the default venv's was asked whatever
    kt_serve_supervisor_venv said, and a host set up with another failed '.../supervisorctl is missing'
    while supervisord ran every program."""
    found = [f"{venv}/bin/supervisorctl" for venv in supervisor_venvs(host, sup_dir)]
    return next((path for path in found if host.file(path).exists), found[0] if found else SUPERVISORCTL)


LISTENER_PREFIX = "ktinfra-start-limit-"  # + NAME: kt_serve's event listener of program ktinfra-serve-NAME


def start_limit_listeners(host, sup_dir: str, programs: list[str]) -> list[str]:
    """The start-limit listeners of `programs` (ktinfra-serve-NAME -> ktinfra-start-limit-NAME) that conf.d
    has: with one down, a server that keeps dying is restarted without end, which the check passed."""
    sections = {section for section, _ in conf_commands(host, sup_dir)}
    names = [LISTENER_PREFIX + program.removeprefix("ktinfra-serve-") for program in programs]
    return [name for name in names if f"[eventlistener:{name}]" in sections]


def program_problem(name: str, state: str | None, ask: str) -> str:
    """What a program that is not RUNNING means and what to run (`ask`: supervisorctl -c CONF). The check
    gave supervisorctl's line alone ('FATAL Exited too quickly (process log may have details)'), and for an
    unknown program a bare 'supervisorctl update', which asks another supervisord or none."""
    if state is None:
        return f"{name} not known to supervisord: {ask} update"
    # a start-limit listener's stdout is supervisord's event protocol (stdout_logfile=NONE): it writes stderr
    stream = " stderr" if name.startswith(LISTENER_PREFIX) else ""
    word, log = state.split(" ", 1)[0], f"{ask} tail {name}{stream}"
    meaning = {
        "STARTING": "still starting; run doctor again in a moment",
        "BACKOFF": f"it exited as it started and supervisord starts it again; see {log}",
        "EXITED": f"it exited and supervisord starts it again; see {log}",
        "FATAL": f"supervisord gave up on it; see {log}, then {ask} start {name}",
        "STOPPED": f"stopped by hand or at kt_serve's start limit (see {log}); {ask} start {name}",
    }.get(word)
    return f"{name} {state}: {meaning}" if meaning else f"{name} {state}"


def test_supervised_programs_running(host, init_name, supervisor_dir):
    """Where PID 1 is not systemd kt_serve runs its instances under supervisord, which nothing starts at
    boot: a container restart leaves the programs down until its start-up command runs."""
    if init_name == "systemd":
        pytest.skip("PID 1 is systemd: kt_serve runs units there, not supervisord programs")
    name = "supervisord.conf"
    conf = f"{supervisor_dir}/{name}"
    # not there, or in a directory doctor may not enter: listing it tells the two apart
    if not host.file(conf).exists and name not in listed_names(host, supervisor_dir, name):
        pytest.skip(
            f"no {conf}: kt_serve's supervisord fallback is not installed (another kt_serve_supervisor_dir: "
            "ktinfra doctor --supervisor-dir DIR, pytest --kt-supervisor-dir=DIR)"
        )
    wanted = autostart_programs(host, supervisor_dir)
    if not wanted:
        pytest.skip(f"no program in {supervisor_dir}/conf.d is to be started")
    wanted += start_limit_listeners(host, supervisor_dir, wanted)
    ctl = supervisorctl_path(host, supervisor_dir)
    supervisord = ctl.removesuffix("supervisorctl") + "supervisord"
    if not host.file(ctl).exists:
        pytest.fail(f"{ctl} is missing (kt_serve_supervisor_venv)", pytrace=False)
    ask = f"{shlex.quote(ctl)} -c {shlex.quote(conf)}"
    start = f"{shlex.quote(supervisord)} -c {shlex.quote(conf)}"
    # exits 3 when a program is not running
    status = host.run(f"timeout -k 5 {SUPERVISORCTL_TIMEOUT} {ask} status")
    if status.rc in (124, 137):
        pytest.fail(
            f"supervisord does not answer within {SUPERVISORCTL_TIMEOUT} s ({ask} status hung): it is "
            f"stopped (kill -CONT PID) or stuck; kill it and start it again: {start}",
            pytrace=False,
        )
    states = {}
    for line in status.stdout.splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[1] in SUPERVISOR_STATES:
            states[fields[0]] = " ".join(fields[1:])
    if not states:
        said = (status.stdout.strip() or status.stderr.strip())[-300:]
        if "Permission denied" in said:  # kt_serve's socket is chmod 0700, root's: it answers, not to us
            pytest.fail(
                f"cannot ask supervisord ({said}): its socket is root's (kt_serve: chmod 0700); run doctor "
                "as root",
                pytrace=False,
            )
        pytest.fail(
            f"supervisord does not answer ({said}): nothing starts it without systemd; run {start}",
            pytrace=False,
        )
    bad = [program_problem(name, states.get(name), ask) for name in wanted
           if not states.get(name, "").startswith("RUNNING")]  # fmt: skip
    assert not bad, "; ".join(bad)
    print(f"supervised programs running: {', '.join(wanted)}")


def args_health_url(env_text: str) -> str:
    """Where the server of an env file that sets no KT_HEALTH_URL listens: the --host and --port of its
    KT_SERVE_ARGS (the last assignment, as sh leaves it; the program passes them to sglang, and render
    derives KT_HEALTH_URL from the same two), sglang's own default for either not given; "" where the file
    sets no KT_SERVE_ARGS."""
    found = re.findall(r"^[ \t]*KT_SERVE_ARGS=(.*)$", env_text, re.M)
    if not found:
        return ""
    words = found[-1].strip().strip("'\"").split()
    given = {}
    for i, word in enumerate(words):
        name, eq, value = word.partition("=")
        if name in ("--host", "--port"):
            given[name] = value if eq else (words[i + 1] if i + 1 < len(words) else "")
    port, host_arg = given.get("--port", ""), given.get("--host", "")
    address = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host_arg, host_arg)
    address = f"[{address}]" if ":" in address else address
    return f"http://{address}:{port if port.isdigit() else 30000}/health"


def env_file_health_urls(host, sup_dir: str | None = None) -> list[str]:
    """KT_HEALTH_URL of every serve env file ktinfra installed: where PID 1 is not systemd kt_serve runs the
    same instances under supervisord, which no unit list shows. One that cannot be read (0600, doctor not
    root) fails the check with the reason: before, the unread file left no URL and the check was skipped; so
    does a directory it may not list (0700 root's), which read as one without env files.
    The env file of an instance set to stopped is passed over (its program is not started, so nothing
    answers there): it failed the check with 'Connection refused' on a host where every instance meant to
    run was up, as systemd's path never asked a stopped, disabled unit.
    A file without KT_HEALTH_URL was dropped without a word (where no file had it, the check was skipped as
    'no serve unit installed' while the programs ran): it is asked where its KT_SERVE_ARGS serve
    (args_health_url); one with neither fails the check, naming the file."""
    or_url = ", or name the URL (ktinfra doctor --health-url, pytest --kt-health-url)"
    listed = listed_names(host, SERVE_ENV_DIR, "the serve environment files", or_url)
    names = [n for n in listed if n.endswith(".env")]
    files = {name.removesuffix(".env"): f"{SERVE_ENV_DIR}/{name}" for name in names}
    files.update(program_env_files(host, sup_dir))  # another kt_serve_config_dir
    stopped = set(stopped_instances(host, sup_dir)) & set(files)
    if stopped:
        shown = ", ".join(sorted(stopped))
        print(f"not asked (kt_serve state stopped, supervisord autostart=false): {shown}")
    urls = set()
    for path in sorted({path for name, path in files.items() if name not in stopped}):
        read = host.run(f"cat -- {shlex.quote(path)}")
        if read.rc != 0:
            said = (read.stderr or read.stdout).strip()
            pytest.fail(
                f"cannot read the serve environment file {path} for KT_HEALTH_URL ({said}): run doctor as "
                "root, or name the URL (ktinfra doctor --health-url, pytest --kt-health-url)",
                pytrace=False,
            )
        assigned = assigned_health_url(read.stdout)
        url = assigned or args_health_url(read.stdout)
        if not url:
            pytest.fail(
                f"{path} sets neither KT_HEALTH_URL nor KT_SERVE_ARGS: where its instance serves is not "
                "known; set KT_HEALTH_URL there (ktinfra render writes it)" + or_url,
                pytrace=False,
            )
        if not assigned:
            print(f"{path} sets no KT_HEALTH_URL: asked at {shown_url(url)}, from its KT_SERVE_ARGS")
        urls.add(url)
    return sorted(urls)


def ask_health(host, probe_python: str, url: str) -> str:
    """The check's answer for `url`: "200", or what went wrong."""
    made = host.run(URL_FILE.format(url=shlex.quote(url)))
    path = made.stdout.strip()
    if made.rc != 0 or not path.startswith("/"):
        return f"cannot write the URL to a temporary file: {(made.stderr or made.stdout).strip()}"
    check = shlex.quote(HEALTH_CHECK)
    try:
        answer = host.run(f"{shlex.quote(probe_python)} -c {check} {shlex.quote(path)} {HEALTH_DEADLINE}")
    finally:
        host.run(f"rm -f {shlex.quote(path)}")  # gone already unless python did not start
    said = answer.stdout.strip() or answer.stderr.strip()
    if answer.rc != 0 and said == "200":  # it printed 200, then failed: not a pass
        return f"200, then exit status {answer.rc}"
    return said


UNLOADED = ("masked", "not-found")  # LoadStates of a unit with no unit file systemd reads


def units_to_ask(host, units: list[str]) -> tuple[list[str], list[str]]:
    """(the units whose health URL is asked, 'UNIT (masked|not-found)' for the others). A masked or missing
    unit has no unit file systemd reads, so no EnvironmentFile= nor ExecStart= to take its URL from: it was
    asked at sglang's default URL and the check failed 'Connection refused' beside the units check's own
    'masked' / 'no such unit', or passed on whatever else answered there."""
    asked, unloaded = [], []
    for unit in units:
        props, unknown = unit_properties(host, unit)
        state = "" if unknown else props.get("LoadState", "")
        if state in UNLOADED:
            unloaded.append(f"{unit} ({state})")
        else:
            asked.append(unit)
    return asked, unloaded


def test_health_endpoint_answers(host, pytestconfig, units, init_name, probe_python, supervisor_dir):
    explicit = pytestconfig.getoption("kt_health_url")
    asked, unloaded = ([], []) if explicit else units_to_ask(host, units)
    if unloaded:
        print(f"not asked (no unit file: the units check reports them): {', '.join(unloaded)}")
    urls = [explicit] if explicit else sorted({unit_health_url(host, u) for u in asked})
    if not urls and init_name != "systemd":
        urls = env_file_health_urls(host, supervisor_dir)
    if not urls:
        stopped = stopped_instances(host, supervisor_dir) if init_name != "systemd" else []
        why = f"; instances set to stopped: {', '.join(stopped)}" if stopped else ""
        over = [*getattr(units, "passed_over", []), *unloaded]
        what = f"no serve unit to ask (passed over: {', '.join(over)})" if over else "no serve unit installed"
        pytest.skip(f"{what} and no --health-url given (pytest: --kt-health-url){why}")
    bad = []
    for url in urls:
        said = ask_health(host, probe_python, url)
        if said != "200":
            bad.append(f"{shown_url(url)}: {said.replace(url, shown_url(url))}")
    assert not bad, "; ".join(bad)
    print(f"health 200 from {', '.join(shown_url(url) for url in urls)}")
