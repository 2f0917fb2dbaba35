"""SIGTERM handled as Ctrl-C for the image commands that start processes and containers."""

from __future__ import annotations

import contextlib
import signal
import threading


@contextlib.contextmanager
def sigterm_unwinds():
    """SIGTERM (CI's stop, scripts/test-lanes.sh) ends the command as Ctrl-C does, through its cleanup: the
    process groups it started (sessions of their own, which a signal to ktinfra's group does not reach) are
    stopped and its containers and stages removed. Python's default was to die on the spot and leave them.
    Exit status 128 + 15."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, _frame):
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
