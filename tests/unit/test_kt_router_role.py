"""kt_router's worker list and /health wait run by real ansible on localhost (-c local), against a real HTTP
server on the address the router would bind."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
from role_play import ROLES, run_play, task_output
from test_image_validate import _wheel
from test_kt_router_given_workers_asked import REFUSED as GIVEN_REFUSED
from test_kt_router_given_workers_asked import nothing_listens, sglang_like

ROLE = ROLES / "kt_router"

INVENTORY = """\
localhost ansible_connection=local
[kt_serve]
gpu-v6 ansible_host=fd00::5
gpu-v4 ansible_host=10.0.0.7
gpu-own
"""
HOSTVARS = {
    "gpu-v6": [{"name": "a", "port": 30002, "host": "::"}],
    "gpu-v4": [{"name": "b", "port": 30000, "host": "0.0.0.0"}],
    "gpu-own": [
        {"name": "c", "port": 30001, "host": "fd00::9"},
        {"name": "d", "port": 30003, "host": "10.1.2.3"},
    ],
}


def _worker_urls(tmp_path, inventory: str, hostvars: dict) -> list[str]:
    """workers.json.j2 rendered on localhost for `inventory` with each host's kt_serve_instances."""
    (tmp_path / "hosts").write_text(inventory)
    (tmp_path / "host_vars").mkdir()
    for host, instances in hostvars.items():
        (tmp_path / "host_vars" / f"{host}.json").write_text(json.dumps({"kt_serve_instances": instances}))
    out = tmp_path / "workers.json"
    lookup = "{{ lookup('ansible.builtin.template', '%s') }}" % (ROLE / "templates" / "workers.json.j2")
    tasks = [{"ansible.builtin.copy": {"content": lookup, "dest": str(out), "mode": "0644"}}]
    # the template uses kt_common's filters, which the role (not loaded here) would bring
    env = {"ANSIBLE_FILTER_PLUGINS": str(ROLES / "kt_common" / "filter_plugins")}
    rc, output = run_play(
        tmp_path, tasks, {"kt_router_serve_group": "kt_serve"}, inventory=str(tmp_path / "hosts"), env=env
    )
    assert rc == 0, output[-3000:]
    return json.loads(out.read_text())


def test_worker_urls_bracket_ipv6_literals(tmp_path):
    """Before: an IPv6 serve host gave http://fd00::5:30002, which no client can parse."""
    assert sorted(_worker_urls(tmp_path, INVENTORY, HOSTVARS)) == [
        "http://10.0.0.7:30000",
        "http://10.1.2.3:30003",
        "http://[fd00::5]:30002",
        "http://[fd00::9]:30001",
    ]


def test_loopback_workers_on_the_router_host_are_reached_on_their_own_address(tmp_path):
    """ktinfra counts all of 127.0.0.0/8 as loopback. Before: the role refused 127.0.0.2 without a key and
    would have sent its requests to 127.0.0.1, where no server listens."""
    instances = [
        {"name": "a", "port": 30010, "host": "127.0.0.2"},
        {"name": "b", "port": 30011, "host": "::1"},
        {"name": "c", "port": 30012},
    ]
    inventory = "[kt_serve]\nlocalhost ansible_connection=local\n"
    assert _worker_urls(tmp_path, inventory, {"localhost": instances}) == [
        "http://127.0.0.2:30010",
        "http://[::1]:30011",
        "http://127.0.0.1:30012",
    ]


class Health(BaseHTTPRequestHandler):
    seen: list = []

    def do_GET(self):  # noqa: N802 (http.server's name)
        Health.seen.append((self.path, self.headers.get("Authorization")))
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args):
        pass


class Server6(HTTPServer):
    address_family = socket.AF_INET6


@pytest.fixture
def health_server(request):
    address = request.param
    server = (Server6 if ":" in address else HTTPServer)((address, 0), Health)
    Health.seen = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def wait(tmp_path, cli):
    return run_play(
        tmp_path, [{"ansible.builtin.include_role": {"name": "kt_router", "tasks_from": "health"}}], {}, cli
    )


