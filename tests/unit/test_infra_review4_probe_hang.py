"""run_probe on a real testinfra local host with a probe that never finishes (a CPUInfer pool that never
returns, a CUDA init stuck in a hung driver): a real python process that sleeps."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest
import testinfra

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "infra"))
import kthost  # noqa: E402


def test_a_probe_that_never_finishes_is_given_up_after_the_bound(tmp_path, monkeypatch):
    """Probes ran unbounded: the suite, and doctor, waited for a hung one for good."""
    (tmp_path / "hang.py").write_text("import time\ntime.sleep(600)\n")
    monkeypatch.setattr(kthost, "PROBES", tmp_path)
    monkeypatch.setattr(kthost, "PROBE_TIMEOUT", 2, raising=False)
    host = testinfra.get_host("local://")
    raised: list = []

    def probe():
        with pytest.raises(kthost.ProbeError) as caught:
            kthost.run_probe(host, sys.executable, "hang")
        raised.append(caught.value)

    start = time.monotonic()
    worker = threading.Thread(target=probe, daemon=True)
    worker.start()
    worker.join(20)
    assert not worker.is_alive(), "the probe was waited for past 20 s"
    [error] = raised
    assert str(error) == f"probe hang with {sys.executable} did not finish within 2 s (hung)"
    assert error.signal_name is None  # not taken for a python killed while loading kt-kernel
    assert time.monotonic() - start < 10


def test_a_probe_killed_by_a_signal_is_still_told_apart(tmp_path, monkeypatch):
    """The bound keeps the 128+N status of a probe killed by a signal (kt_info's SIGILL message)."""
    (tmp_path / "ill.py").write_text("import os, signal\nos.kill(os.getpid(), signal.SIGILL)\n")
    monkeypatch.setattr(kthost, "PROBES", tmp_path)
    with pytest.raises(kthost.ProbeError) as caught:
        kthost.run_probe(testinfra.get_host("local://"), sys.executable, "ill")
    assert caught.value.signal_name == "SIGILL"
