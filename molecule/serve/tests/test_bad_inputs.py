"""Bad serve lists fail with a clear message before anything on the host changes."""

from __future__ import annotations

import json
import re

import pytest
from ansible_run import KT_SERVE, main_pid, run_playbook, serve_args_of

STORE_MODEL = "tiny-qwen3-moe"
STATE = (
    "ls -l --time-style=+%s.%N /etc/ktinfra/serve /etc/systemd/system | md5sum; "
    "systemctl list-units 'ktinfra-*' --no-legend | md5sum"
)


def converge(instances: list[dict]) -> tuple[int, str]:
    return run_playbook(KT_SERVE, {"kt_serve_instances": instances})


CASES = {
    # not just "port" or "gpu": a failed argument check prints the role's whole spec (port included) and the
    # supported keys, so those words were in the output whatever the check refused
    "malformed port": (
        [{"name": "x", "model": STORE_MODEL, "port": "http"}],
        "argument 'port' is of type str found in 'kt_serve_instances'. and we were unable to convert to int",
    ),
    "missing port": ([{"name": "x", "model": STORE_MODEL}], "missing required arguments: port"),
    "unknown key": (
        [{"name": "x", "model": STORE_MODEL, "port": 1, "gpu": 0}],
        "kt_serve_instances.gpu. Supported parameters include:",
    ),
    "duplicate port": (
        [
            {"name": "a", "model": STORE_MODEL, "port": 30000},
            {"name": "b", "model": STORE_MODEL, "port": 30000},
        ],
        "duplicate port 30000 (instances a, b)",
    ),
    "model path missing": ([{"name": "x", "model_path": "/srv/nowhere", "port": 30005}], "missing on"),
    "model not in store": (
        [{"name": "x", "model": "nope", "port": 30005}],
        "model nope is not in the model store",
    ),
    "unknown override key": (
        [{"name": "x", "model": STORE_MODEL, "port": 30005, "overrides": {"gpu_layers": 3}}],
        "x: overrides: unknown key gpu_layers",
    ),
    "plan option that does not exist": (
        [{"name": "x", "model": STORE_MODEL, "port": 30005, "plan_args": ["--context-length", "32768"]}],
        "x: `ktinfra plan` gave no plan (rc 1)",
    ),
    "public without key": (
        [{"name": "x", "model": STORE_MODEL, "port": 30005, "host": "0.0.0.0"}],
        "x: binds 0.0.0.0 without api_key",
    ),
}


# slow (make test-full, not CI's make test): the same argument-spec check as "malformed port", the same
# validate.yml rule as test_model_without_completeness_marker_is_not_served ("missing on"), and the overrides
# rule tests/unit/test_kt_serve_role.py::test_bad_overrides_fail_before_anything_is_written checks
SLOW_CASES = {"missing port", "unknown key", "model path missing", "unknown override key"}


@pytest.mark.parametrize(
    "case", [pytest.param(c, marks=pytest.mark.slow) if c in SLOW_CASES else c for c in sorted(CASES)]
)
def test_bad_serve_list_fails_before_changes(host, case):
    instances, message = CASES[case]
    before = host.check_output(STATE)
    rc, output = converge(instances)
    assert rc != 0
    assert message in output, output[-3000:]
    assert re.search(r"changed=0 +unreachable=0 +failed=1", output)
    assert host.check_output(STATE) == before


# slow: the rule tests/unit/test_kt_serve_role.py::test_bad_overrides_fail_before_anything_is_written checks
@pytest.mark.slow
def test_bad_kt_serve_overrides_fail_before_changes(host):
    before = host.check_output(STATE)
    rc, output = run_playbook(KT_SERVE, {"kt_serve_overrides": {"max_running_requests": 0}})
    assert rc != 0
    assert "kt_serve_overrides.max_running_requests must be an integer >= 1, got 0" in output, output[-3000:]
    assert re.search(r"changed=0 +unreachable=0 +failed=1", output)
    assert host.check_output(STATE) == before


def test_model_without_completeness_marker_is_not_served(host):
    marker = f"/srv/ktinfra/models/{STORE_MODEL}/.ktinfra-complete.json"
    host.check_output(f"mv {marker} {marker}.held")
    try:
        rc, output = converge([{"name": "tiny", "model": STORE_MODEL, "port": 30000}])
    finally:
        host.check_output(f"mv {marker}.held {marker}")
    assert rc != 0
    # the message itself: the marker's path is in the output anyway (the stat loop prints each path it looks
    # for), so `marker in output` held whatever path was reported missing
    assert re.search(rf"missing on [^:\s]+: {re.escape(marker)}(?!,)", output), output[-3000:]


def test_interrupted_hub_download_is_never_marked_complete(host):
    """The real huggingface_hub code path against an endpoint that drops the connection."""
    venv = "/opt/ktinfra/envs/kt-store"
    host.check_output(f"{venv}/bin/pip install -q 'huggingface_hub>=0.30,<3'")
    dest = "/srv/ktinfra/models/hub-model"
    cmd = (f"HF_ENDPOINT=http://127.0.0.1:9 HF_HUB_ETAG_TIMEOUT=2 {venv}/bin/python "
           f"/opt/ktinfra/libexec/kt_store_fetch.py --name hub-model --source hf --repo Qwen/Qwen3-30B-A3B "
           f"--dest {dest}")  # fmt: skip
    result = host.run(cmd)
    assert result.rc == 1
    report = json.loads(result.stdout)
    assert report["complete"] is False and report["error"]
    assert not host.file(f"{dest}/.ktinfra-complete.json").exists
    host.check_output(f"rm -rf {dest}")