@pytest.mark.parametrize(
    ("health_server", "bind"),
    [("127.0.0.2", "127.0.0.2"), ("::1", "::"), ("::1", "::1")],
    indirect=["health_server"],
)
def test_health_is_waited_for_on_the_bound_address_with_string_extra_vars(tmp_path, health_server, bind):
    """Before: the wait asked 127.0.0.1 whatever kt_router_host bound, and -e kt_router_health_timeout=20 (a
    string) failed on `/ 5` after the router was installed."""
    cli = [f"kt_router_host={bind}", f"kt_router_port={health_server}", "kt_router_health_timeout=10",
           "kt_router_wait_health=true", "kt_router_worker_api_key=k3y"]  # fmt: skip
    rc, output = wait(tmp_path, cli)
    assert rc == 0, output[-3000:]
    assert Health.seen == [("/health", "Bearer k3y")]


class Unready(Health):
    def do_GET(self):  # noqa: N802 (http.server's name)
        Health.seen.append((self.path, self.headers.get("Authorization")))
        self.send_response(503)
        self.end_headers()


def test_a_failed_wait_says_why_without_showing_the_key(tmp_path):
    """Before: no_log (the request carries the key) hid the whole result: "the output has been hidden"."""
    server = HTTPServer(("127.0.0.1", 0), Unready)
    Health.seen = []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        cli = ["kt_router_host=127.0.0.1", f"kt_router_port={server.server_address[1]}",
               "kt_router_health_timeout=5", "kt_router_wait_health=true",
               "kt_router_worker_api_key=s3cr3t-k3y"]  # fmt: skip
        rc, output = wait(tmp_path, cli)
    finally:
        server.shutdown()
        server.server_close()
    assert rc != 0
    assert "did not answer 200 within 5 s" in output and "(status 503)" in output, output[-3000:]
    assert "s3cr3t-k3y" not in output
    assert Health.seen and all(seen == ("/health", "Bearer s3cr3t-k3y") for seen in Health.seen)


def test_wait_health_false_given_as_a_string_skips_the_wait(tmp_path):
    """Before: `when: kt_router_wait_health` with -e kt_router_wait_health=false (a string) waited."""
    port = socket.socket()
    port.bind(("127.0.0.1", 0))
    free = port.getsockname()[1]  # nothing listens there
    cli = ["kt_router_host=127.0.0.1", f"kt_router_port={free}", "kt_router_health_timeout=5",
           "kt_router_wait_health=false", "kt_router_worker_api_key="]  # fmt: skip
    rc, output = wait(tmp_path, cli)
    port.close()
    assert rc == 0, output[-3000:]
    assert "skipping: [localhost]" in output


@pytest.mark.parametrize(
    ("extra", "cli"),
    [
        ({}, ["kt_router_workers=http://10.0.0.11:30000,http://10.0.0.12:30000"]),
        # items trimmed, empty ones dropped (-e splits key=value pairs on spaces: the value is quoted)
        ({}, ["kt_router_workers=' http://10.0.0.11:30000 , ,http://10.0.0.12:30000,'"]),
        ({"kt_router_workers": ["http://10.0.0.11:30000", "http://10.0.0.12:30000"]}, []),  # a list, as it is
    ],
    ids=["string", "spaces-and-empties", "list"],
)
def test_workers_given_on_the_command_line_are_split_on_commas(tmp_path, extra, cli):
    """-e kt_router_workers=URL,URL is a string; the argument spec passes it. Before, kt_router__workers was
    that string: the distinct-worker check compared its letters and refused it, and router.env could not add
    it to the argument list."""
    out = tmp_path / "workers.json"
    tasks = [
        {"ansible.builtin.include_role": {"name": "kt_router", "tasks_from": "workers"}},
        {"ansible.builtin.copy": {"content": "{{ kt_router__workers | to_json }}", "dest": str(out)}},
    ]
    rc, output = run_play(tmp_path, tasks, extra, cli)
    assert rc == 0, output[-3000:]
    assert json.loads(out.read_text()) == ["http://10.0.0.11:30000", "http://10.0.0.12:30000"]


