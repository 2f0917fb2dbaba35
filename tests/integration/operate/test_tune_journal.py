"""`ktinfra tune --unit` reading a real systemd journal: a systemd container (the project's base image) runs a
unit that prints a constructed SGLang log; ktinfra runs inside with the container's python 3.11 on the
project's source and the project venv's packages (both mounted read-only)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
IMAGE = "ktinfra/debian12-systemd:latest"
NAME = f"operate-journal-{os.getpid()}"
LOG = "/src/tests/fixtures/logs/decode-oom.log"


def sh(*args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), capture_output=True, text=True, timeout=timeout, check=False)


@pytest.fixture(scope="module")
def container():
    site = sysconfig.get_paths()["purelib"]
    if sys.version_info[:2] != (3, 11):
        pytest.fail("the container's python is 3.11: run the project venv on 3.11", pytrace=False)
    started = sh(
        "docker", "run", "-d", "--name", NAME, "--tmpfs", "/run", "--tmpfs", "/run/lock",
        "-v", "/sys/fs/cgroup:/sys/fs/cgroup:rw", "--cgroupns=host",
        "-v", f"{ROOT}:/src:ro", "-v", f"{site}:/site:ro", IMAGE,
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    try:
        ready = sh(
            "docker", "exec", NAME, "bash", "-c",
            "for i in $(seq 120); do case $(systemctl is-system-running) in running|degraded) exit 0;; esac;"
            " sleep 0.5; done; exit 1",
        )  # fmt: skip
        assert ready.returncode == 0, "systemd did not come up in the container"
        unit = sh(
            "docker", "exec", NAME, "systemd-run", "--unit=kt-serve-log", "--wait", "--quiet", "cat", LOG
        )
        assert unit.returncode == 0, unit.stderr
        yield NAME
    finally:
        sh("docker", "rm", "-f", NAME)


def tune_in_container(container: str, *args: str) -> subprocess.CompletedProcess:
    return sh(
        "docker", "exec", "-w", "/tmp", "-e", "PYTHONPATH=/src:/site", "-e", "PYTHONDONTWRITEBYTECODE=1",
        container, "python3", "-m", "ktinfra", "tune", *args,
    )  # fmt: skip


def test_unit_journal_gives_the_same_advice_as_the_file(container):
    proc = tune_in_container(container, "--unit", "kt-serve-log", "--json")
    assert proc.returncode == 0, proc.stderr
    from_journal = json.loads(proc.stdout)
    from_file = json.loads(tune_in_container(container, "--log", LOG, "--json").stdout)
    assert from_journal["recommendations"] == from_file["recommendations"]
    # a decode OOM; no --max-total-tokens, so halving the GPU experts would only grow the KV pool
    assert {r["parameter"] for r in from_journal["recommendations"]} == {"--max-running-requests"}


def test_unknown_unit_is_an_error(container):
    proc = tune_in_container(container, "--unit", "no-such-unit", "--json")
    assert proc.returncode == 1, proc.stdout
    assert "unit no-such-unit not found: systemd does not know it" in proc.stderr


def test_known_unit_without_scheduler_lines_says_so(container):
    proc = tune_in_container(container, "--unit", "systemd-journald.service", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["summary"]["message"] == "no SGLang scheduler lines found in this log"


def long_up_server(container: str, unit: str, decodes: int) -> None:
    """A unit that logs like an SGLang server up for a while: the start-up lines of the fixture log, then
    `decodes` batch lines, then it stays up (its run keeps its InvocationID)."""
    head = f"head -n 3 {LOG}"  # server_args=ServerArgs(...), Capture cuda graph bs, max_total_num_tokens=...
    batches = f'yes "$(grep -m1 "Decode batch" {LOG})" 2>/dev/null | head -n {decodes}'  # no broken-pipe line
    # journald's per-service rate limit (10000 lines in 30 s) would drop most of the burst
    unlimited = ["-p", "LogRateLimitIntervalSec=0"]
    started = sh("docker", "exec", container, "systemd-run", f"--unit={unit}", *unlimited,
                 "bash", "-c", f"{head}; {batches}; exec sleep infinity")  # fmt: skip
    assert started.returncode == 0, started.stderr
    count = f"journalctl -u {unit} -o cat --no-pager | grep -c 'Decode batch'"
    for _ in range(120):
        logged = sh("docker", "exec", container, "bash", "-c", count).stdout.strip()
        if int(logged or 0) >= decodes:
            return
        sh("sleep", "1")
    raise AssertionError(f"{unit} logged {logged} of {decodes} batch lines in 120 s")


def test_a_server_up_longer_than_the_tail_is_read_with_its_start_up_lines(container):
    """tune reads the last 20000 journal lines; a server up for hours logs more than that after its start-up
    lines. Before, its flags and sizes were out of reach (summary.server_args None) and the rules comparing
    against them went quiet; now the current run's lines before its first batch come first."""
    long_up_server(container, "kt-long", 25000)
    proc = tune_in_container(container, "--unit", "kt-long", "--json")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)["summary"]
    assert summary["server_args"]["mem_fraction_static"] == 0.92
    assert summary["server_args"]["kt_num_gpu_experts"] == 32
    assert summary["startup"]["max_total_num_tokens"] == 1522816
    assert summary["decode_batches"] == 20000  # the tail's: the start-up lines add no batch
    assert summary["lines_read"] == 20000 + 3


def test_a_short_run_is_read_from_its_tail_alone(container):
    long_up_server(container, "kt-short", 10)
    proc = tune_in_container(container, "--unit", "kt-short", "--json")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)["summary"]
    assert summary["server_args"]["mem_fraction_static"] == 0.92
    assert (summary["decode_batches"], summary["lines_read"] < 20) == (10, True)  # nothing read twice
