"""A provision run that failed half-way (the package index down) is finished by the next run: before, the
new env pins and the new ktinfra wheel were written first, so the next run took them as installed."""

import re

import yaml
from ansible_run import REPO, probe_pin, run_playbook

PROFILE = REPO / "molecule" / "_shared" / "site-profile.yaml"
DEAD_INDEX = {"kt_python_env_pip_index_url": "http://127.0.0.1:9/simple"}


def provision(host, *args: str, **extra) -> tuple[int, str]:
    """playbooks/provision.yml with the scenario's probe wheel pinned (ansible_run.probe_pin)."""
    return run_playbook(REPO / "playbooks" / "provision.yml", probe_pin(host) | extra, *args)


def six_in(host) -> str:
    return host.check_output("/opt/kt/envs/kt-probe/bin/python -c 'import six; print(six.__version__)'")


def test_an_env_upgrade_that_failed_is_installed_by_the_next_run(host, tmp_path):
    profile = yaml.safe_load(PROFILE.read_text())
    profile["envs"]["inference"]["packages"] = ["six==1.17.0"]
    newer = tmp_path / "site-profile.yaml"
    newer.write_text(yaml.safe_dump(profile))
    try:
        rc, output = provision(host, "--tags", "envs", kt_python_env_profile=str(newer), **DEAD_INDEX)
        assert rc != 0 and six_in(host) == "1.16.0", output[-3000:]
        rc, output = provision(host, "--tags", "envs", kt_python_env_profile=str(newer))
        assert rc == 0, output[-3000:]
        assert six_in(host) == "1.17.0"
    finally:
        rc, output = provision(host, "--tags", "envs")  # back to the scenario's own pins
    assert rc == 0 and six_in(host) == "1.16.0", output[-3000:]


def test_a_ktinfra_install_that_did_not_finish_is_redone(host):
    """The wheel copy landed but its install did not finish: the record of the installed wheel is stale."""
    record = "/opt/ktinfra/tool/dist/.installed-sha1"
    installed = host.file(record).content_string
    host.check_output(f"echo unfinished > {record}")
    rc, output = provision(host, "--tags", "preflight")
    assert rc == 0, output[-3000:]
    task = r"TASK \[kt_preflight : Install ktinfra and its dependencies into the tool venv\][^\n]*\nchanged:"
    assert re.search(task, output), output[-3000:]
    assert host.file(record).content_string == installed


def test_limits_a_cut_off_run_wrote_reach_systemd(host):
    """A run with a new kt_host_tuning_nofile wrote systemd's drop-in, then failed or was cut off before its
    handler (Ansible runs none then): systemd still ran with the old DefaultLimitNOFILE. Before: the next run
    found the drop-in in place and did not re-exec systemd. The drop-in is written here as that run's template
    writes it (same bytes: the template task reports no change)."""
    dropin = "/etc/systemd/system.conf.d/90-ktinfra.conf"

    def live() -> str:
        return host.check_output("systemctl show --property=DefaultLimitNOFILE --value")

    assert live() == "1048576"
    host.check_output(f"sed -i 's/^DefaultLimitNOFILE=.*/DefaultLimitNOFILE=524288/' {dropin}")
    try:
        rc, output = provision(host, "--tags", "tuning", kt_host_tuning_nofile=524288)
        assert rc == 0, output[-3000:]
        template = output.split("Raise memlock and nofile for systemd services", 1)[1].split("TASK [")[0]
        assert "ok: [" in template and "changed: [" not in template, output[-3000:]
        assert "RUNNING HANDLER [kt_host_tuning : reexec systemd]" in output, output[-3000:]
        assert live() == "524288", output[-3000:]
        rc, output = provision(host, "--tags", "tuning", kt_host_tuning_nofile=524288)
        assert rc == 0 and "RUNNING HANDLER [kt_host_tuning : reexec systemd]" not in output, output[-3000:]
    finally:
        rc, output = provision(host, "--tags", "tuning")
    assert rc == 0 and live() == "1048576", output[-3000:]