def test_workers_of_another_type_are_named(tmp_path):
    """tasks_from: workers has no argument spec (main's refuses a mapping): before, a mapping went through as
    the worker list."""
    tasks = [{"ansible.builtin.include_role": {"name": "kt_router", "tasks_from": "workers"}}]
    rc, output = run_play(tmp_path, tasks, {"kt_router_workers": {"http://10.0.0.11:30000": 1}})
    assert rc != 0
    message = "kt_router_workers must be a list or a comma-separated string, not a mapping"
    assert message in output, output[-3000:]


# systemd is not PID 1 where the unit tests run: a systemctl on PATH that shows the router running, logs
# its calls ($KT_SYSTEMCTL_LOG) and fails the one named in $KT_SYSTEMCTL_FAIL (a run cut off there)
SYSTEMCTL = """#!/bin/sh
[ -n "$KT_SYSTEMCTL_LOG" ] && echo "$*" >> "$KT_SYSTEMCTL_LOG"
[ "$1" = "$KT_SYSTEMCTL_FAIL" ] && exit 1
# like systemd: a unit whose file is not in KT_UNIT_DIR (when set) is not-found
if [ "$1" = show ]; then
  unit=$(echo "$*" | grep -o '[^ ]*\\.service' | head -1)
  if [ -n "$KT_UNIT_DIR" ] && [ ! -e "$KT_UNIT_DIR/$unit" ]; then
    printf 'Id=%s\\nLoadState=not-found\\nActiveState=inactive\\nSubState=dead\\n' "$unit"
  else
    printf 'Id=x\\nLoadState=loaded\\nActiveState=active\\nSubState=running\\n'
  fi
fi
exit 0
"""


def fake_systemctl(tmp_path) -> dict:
    """The environment for run_play with SYSTEMCTL first on PATH, logging into tmp_path/systemctl.log."""
    (tmp_path / "bin").mkdir(exist_ok=True)
    systemctl = tmp_path / "bin" / "systemctl"
    systemctl.write_text(SYSTEMCTL)
    systemctl.chmod(0o755)
    return {"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin", "KT_SYSTEMCTL_LOG": str(tmp_path / "systemctl.log")}


def test_check_diff_does_not_print_the_workers_api_key(tmp_path):
    """site.yml --check --diff is the documented dry run. Before, the diff of router.env (0600) printed
    KT_ROUTER_ARGS with --api-key=<the workers' key> in clear."""
    fresh = tmp_path / "fresh"
    extra = {
        "kt_router__sd_booted": {"stat": {"isdir": True}},  # systemd as init, as on a real router host
        "kt_router_workers": ["http://10.0.0.11:30000"],
        "kt_router_worker_api_key": "k3y+/=~_.-that-must-not-show",  # base64 and URL-safe characters pass
        "kt_router_venv": str(fresh / "venv"),
        "kt_router_config_dir": str(fresh / "cfg"),
        "kt_router_unit_dir": str(fresh / "units"),
    }
    rc, output = run_play(
        tmp_path,
        [{"ansible.builtin.include_role": {"name": "kt_router"}}],
        extra,
        # the unit is not installed yet: systemd says not-found. Before, the dry run failed at 'Enable and
        # start the router' ("Could not find the requested service"): systemd_service checks that in --check
        env=fake_systemctl(tmp_path) | {"KT_UNIT_DIR": str(fresh / "units")},
        flags=["--check", "--diff"],
    )
    assert rc == 0, output[-3000:]
    assert "Write the router's environment" in output and "--worker-urls" not in output
    assert "that-must-not-show" not in output
    assert not fresh.exists()


def _refused_before_any_change(tmp_path: Path) -> tuple[Path, dict]:
    """(the directories the role must not create, its variables): a venv under a file, so a run that got past
    validation would fail at the venv (no download of sglang-router in a test), as the old code went on to.
    The worker is a local URL nothing answers at: the role asks a given URL before the venv (a made-up address
    could keep it kt_router_worker_probe_timeout s)."""
    fresh = tmp_path / "fresh"
    (tmp_path / "a-file").write_text("")
    extra = {
        "kt_router__sd_booted": {"stat": {"isdir": True}},
        "kt_router_workers": [nothing_listens()],
        "kt_router_worker_api_key": "k3y",
        "kt_router_venv": str(tmp_path / "a-file" / "venv"),
        "kt_router_config_dir": str(fresh / "cfg"),
        "kt_router_unit_dir": str(fresh / "units"),
    }
    return fresh, extra