def test_an_instance_set_to_stopped_stays_stopped_when_its_env_changes(host):
    """Before: the restart queued for its changed env ran after the stop and revived it (active, disabled).
    A throwaway instance like tiny-public, so the scenario's own instances keep their journals."""
    instances = host.ansible.get_variables()["kt_serve_instances"]
    probe = {**next(i for i in instances if i["name"] == "tiny-public"), "name": "tiny-stop", "port": 30009}
    try:
        rc, output = converge([probe])
        assert rc == 0, output[-3000:]
        assert host.service("ktinfra-serve@tiny-stop").is_running
        stopped = {**probe, "state": "stopped", "overrides": {"chunked_prefill_size": 2048}}  # env changes
        rc, output = converge([stopped])
        assert rc == 0, output[-3000:]
        assert "--chunked-prefill-size 2048" in host.file("/etc/ktinfra/serve/tiny-stop.env").content_string
        service = host.service("ktinfra-serve@tiny-stop")
        assert not service.is_running and not service.is_enabled
    finally:
        rc, output = converge([{**probe, "state": "absent"}])
    assert rc == 0, output[-3000:]
    assert not host.file("/etc/ktinfra/serve/tiny-stop.env").exists


def test_a_removed_instance_leaves_no_render_or_site_drop_in_and_keeps_the_admins_own(host):
    """Before: state absent left /var/lib/ktinfra/render/serve/NAME and the unit's 50-site.conf drop-in behind
    (the unit disabled, so harmless, but a later instance of that name started with stale files in view)."""
    instances = host.ansible.get_variables()["kt_serve_instances"]
    probe = {**next(i for i in instances if i["name"] == "tiny-public"), "name": "tiny-gone", "port": 30011}
    dropins = "/etc/systemd/system/ktinfra-serve@tiny-gone.service.d"
    render = "/var/lib/ktinfra/render/serve/tiny-gone"
    rc, output = converge([probe])
    assert rc == 0, output[-3000:]
    assert host.file(f"{dropins}/50-site.conf").exists and host.file(render).is_directory
    host.check_output(f"printf '[Service]\\nNice=1\\n' > {dropins}/60-admin.conf")

    rc, output = converge([{**probe, "state": "absent"}])
    assert rc == 0, output[-3000:]
    assert not host.file(render).exists and not host.file(f"{dropins}/50-site.conf").exists
    assert host.file(f"{dropins}/60-admin.conf").exists  # not ours to remove, nor is its directory
    # systemctl (252) writes its "changed on disk" warning to stderr, the status itself to stdout
    status = host.run("systemctl status ktinfra-serve@tiny-gone")
    assert "changed on disk" not in status.stdout + status.stderr, status.stderr

    host.check_output(f"rm {dropins}/60-admin.conf")
    rc, output = converge([{**probe, "state": "absent"}])
    assert rc == 0, output[-3000:]
    assert not host.file(dropins).exists
    rc, output = converge([{**probe, "state": "absent"}])  # and nothing more to do
    assert rc == 0 and re.search(r"changed=0\b", output), output[-3000:]


def test_a_change_written_by_a_run_that_then_failed_reaches_the_server(host):
    """A run wrote the instance's new environment file, then a later task failed (Ansible runs no handler
    after a failure, as after Ctrl-C). Before: the next run found the file in place, queued no restart, and
    the old server ran on with the old arguments until its next crash or reboot."""
    instances = host.ansible.get_variables()["kt_serve_instances"]
    probe = {**next(i for i in instances if i["name"] == "tiny-public"), "name": "tiny-cut", "port": 30010}
    changed = {**probe, "overrides": {"chunked_prefill_size": 2048}}
    unit = "ktinfra-serve@tiny-cut.service"
    dropin, aside = f"/etc/systemd/system/{unit}.d", "/root/tiny-cut.service.d"
    try:
        rc, output = converge([probe])
        assert rc == 0, output[-3000:]
        pid = main_pid(host, unit)
        assert "--chunked-prefill-size 4096" in serve_args_of(host, pid)
        # the task after the environment files fails: its drop-in directory is a file
        host.check_output(f"mv {dropin} {aside} && touch {dropin}")
        try:
            rc, output = converge([changed])
        finally:
            host.check_output(f"rm -f {dropin} && mv {aside} {dropin}")
        assert rc != 0 and "Create the drop-in directories" in output, output[-3000:]
        assert "--chunked-prefill-size 2048" in host.file("/etc/ktinfra/serve/tiny-cut.env").content_string
        assert main_pid(host, unit) == pid  # the failed run left the old server running

        rc, output = converge([changed])
        assert rc == 0, output[-3000:]
        restarted = main_pid(host, unit)
        assert restarted not in ("0", pid), output[-3000:]
        assert "--chunked-prefill-size 2048" in serve_args_of(host, restarted)

        rc, output = converge([changed])  # and only once
        assert rc == 0 and main_pid(host, unit) == restarted, output[-3000:]
    finally:
        rc, output = converge([{**probe, "state": "absent"}])
    assert rc == 0, output[-3000:]
    assert not host.file("/etc/ktinfra/serve/tiny-cut.started-with").exists
