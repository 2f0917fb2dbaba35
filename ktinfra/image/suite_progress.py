"""pytest plugin `ktinfra image verify` loads into each testinfra suite (-p ktinfra.image.suite_progress).

It keeps the node id of the test running now in the file $KTINFRA_VERIFY_PROGRESS (empty between tests), so
that a suite stopped at its time limit can be reported with the test it hung in.
"""

from __future__ import annotations

import os

PROGRESS_ENV = "KTINFRA_VERIFY_PROGRESS"


def _note(text: str) -> None:
    path = os.environ.get(PROGRESS_ENV)
    if path:
        with open(path, "w") as f:
            f.write(text)


def pytest_runtest_logstart(nodeid, location):
    _note(nodeid)


def pytest_runtest_logfinish(nodeid, location):
    _note("")
