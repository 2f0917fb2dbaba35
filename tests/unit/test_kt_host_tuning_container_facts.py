"""kt_host_tuning without kt_preflight's facts: a container is known from ansible's own virtual facts.

Every container guard of the role read `kt_preflight_facts.container | default(false)`: in a play without
kt_preflight (the role alone, tags=tuning on a fresh host) a docker container got the fstab /dev/shm line
(its /dev/shm is the runtime's, docker --shm-size) and the tmpfiles entry writing /sys, read-only there, at
each start. Now, where kt_preflight's facts do not say, ansible's virtual facts do (virtualization_role guest
and a container virtualization_type: docker, podman, lxc, ...; they read /.dockerenv, /run/.containerenv and
PID 1's environment), and tasks/main.yml gathers that subset where the play did not.

The plays run persist.yml's tmpfiles and /dev/shm steps as written, fstab and the tmpfiles file in tmp_path,
after a stand-in module (tmp_path/library) that sets the virtual facts a host would gather.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from role_play import ROLES, run_play

ROLE = ROLES / "kt_host_tuning"


def present_steps() -> list:
    """tasks/main.yml's steps of kt_host_tuning_state=present (its block), in their order."""
    main = yaml.safe_load((ROLE / "tasks" / "main.yml").read_text())
    return next(step["block"] for step in main if "block" in step)


FSTAB = "UUID=1a2b / ext4 errors=remount-ro 0 1\n"
FACTS_MODULE = """#!/usr/bin/python
import json
print(json.dumps({{"changed": False, "ansible_facts": {facts}}}))
"""


def persist(tmp: Path, facts: dict, extra: dict | None = None) -> tuple[int, str, Path, Path]:
    """rc, output, the fstab and the tmpfiles file after persist.yml's steps with these ansible facts."""
    library = tmp / "library"
    library.mkdir(exist_ok=True)
    (library / "fake_facts.py").write_text(FACTS_MODULE.format(facts=json.dumps(facts)))
    fstab, tmpfiles = tmp / "fstab", tmp / "ktinfra-tuning.conf"
    fstab.write_text(FSTAB)
    steps = yaml.safe_load((ROLE / "tasks" / "persist.yml").read_text())
    kept = []
    for step in steps:
        if step["name"].startswith("Persist THP mode and CPU governor"):
            step["ansible.builtin.template"]["src"] = str(ROLE / "templates" / "tmpfiles.conf.j2")
            step["ansible.builtin.template"]["dest"] = str(tmpfiles)
            kept.append(step)
        elif "/dev/shm" in step["name"] or "fstab" in step["name"]:
            kept.append(step)
    role_vars = {"ansible.builtin.include_vars": str(ROLE / "vars" / "main.yml")}
    settings = {
        "kt_host_tuning_shm_size": "64G",
        "kt_host_tuning_thp": "madvise",
        "kt_host_tuning_cpu_governor": "performance",
        "kt_host_tuning__fstab": str(fstab),
    }
    extra = settings | (extra or {})
    rc, output = run_play(tmp, [{"fake_facts": {}}, role_vars, *kept], extra)
    return rc, output, fstab, tmpfiles


DOCKER = {"virtualization_role": "guest", "virtualization_type": "docker", "service_mgr": "systemd"}


@pytest.mark.parametrize("kind", ["docker", "podman", "lxc", "container", "systemd-nspawn"])
def test_a_container_without_kt_preflight_facts_gets_no_fstab_line_nor_tmpfiles(tmp_path, kind):
    """Before: fstab got `tmpfs /dev/shm tmpfs nosuid,nodev,size=64G 0 0`, and the tmpfiles file."""
    rc, output, fstab, tmpfiles = persist(tmp_path, DOCKER | {"virtualization_type": kind})
    assert rc == 0, output[-3000:]
    assert fstab.read_text() == FSTAB and not tmpfiles.exists(), output[-3000:]


@pytest.mark.parametrize(
    ("facts", "extra"),
    [({"virtualization_role": "guest", "virtualization_type": "kvm", "service_mgr": "systemd"}, {}),
     # slow: kvm is no container type, whatever the role: the vm-guest case
     pytest.param({"virtualization_role": "host", "virtualization_type": "kvm", "service_mgr": "systemd"}, {},
                  marks=pytest.mark.slow),
     ({"service_mgr": "systemd"}, {}),
     # slow: a docker container whose kt_preflight_facts say container: false gets the fstab line and the
     # tmpfiles file, in a real one: tests/integration/test_kt_host_tuning_undo_container.py's
     # test_present_then_absent_leaves_the_host_as_it_was
     pytest.param(DOCKER, {"kt_preflight_facts": {"container": False}}, marks=pytest.mark.slow)],
    ids=["vm-guest", "kvm-host", "no-virtual-facts", "preflight-says-host"],
)  # fmt: skip
def test_a_vm_or_a_host_still_gets_them(tmp_path, facts, extra):
    """kt_preflight's facts, where they say, decide: they read the cgroup, not only marker files."""
    rc, output, fstab, tmpfiles = persist(tmp_path, facts, extra)
    assert rc == 0, output[-3000:]
    assert fstab.read_text() == FSTAB + "tmpfs /dev/shm tmpfs nosuid,nodev,size=64G 0 0\n", output[-3000:]
    assert "scaling_governor - - - - performance" in tmpfiles.read_text()


def test_main_gathers_the_virtual_facts_where_neither_says(tmp_path):
    """Before: only the min subset, which has no virtualization_type: a container was taken for a host."""
    main = present_steps()
    gather = next(t for t in main if t.get("name", "").startswith("Gather the facts"))
    content = "{{ ansible_facts['virtualization_type'] | default('NONE') }}"
    shown = {"ansible.builtin.copy": {"dest": str(tmp_path / "out"), "mode": "0644", "content": content}}
    rc, output = run_play(tmp_path, [gather, shown])
    assert rc == 0, output[-3000:]
    assert (tmp_path / "out").read_text() != "NONE"

    rc, output = run_play(tmp_path, [gather, shown], {"kt_preflight_facts": {"container": True}})
    assert rc == 0, output[-3000:]
    assert (tmp_path / "out").read_text() == "NONE"  # kt_preflight's facts say: nothing more gathered
