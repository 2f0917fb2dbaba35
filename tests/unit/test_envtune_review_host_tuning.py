"""kt_host_tuning's CPU governor: checked before anything is written, against what the host's cpufreq offers
(a real file standing in for /sys/.../scaling_available_governors) where it has one. Before, any string
passed: kt-tune.sh reported a governor the kernel refused as not_set, but its tmpfiles.d line was written
anyway (and failed at every boot), and a line break in it added lines to that file."""

from __future__ import annotations

from pathlib import Path

import pytest
from role_play import ROLES, run_play

ROLE = ROLES / "kt_host_tuning"


def check(tmp: Path, governor: object, offered: str | None) -> tuple[int, str, Path]:
    """The role's input check, then its tmpfiles.d template into tmp (the order of tasks/main.yml)."""
    governors = tmp / "scaling_available_governors"
    if offered is not None:
        governors.write_text(offered)
    written = tmp / "ktinfra-tuning.conf"
    validate = {"name": "kt_host_tuning", "tasks_from": "validate", "public": True}
    template = {"src": str(ROLE / "templates" / "tmpfiles.conf.j2"), "dest": str(written), "mode": "0644"}
    tasks = [{"ansible.builtin.include_role": validate}, {"ansible.builtin.template": template}]
    extra = {"kt_host_tuning_cpu_governor": governor, "kt_host_tuning_governors_file": str(governors)}
    rc, output = run_play(tmp, tasks, extra)
    return rc, output, written


@pytest.mark.parametrize(
    ("governor", "offered", "named"),
    [
        ("ondemand", "performance powersave\n", "this host offers: performance powersave, or empty"),
        ("Performance", None, "(got \"Performance\")"),
        ("performance\nw /etc/motd - - - - x", None, "(got \"performance\\nw /etc/motd - - - - x\")"),
        ("performance powersave", "performance powersave\n", "(got \"performance powersave\")"),
    ],
)  # fmt: skip
def test_a_governor_the_host_does_not_offer_is_refused_before_anything_is_written(
    tmp_path, governor, offered, named
):
    rc, output, written = check(tmp_path, governor, offered)
    assert rc != 0
    assert "kt_host_tuning_cpu_governor must be a cpufreq governor" in output, output[-3000:]
    assert named in output, output[-3000:]
    assert not written.exists()


@pytest.mark.parametrize(
    ("governor", "offered", "line"),
    [
        ("powersave", "performance powersave\n", "scaling_governor - - - - powersave\n"),
        ("performance", None, "scaling_governor - - - - performance\n"),  # no cpufreq: kt-tune.sh says absent
        ("", "performance powersave\n", None),
        (None, None, None),
    ],
)
def test_a_governor_cpufreq_offers_or_none_is_accepted(tmp_path, governor, offered, line):
    rc, output, written = check(tmp_path, governor, offered)
    assert rc == 0, output[-3000:]
    text = written.read_text()
    assert (line in text) if line else "scaling_governor" not in text, text
