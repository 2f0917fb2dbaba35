"""`os.arch` from `uname -a` as busybox and toybox print it: only GNU coreutils' layout ("... x86_64 x86_64
x86_64 GNU/Linux") was read, so an Alpine container ("... x86_64 Linux") or Android's toybox ("... aarch64
Toybox") had arch null, live and from their captures. The lines below are SYNTHETIC, written in each tool's
layout (sysname nodename release version machine [os]); no such host was captured. Live facts take the
machine (and, when `uname` is missing, the kernel) from uname(2) through the platform module."""

from __future__ import annotations

import pytest

from ktinfra import facts as host_facts
from ktinfra.facts.system import os_facts

UNAME_LINES = {
    "busybox on Alpine": (
        "Linux 3f9a7c21d0e4 6.6.58-0-lts #1-Alpine SMP PREEMPT_DYNAMIC Tue, 22 Oct 2024 10:43:03 +0000 "
        "x86_64 Linux",
        "x86_64",
    ),
    "busybox, GNU os name": (
        "Linux rpi 6.1.21-v7+ #1642 SMP Mon Apr 3 17:20:52 BST 2023 armv7l GNU/Linux",
        "armv7l",
    ),
    "toybox on Android": (
        "Linux localhost 5.10.198-android12-9 #1 SMP PREEMPT Thu Jan 11 2024 aarch64 Toybox",
        "aarch64",
    ),
    "busybox without the os name": ("Linux box 5.15.0 #1 SMP Mon Jan 1 00:00:00 UTC 2024 riscv64", "riscv64"),
    "GNU coreutils": (
        "Linux vm 6.18.44-fc-v657-gpu #1 SMP PREEMPT_DYNAMIC @0 x86_64 x86_64 x86_64 GNU/Linux",
        "x86_64",
    ),
    "GNU, a machine not listed": ("Linux m 6.1.0 #1 SMP Thu Jan 4 2024 e2k GNU/Linux", "e2k"),
}


@pytest.mark.parametrize("case", sorted(UNAME_LINES))
def test_arch_from_each_uname_layout(case):
    line, arch = UNAME_LINES[case]
    facts = os_facts({"uname.txt": line + "\n"})
    assert facts["arch"] == arch
    assert facts["kernel"] == line.split()[2]


def test_live_arch_and_kernel_come_from_uname_itself(monkeypatch):
    """A busybox whose `uname -a` names no machine; a host without `uname` (no uname.txt) keeps its kernel."""
    monkeypatch.setattr(host_facts.platform, "machine", lambda: "aarch64")
    monkeypatch.setattr(host_facts.platform, "release", lambda: "6.8.0-60-generic")
    monkeypatch.setattr(host_facts, "collect_live", lambda: {"uname.txt": "Linux box 6.8.0-60-generic #63\n"})
    assert host_facts.gather_live()["os"]["arch"] == "aarch64"
    monkeypatch.setattr(host_facts, "collect_live", lambda: {"meminfo.txt": "MemTotal: 1024 kB\n"})
    assert {k: host_facts.gather_live()["os"][k] for k in ("arch", "kernel")} == {
        "arch": "aarch64",
        "kernel": "6.8.0-60-generic",
    }
