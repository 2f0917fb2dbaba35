"""Verify of molecule/serve-supervisor: kt_serve's supervisord fallback where systemd is not PID 1."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from ansible_run import (
    KT_SERVE,
    REPO,
    http_status,
    interrupt_playbook,
    run_playbook,
    serve_args_of,
    task_output,
)

from ktinfra.render.serve import STOP_TIMEOUT_S

CONF = "/etc/ktinfra/supervisor/supervisord.conf"
CTL = f"/opt/ktinfra/envs/supervisor/bin/supervisorctl -c {CONF}"
# the start-up command docs/readme/roles2.md tells users to put in the container's entrypoint
SUPERVISORD = f"/opt/ktinfra/envs/supervisor/bin/supervisord -c {CONF}"


def test_systemd_is_not_init(host):
    assert host.file("/proc/1/comm").content_string.strip() != "systemd"
    assert not host.file("/etc/systemd/system/ktinfra-serve@.service").exists


def test_supervisord_runs_the_program(host):
    assert host.check_output(f"{CTL} pid").isdigit()
    assert "ktinfra-serve-tiny" in host.run(f"{CTL} status").stdout


def test_program_runs_the_units_exec_start_with_the_env_file(host):
    program = host.file("/etc/ktinfra/supervisor/conf.d/ktinfra-serve-tiny.conf").content_string
    command = next(line for line in program.splitlines() if line.startswith("command="))
    start = "command=/bin/sh -c 'set -a; . /etc/ktinfra/serve/tiny.env; set +a; set -f; exec "
    assert command.startswith(start)
    assert "/opt/kt/envs/kt-kernel/bin/python -c " in command
    assert 'os.environ.pop("KT_API_KEY"' in command and command.endswith("$KT_SERVE_ARGS'")
    assert "autorestart=true" in program
    # the unit's WorkingDirectory= (supervisord spawns nothing where it cannot chdir: the restarts below ran)
    assert "\ndirectory=/var/lib/ktinfra/serve/tiny\n" in program
    assert host.file("/var/lib/ktinfra/serve/tiny").is_directory
    env = host.file("/etc/ktinfra/serve/tiny.env")
    assert env.mode == 0o600 and 'KT_API_KEY="molecule-not-a-secret"' in env.content_string
    assert "molecule-not-a-secret" not in program


VENV = "/opt/ktinfra/envs/supervisor"
LISTENER = f"{VENV}/bin/ktinfra-start-limit"
LISTENER_CONF = "/etc/ktinfra/supervisor/conf.d/ktinfra-serve-tiny.conf"


def test_the_start_limit_listener_is_a_file_run_by_the_venvs_python(host):
    listener = host.file(LISTENER)
    assert listener.mode == 0o755 and listener.user == "root" and listener.group == "root"
    assert "usage: ktinfra-start-limit" in host.check_output(f"{VENV}/bin/python {LISTENER} -h")
    pid = host.check_output(f"{CTL} pid ktinfra-start-limit-tiny")
    argv = host.check_output(f"tr '\\0' '\\n' < /proc/{pid}/cmdline").splitlines()
    assert argv[:3] == [f"{VENV}/bin/python", LISTENER, "ktinfra-serve-tiny"], argv
    sha1 = host.check_output(f"sha1sum {LISTENER}").split()[0]
    assert f'\nenvironment=KTINFRA_START_LIMIT_SHA1="{sha1}"\n' in host.file(LISTENER_CONF).content_string


def test_a_changed_listener_restarts_the_listener_only(host):
    """What a role upgrade with another listener file does: the program's conf names a sha1 the running
    listener was not started with; `update` restarts the listener group, not the server."""
    server = _running_pid(host, "ktinfra-serve-tiny")
    listener = host.check_output(f"{CTL} pid ktinfra-start-limit-tiny")
    old_sha1 = r's/^\(environment=KTINFRA_START_LIMIT_SHA1=\).*/\1"old"/'
    host.check_output(f"sed -i '{old_sha1}' {LISTENER_CONF}")
    host.check_output(f"{CTL} update")  # the running listener now is the one of the older role
    old = host.check_output(f"{CTL} pid ktinfra-start-limit-tiny")
    assert old != listener
    rc, output = run_playbook(KT_SERVE)
    assert rc == 0, output[-3000:]
    new = host.check_output(f"{CTL} pid ktinfra-start-limit-tiny")
    assert new.isdigit() and new != old, output[-3000:]
    assert host.check_output(f"{CTL} pid ktinfra-serve-tiny") == server


def test_the_program_stops_with_the_units_timeout_stop_sec(host):
    assert f"\nstopwaitsecs={STOP_TIMEOUT_S}\n" in host.file(LISTENER_CONF).content_string


def test_the_log_directory_is_roots_only(host):
    """sglang logs its ServerArgs, api_key included, into serve-NAME.log (0644 by supervisord's umask)."""
    assert host.file("/var/log/ktinfra").mode == 0o700


def test_tiny_runs_on_the_stand_in_sglang(host):
    """prepare.yml's stand-in sglang.launch_server in the kt-kernel env: the real program stays up."""
    assert " RUNNING " in host.run(f"{CTL} status ktinfra-serve-tiny").stdout
    assert http_status(host, 30000) == 200


def _settled(host, program: str, timeout: float = 60) -> str:
    """The program's state once it is neither STARTING nor BACKOFF."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        fields = host.run(f"{CTL} status {program}").stdout.split()
        if len(fields) > 1 and fields[1] not in ("STARTING", "BACKOFF"):
            break
        time.sleep(1)
    return fields[1] if len(fields) > 1 else " ".join(fields)


def test_a_server_failing_at_once_ends_fatal_at_the_start_limit_and_fails_the_role(host):
    """A probe on a bare venv (no sglang), `state: stopped`, started by hand: each start fails on the import,
    supervisord gives up (FATAL) after the unit's StartLimitBurst=3 attempts (startretries=2). Asked to start
    it, the role waits for it to settle and fails naming it with the end of its log (before: "ERROR (spawn
    error)", or a pass while it was still STARTING)."""
    tiny = next(i for i in host.ansible.get_variables()["kt_serve_instances"] if i["name"] == "tiny")
    probe = {**tiny, "name": "bare", "port": 30024, "state": "stopped"}
    bare = "/opt/bare"
    host.check_output(f"python3 -m venv --without-pip {bare}")
    extra = {"kt_serve_python": f"{bare}/bin/python"}
    program, log = "ktinfra-serve-bare", "/var/log/ktinfra/serve-bare.log"
    try:
        rc, output = run_playbook(KT_SERVE, extra | {"kt_serve_instances": [probe]})
        assert rc == 0, output[-3000:]
        assert " STOPPED " in host.run(f"{CTL} status {program}").stdout
        started = host.run(f"{CTL} start {program}")  # returns at the first failure: BACKOFF
        assert started.rc != 0, started.stdout
        assert _settled(host, program) == "FATAL"
        time.sleep(5)  # nothing starts it again
        assert " FATAL " in host.run(f"{CTL} status {program}").stdout
        # one traceback per attempt, ending in runpy's ImportError ("No module named 'sglang'" twice in each)
        text = host.file(log).content_string
        assert text.count("ImportError: Error while finding module specification for 'sglang") == 3, text

        rc, output = run_playbook(KT_SERVE, extra | {"kt_serve_instances": [{**probe, "state": "started"}]})
        assert rc != 0, output[-3000:]
        assert task_output(output, "Fail where a started instance's program is not running"), output[-3000:]
        # the message (ansible prints it on stderr, after the play): the program, its state, its log
        said = f"{program} FATAL Exited too quickly (process log may have details): not running under"
        assert said in output and "No module named 'sglang'" in output, output[-3000:]
        assert tiny["api_key"] not in output
    finally:
        rc, output = run_playbook(KT_SERVE, extra | {"kt_serve_instances": [{**probe, "state": "absent"}]})
        host.run(f"rm -rf {bare}")
    assert rc == 0, output[-3000:]
    assert program not in _listed(host)


# A stand-in for sglang (it needs CUDA) that stays up, so that supervisord counts the program RUNNING: the
# same rendered command line, with the real interpreter of a venv whose sglang.launch_server serves HTTP.
STANDIN = "/opt/standin"
STANDIN_SERVER = """import argparse, http.server
parser = argparse.ArgumentParser()
parser.add_argument("--host")
parser.add_argument("--port", type=int)
args, _ = parser.parse_known_args()
http.server.ThreadingHTTPServer((args.host, args.port), http.server.SimpleHTTPRequestHandler).serve_forever()
"""


def _standin_python(host, where: str = STANDIN) -> str:
    host.check_output(f"python3 -m venv --without-pip '{where}'")
    purelib_of = "import sysconfig; print(sysconfig.get_path('purelib'))"
    purelib = host.check_output(f"'{where}/bin/python' -c \"{purelib_of}\"")
    host.check_output(f"mkdir -p '{purelib}/sglang' && touch '{purelib}/sglang/__init__.py'")
    host.check_output(f"cat > '{purelib}/sglang/launch_server.py' <<'EOF'\n{STANDIN_SERVER}EOF")
    return f"{where}/bin/python"


def _listed(host) -> str:
    """`supervisorctl status`, once it is known to come from a supervisord that answered: it lists tiny.
    (A supervisord that is down prints only its refusal, where any removed program is missing too.)"""
    status = host.run(f"{CTL} status")  # exit 3 while a program is not RUNNING: the rc says nothing here
    assert "ktinfra-serve-tiny" in status.stdout, status.stdout + status.stderr
    return status.stdout


def _running_pid(host, program: str, timeout: float = 60) -> str:
    """The pid once supervisord counts the program RUNNING (startsecs=10)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        status = host.run(f"{CTL} status {program}").stdout
        if " RUNNING " in status:
            return host.check_output(f"{CTL} pid {program}")
        time.sleep(1)
    raise AssertionError(f"{program} not RUNNING after {timeout} s: {status}")


# slow (make test-full, not CI's make test): the same started-with record (kt_common) that
# molecule/serve/tests/test_bad_inputs.py::test_a_change_written_by_a_run_that_then_failed_reaches_the_server
# checks under systemd; a restart through supervisorctl: test_a_changed_listener_restarts_the_listener_only
@pytest.mark.slow
def test_a_change_a_cut_off_run_wrote_reaches_the_running_program(host):
    """Ctrl-C after the env file was written, before the restart: supervisord reads the file only when it
    starts the program. Before: the next run found the file in place, queued no restart, and the program
    kept the old arguments."""
    tiny = next(i for i in host.ansible.get_variables()["kt_serve_instances"] if i["name"] == "tiny")
    probe = {**tiny, "name": "cut", "port": 30020}
    changed = {**probe, "overrides": {"chunked_prefill_size": 2048}}
    extra = {"kt_serve_python": _standin_python(host)}
    program = "ktinfra-serve-cut"
    try:
        rc, output = run_playbook(KT_SERVE, extra | {"kt_serve_instances": [probe]})
        assert rc == 0, output[-3000:]
        pid = _running_pid(host, program)
        assert "--chunked-prefill-size 2048" not in serve_args_of(host, pid)
        rc, output = interrupt_playbook(
            KT_SERVE, extra | {"kt_serve_instances": [changed]}, "kt_serve : Read each rendered unit"
        )
        assert rc != 0 and "Install the environment files" in output, output[-3000:]
        assert "--chunked-prefill-size 2048" in host.file("/etc/ktinfra/serve/cut.env").content_string
        assert host.check_output(f"{CTL} pid {program}") == pid  # the cut-off run restarted nothing

        rc, output = run_playbook(KT_SERVE, extra | {"kt_serve_instances": [changed]})
        assert rc == 0, output[-3000:]
        restarted = _running_pid(host, program)
        assert restarted != pid, output[-3000:]
        assert "--chunked-prefill-size 2048" in serve_args_of(host, restarted)

        rc, output = run_playbook(KT_SERVE, extra | {"kt_serve_instances": [changed]})  # and only once
        assert rc == 0 and host.check_output(f"{CTL} pid {program}") == restarted, output[-3000:]
    finally:
        rc, output = run_playbook(KT_SERVE, extra | {"kt_serve_instances": [{**probe, "state": "absent"}]})
        host.run(f"rm -rf {STANDIN}")
    assert rc == 0, output[-3000:]
    assert program not in _listed(host)
    assert not host.file("/etc/ktinfra/serve/cut.env").exists
    assert not host.file("/etc/ktinfra/serve/cut.started-with").exists


def test_a_percent_in_a_path_and_a_glob_in_an_argument_reach_the_server_as_written(host):
    """systemd's ExecStart writes a literal '%' as '%%'. Before, the program escaped it again for supervisord,
    so the server was started from /opt/stand%%in (not found, FATAL); and sh glob-expanded an argument that
    systemd passes as written (/etc/host* became /etc/host.conf /etc/hostname /etc/hosts)."""
    tiny = next(i for i in host.ansible.get_variables()["kt_serve_instances"] if i["name"] == "tiny")
    probe = {**tiny, "name": "odd", "port": 30023, "extra_args": ["--chat-template", "/etc/host*"]}
    where = "/opt/stand%in"
    extra = {"kt_serve_python": _standin_python(host, where), "kt_serve_instances": [probe]}
    program = "ktinfra-serve-odd"
    try:
        rc, output = run_playbook(KT_SERVE, extra)
        assert rc == 0, output[-3000:]
        pid = _running_pid(host, program)
        argv = host.check_output(f"tr '\\0' '\\n' < /proc/{pid}/cmdline").splitlines()
        assert argv[0] == f"{where}/bin/python", argv
        assert argv[argv.index("--chat-template") + 1] == "/etc/host*", argv
        assert http_status(host, 30023) == 200
    finally:
        rc, output = run_playbook(KT_SERVE, {**extra, "kt_serve_instances": [{**probe, "state": "absent"}]})
        host.run(f"rm -rf '{where}'")
    assert rc == 0, output[-3000:]
    assert program not in _listed(host)


def _restart_container(host) -> None:
    """What a container's stop and start (`docker restart`) does: every process ends, the files stay,
    /run's stale supervisord socket and pid file included."""
    container = host.ansible.get_variables()["inventory_hostname"]  # molecule names the container so
    restart = ["docker", "restart", "-t", "5", container]
    subprocess.run(restart, check=True, capture_output=True, timeout=180)


RESULTS = ("ok", "changed", "failed", "fatal", "skipping")
START_SUPERVISORD = "Start supervisord unless it runs"


def _task_status(output: str, task: str) -> str:
    """ok/changed/failed/skipping: the first result line the play printed under `task`."""
    lines = task_output(output, task).splitlines()
    return next(word for word in (line.split(":")[0] for line in lines) if word in RESULTS)


def test_programs_come_back_after_a_container_restart(host):
    """Nothing starts supervisord at boot without systemd: after a restart the documented start-up command
    (or the next kt_serve run) must bring the programs back with their environment files, whatever the
    restart left in /run."""
    tiny = next(i for i in host.ansible.get_variables()["kt_serve_instances"] if i["name"] == "tiny")
    probe = {**tiny, "name": "boot", "port": 30021, "overrides": {"chunked_prefill_size": 1024}}
    extra = {"kt_serve_python": _standin_python(host), "kt_serve_instances": [probe]}
    program = "ktinfra-serve-boot"
    try:
        rc, output = run_playbook(KT_SERVE, extra)
        assert rc == 0, output[-3000:]
        _running_pid(host, program)

        _restart_container(host)
        assert not host.run(f"{CTL} pid").stdout.strip().isdigit()  # nothing runs supervisord now
        assert host.file("/run/ktinfra-supervisor.sock").exists  # but the gone one's socket is still there
        host.check_output(SUPERVISORD)
        started = _running_pid(host, program)
        assert "--chunked-prefill-size 1024" in serve_args_of(host, started)
        assert http_status(host, 30021) == 200
        assert "ktinfra-serve-tiny" in host.run(f"{CTL} status").stdout  # every program, not just one

        _restart_container(host)
        rc, output = run_playbook(KT_SERVE, extra)
        assert rc == 0, output[-3000:]
        assert _task_status(output, START_SUPERVISORD) == "changed", output[-3000:]
        again = _running_pid(host, program)  # pids start over in the new pid namespace: not compared
        assert http_status(host, 30021) == 200

        rc, output = run_playbook(KT_SERVE, extra)  # and then nothing more to do
        assert rc == 0 and _task_status(output, START_SUPERVISORD) == "ok", output[-3000:]
        assert host.check_output(f"{CTL} pid {program}") == again, output[-3000:]
    finally:
        rc, output = run_playbook(KT_SERVE, {**extra, "kt_serve_instances": [{**probe, "state": "absent"}]})
        host.run(f"rm -rf {STANDIN}")
    assert rc == 0, output[-3000:]
    assert program not in _listed(host)


def _doctor_services(host) -> tuple[int, dict]:
    """`ktinfra doctor -k services` from this checkout over docker://, as a user runs it against the box."""
    container = host.ansible.get_variables()["inventory_hostname"]
    command = [sys.executable, "-m", "ktinfra", "doctor", "--hosts", f"docker://{container}", "--role", "any",
               "-k", "services", "--json"]  # fmt: skip
    proc = subprocess.run(command, capture_output=True, text=True, cwd=REPO, timeout=600)
    report = json.loads(proc.stdout)
    return proc.returncode, {c["id"]: (c["status"], c["message"]) for c in report["checks"]}


CHECK = "services.supervised_programs_running"


def test_doctor_reports_the_supervised_programs(host):
    """Without systemd no unit list shows the instances: doctor asks supervisord. tiny stopped by hand; then
    supervisord down; then supervisord started as the docs say, which starts tiny again. (Before: three more
    kt_serve runs put a second instance up and took it down; CI's 90 minutes.)"""
    program = "ktinfra-serve-tiny"
    _running_pid(host, program)
    try:
        host.check_output(f"{CTL} stop {program}")  # an autostart program that is down
        rc, checks = _doctor_services(host)
        status, message = checks[CHECK]
        assert rc == 1 and status == "failed", checks
        assert program in message and "start-limit" not in message, message  # the listener is no program
        assert checks["services.units_enabled_and_active"][0] == "skipped"

        host.check_output(f"{CTL} shutdown")
        _supervisord_gone(host)
        rc, checks = _doctor_services(host)
        status, message = checks[CHECK]
        assert status == "failed" and SUPERVISORD in message, message
    finally:
        if not host.run(f"{CTL} pid").stdout.strip().isdigit():
            host.check_output(SUPERVISORD)
        host.run(f"{CTL} start {program}")
    _running_pid(host, program)
    rc, checks = _doctor_services(host)
    assert checks[CHECK][0] == "passed", checks


def _supervisord_gone(host, timeout: float = 30) -> None:
    deadline = time.time() + timeout
    while host.run(f"{CTL} pid").stdout.strip().isdigit():
        assert time.time() < deadline, "supervisord still answers after shutdown"
        time.sleep(1)