def test_extra_args_given_as_a_string_are_refused_before_any_change(tmp_path):
    """Before: -e kt_router_extra_args='--log-level debug' passed the argument spec, then router.env crashed
    with "can only concatenate list (not str)" after the venv was made and sglang-router installed."""
    fresh, extra = _refused_before_any_change(tmp_path)
    tasks = [{"ansible.builtin.include_role": {"name": "kt_router"}}]
    rc, output = run_play(tmp_path, tasks, extra, ["kt_router_extra_args=--log-level debug"])
    assert rc != 0
    assert "kt_router_extra_args must be a list of arguments" in output, output[-3000:]
    assert not fresh.exists()


KEY_REFUSED = "kt_router_worker_api_key contains whitespace, a control character, a quote"
PATH_REFUSED = "kt_router_venv and kt_router_config_dir must be absolute paths without whitespace"


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"kt_router_worker_api_key": 'k3y"with-a-quote'}, KEY_REFUSED),
        ({"kt_router_worker_api_key": "k3y with-a-space"}, KEY_REFUSED),
        ({"kt_router_worker_api_key": "k3y\\with-a-backslash"}, KEY_REFUSED),
        ({"kt_router_worker_api_key": "k3y$with-a-dollar"}, KEY_REFUSED),
        ({"kt_router_worker_api_key": "k3y\u00e9with-non-ascii"}, KEY_REFUSED),
        ({"kt_router_venv": "my envs/router"}, PATH_REFUSED),
        ({"kt_router_venv": "100%/router"}, PATH_REFUSED),
        ({"kt_router_extra_args": ["--log-level", "debug info"]}, '["debug info"]'),
    ],
    ids=["key-quote", "key-space", "key-backslash", "key-dollar", "key-non-ascii", "venv-space",
         "venv-percent", "extra-arg-space"],
)  # fmt: skip
def test_values_router_env_or_the_unit_cannot_carry_are_refused_before_any_change(tmp_path, given, message):
    """Before: a key with a quote ended KT_ROUTER_ARGS="..." early and one with a space was split into two
    arguments by systemd; a venv with a space gave an ExecStart= systemd cannot run (systemd-analyze verify:
    "Command .../my is not executable"), one with '%' a specifier. All after sglang-router was installed."""
    fresh, extra = _refused_before_any_change(tmp_path)
    extra |= given
    if "kt_router_venv" in given:
        extra["kt_router_venv"] = str(tmp_path / "a-file" / given["kt_router_venv"])
    tasks = [{"ansible.builtin.include_role": {"name": "kt_router"}}]
    rc, output = run_play(tmp_path, tasks, extra)
    assert rc != 0
    assert message in output, output[-3000:]
    assert "with-a" not in output and "with-non" not in output  # the key is not shown
    assert not fresh.exists()


