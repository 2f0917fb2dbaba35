"""Build the ktinfra wheel of a checkout into a dist folder and print the wheel's path (on the controller).

Playbook runs from one checkout at the same time (two terminals, scenarios side by side) share the dist folder
and the source tree, where setuptools writes build/ and *.egg-info: before, each run emptied the dist folder
while another built or copied into it. Now one build at a time (a lock file in the dist folder), each into a
folder of its own, the wheel renamed into place whole; a wheel of another version is removed under the lock.
Runs into different dist folders (the unit tests' tmp folders) still shared the source tree's build/: pip
wheel failed with "File exists: build/bdist.linux-x86_64/wheel/ktinfra-0.1.0.dist-info". So a build also
holds a lock on the source directory itself (flock on its fd: nothing written into the checkout for it).
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import tempfile
from pathlib import Path


def build(source: str, dist: Path) -> Path:
    dist.mkdir(parents=True, exist_ok=True)
    source_fd = os.open(source, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(source_fd, fcntl.LOCK_EX)
        return _build_locked(source, dist)
    finally:
        os.close(source_fd)


def _build_locked(source: str, dist: Path) -> Path:
    with open(dist / ".build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with tempfile.TemporaryDirectory(prefix=".build-", dir=dist) as scratch:
            pip = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", scratch, source]
            subprocess.run(pip, check=True, stdout=sys.stderr)
            [built] = Path(scratch).glob("ktinfra-*.whl")
            for old in dist.glob("ktinfra-*.whl"):
                if old.name != built.name:
                    old.unlink()
            os.replace(built, dist / built.name)
    return dist / built.name


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: build_wheel.py SOURCE_CHECKOUT DIST_DIR")
    try:
        print(build(sys.argv[1], Path(sys.argv[2])))
    except subprocess.CalledProcessError as error:
        sys.exit(f"pip wheel failed (exit {error.returncode}), its output is above")
    except OSError as error:
        sys.exit(f"cannot build from {error.filename}: {error.strerror}")
