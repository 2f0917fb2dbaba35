"""The light provision scenario: preflight, a site profile's envs from a local wheel, host tuning."""

import json

import pytest

ENVS = "/opt/kt/envs"
WHEELHOUSE = "/var/cache/ktinfra/wheelhouse"


def test_ktinfra_tool_runs_on_the_target(host):
    out = host.check_output("/opt/ktinfra/tool/bin/ktinfra facts --json")
    facts = json.loads(out)
    assert facts["schema"] == 1
    assert facts["container"] is True


def test_local_wheel_was_cached_in_the_wheelhouse(host):
    wheel = host.file(f"{WHEELHOUSE}/ktprobe-0.4.2+cpu-py3-none-any.whl")
    assert wheel.is_file
    assert wheel.sha256sum == host.file("/srv/wheels/ktprobe-0.4.2+cpu-py3-none-any.whl").sha256sum


def test_pypi_pin_was_downloaded_into_the_wheelhouse(host):
    assert host.file(f"{WHEELHOUSE}/six-1.16.0-py2.py3-none-any.whl").is_file
    assert host.file(f"{WHEELHOUSE}/idna-3.7-py3-none-any.whl").is_file


def test_inference_env_has_the_local_wheel(host):
    out = host.check_output(
        f"{ENVS}/kt-probe/bin/python -c 'import ktprobe, six; print(ktprobe.BUILT_FOR, six.__version__)'"
    )
    assert out == "ktinfra molecule 1.16.0"


@pytest.mark.parametrize(
    ("env", "present", "absent"),
    [
        ("kt-probe", ["ktprobe==0.4.2+cpu", "six==1.16.0"], ["idna"]),
        ("kt-probe-sft", ["six==1.16.0", "idna==3.7"], ["ktprobe"]),
    ],
)
def test_freeze_recorded_next_to_each_env(host, env, present, absent):
    freeze = host.file(f"{ENVS}/{env}/ktinfra-freeze.txt").content_string.splitlines()
    for line in present:
        assert line in freeze
    assert not [line for line in freeze if line.split("==")[0] in absent]


def test_drift_is_detected_when_a_pin_changes(host):
    """Same check the role runs, against a freeze edited to drift: must exit 2 and name the package."""
    profile = host.check_output("ls /opt/ktinfra/tool/profiles/*.yaml")
    cmd = host.run(
        "sed 's/^six==.*/six==1.15.0/' /opt/kt/envs/kt-probe/ktinfra-freeze.txt > /tmp/drifted.txt && "
        f"/opt/ktinfra/tool/bin/ktinfra profile drift {profile} --env inference "
        "--freeze /tmp/drifted.txt --json"
    )
    host.run("rm -f /tmp/drifted.txt")
    assert cmd.rc == 2
    assert "six is 1.15.0, the profile pins 1.16.0" in json.loads(cmd.stdout)["problems"][0]


def test_tuning_files_written(host):
    sysctl = host.file("/etc/sysctl.d/90-ktinfra.conf").content_string
    assert "kernel.numa_balancing = 0" in sysctl
    assert "vm.swappiness = 10" in sysctl
    limits = host.file("/etc/security/limits.d/90-ktinfra.conf").content_string
    assert "soft memlock unlimited" in limits
    assert (
        "DefaultLimitNOFILE=1048576" in host.file("/etc/systemd/system.conf.d/90-ktinfra.conf").content_string
    )


def test_tuning_reports_what_the_container_would_not_let_us_set(host):
    report = json.loads(host.file("/var/lib/ktinfra/tuning.json").content_string)
    assert report["container"] is True
    by_name = {s["setting"]: s for s in report["settings"]}
    # docker mounts /proc/sys read-only: reported, not failed. Which status follows what the kernel has (each
    # was accepted whatever it had: the check could not fail): absent without the file, applied where the
    # value already is the one wanted, not_set where it would have to be written.
    numa = by_name["kernel.numa_balancing"]
    sysctl = host.file("/proc/sys/kernel/numa_balancing")
    if not sysctl.exists:
        assert numa["status"] == "absent", numa
    elif sysctl.content_string.strip() == numa["wanted"]:
        assert numa["status"] == "applied", numa
    else:
        assert numa["status"] == "not_set" and "Read-only" in numa["reason"], numa
    assert by_name["vm.swappiness"]["status"] == "not_set"
    assert "Read-only" in by_name["vm.swappiness"]["reason"]
    governor = by_name["scaling_governor"]
    found = host.run("cat /sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor")
    if found.rc != 0:  # no cpufreq in the container (most hosts' VMs): nothing to set
        assert governor["status"] == "absent", governor
    elif set(found.stdout.split()) == {governor["wanted"]}:
        assert governor["status"] == "applied", governor
    else:
        assert governor["status"] == "not_set", governor


def test_systemd_still_healthy_after_tuning(host):
    state = host.run("systemctl is-system-running").stdout.strip()
    assert state in ("running", "degraded")
    assert host.run("systemctl --failed --no-legend --plain | grep -c ktinfra").stdout.strip() == "0"