def _install(tmp_path, version: str, fail: str = "", workers: list[str] | None = None) -> tuple[int, str]:
    """The role with kt_router_packages [sglang-router==version], installed by pip from a local stand-in
    wheel into a real venv; `fail`: the systemctl command that fails (the run stops there). `workers`: the
    given kt_router_workers, else a stand-in SGLang server (without a key) for the run, on the same port at
    each run of a test: the role asks a given worker the inventory does not hold before it writes the
    router's files."""
    if workers is None:
        port_file = tmp_path / "worker-port"
        port = int(port_file.read_text()) if port_file.exists() else 0
        with sglang_like(None, port) as (url, _):
            port_file.write_text(url.rsplit(":", 1)[1])
            return _install(tmp_path, version, fail, [url])
    (tmp_path / "wheels").mkdir(exist_ok=True)
    (tmp_path / "units").mkdir(exist_ok=True)  # /etc/systemd/system is there
    _wheel(tmp_path / "wheels", "sglang_router", {"sglang_router/__init__.py": b""}, version=version)
    extra = {
        "kt_router__sd_booted": {"stat": {"isdir": True}},
        "kt_router_workers": workers,
        "kt_router_worker_api_key": "k3y",
        "kt_router_venv": str(tmp_path / "venv"),
        "kt_router_config_dir": str(tmp_path / "cfg"),
        "kt_router_unit_dir": str(tmp_path / "units"),
        "kt_router_packages": [f"sglang-router=={version}"],
        "kt_router_wait_health": False,
    }
    env = fake_systemctl(tmp_path) | {"KT_SYSTEMCTL_FAIL": fail, "PIP_NO_INDEX": "1",
                                      "PIP_FIND_LINKS": str(tmp_path / "wheels")}  # fmt: skip
    return run_play(tmp_path, [{"ansible.builtin.include_role": {"name": "kt_router"}}], extra, env=env)


def _restarts(tmp_path) -> int:
    log = (tmp_path / "systemctl.log").read_text().splitlines()
    return sum(line == "restart ktinfra-router.service" for line in log)


@pytest.mark.slow
def test_a_changed_package_list_restarts_the_router(tmp_path):
    """Before: sglang-router 0.3.2 -> 0.3.3 was installed (pip changed) and no handler was notified: the
    router went on running 0.3.2 until its next crash or reboot."""
    rc, output = _install(tmp_path, "0.3.2")
    assert rc == 0, output[-3000:]
    # the workers' key goes to the unit's launch code through the environment, not into the router's argv
    # (ps, /proc/PID/cmdline; the launch code is run for real in tests/integration/operate)
    env = tmp_path / "cfg" / "router.env"
    assert 'KT_ROUTER_API_KEY="k3y"' in env.read_text() and "--api-key" not in env.read_text()
    assert env.stat().st_mode & 0o777 == 0o600
    first = _restarts(tmp_path)
    rc, output = _install(tmp_path, "0.3.3")
    assert rc == 0, output[-3000:]
    assert "changed: [localhost]" in task_output(output, "Install sglang-router"), output[-3000:]
    assert _restarts(tmp_path) == first + 1
    rc, output = _install(tmp_path, "0.3.3")  # nothing changed: no restart
    assert rc == 0 and "changed=0" in output, output[-3000:]
    assert _restarts(tmp_path) == first + 1


@pytest.mark.slow
def test_a_run_cut_off_between_the_install_and_the_restart_is_restarted_by_the_next(tmp_path):
    """Before: a run that installed 0.3.3 and stopped before its handlers left the router on 0.3.2, and the
    next run (pip, router.env and unit unchanged, their started-with record equal) queued no restart."""
    rc, output = _install(tmp_path, "0.3.2")
    assert rc == 0, output[-3000:]
    first = _restarts(tmp_path)
    rc, output = _install(tmp_path, "0.3.3", fail="daemon-reload")  # 'Enable and start the router' fails
    assert rc != 0 and _restarts(tmp_path) == first, output[-3000:]
    rc, output = _install(tmp_path, "0.3.3")
    assert rc == 0, output[-3000:]
    assert "changed: [localhost]" in task_output(output, "Queue the restart a cut-off run did not do")
    assert _restarts(tmp_path) == first + 1


def test_a_given_worker_the_router_cannot_use_stops_the_run_before_the_routers_files(tmp_path):
    """Before: a given URL the inventory does not hold went into router.env unasked and the router was
    restarted with it (here: a server whose api_key is not kt_router_worker_api_key)."""
    with sglang_like("its-own") as (url, _):
        rc, output = _install(tmp_path, "0.3.2", workers=[url])
    assert rc != 0
    assert f"{GIVEN_REFUSED} from this host: {url}: /get_model_info answered 401" in output, output[-3000:]
    assert not (tmp_path / "cfg").exists()
    systemctl = tmp_path / "systemctl.log"
    assert not systemctl.exists() or "start" not in systemctl.read_text()
