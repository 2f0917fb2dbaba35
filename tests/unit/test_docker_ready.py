"""scripts/docker-ready.sh's lock: `make test`'s lanes run it at once. The docker CLI and daemon are stand-ins
on PATH here (this machine's real dockerd serves the other tests and must not be restarted); what runs for
real is the script, bash, flock and the stand-in daemon left running in the background like dockerd.

Before the fix, dockerd inherited the lock's descriptor: the first lane started it, and the second lane's
docker-ready waited on the lock for as long as dockerd ran (CI stopped at 90 min with one lane silent)."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "docker-ready.sh"

STUBS = {
    # a daemon: marks the engine up and stays, as dockerd does
    "dockerd": '#!/bin/sh\necho $$ > "$STUB/dockerd.pid"; touch "$STUB/up"; exec sleep 300\n',
    # `docker info` answers once the daemon is up; the base image is built (by the stand-ins) on every run
    "docker": '#!/bin/sh\ncase "$1" in\n  info) test -e "$STUB/up" ;;\n'
    "  image) echo none ;;\n  import) exit 0 ;;\n  *) exit 9 ;;\nesac\n",
    "mmdebstrap": "#!/bin/sh\nexit 0\n",
    "id": "#!/bin/sh\necho 0\n",  # need_root passes for whoever runs the tests
}


@pytest.fixture
def stub_env(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in STUBS.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    env = dict(
        os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", STUB=str(tmp_path),
        TMPDIR=str(tmp_path), KTINFRA_DOCKERD_LOG=str(tmp_path / "log" / "dockerd.log"),
    )  # fmt: skip
    yield env
    pid_file = tmp_path / "dockerd.pid"
    if pid_file.exists():
        try:
            os.kill(int(pid_file.read_text()), signal.SIGTERM)
        except ProcessLookupError:
            pass


def docker_ready(env, **extra) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(SCRIPT)], env=dict(env, **extra), capture_output=True, text=True, timeout=60
    )


def test_the_daemon_it_starts_does_not_keep_the_lock_from_the_next_lane(stub_env, tmp_path):
    first = docker_ready(stub_env)
    assert first.returncode == 0, first.stderr
    assert (tmp_path / "up").exists() and (tmp_path / "log" / "dockerd.log").exists()
    daemon = int((tmp_path / "dockerd.pid").read_text())
    assert Path(f"/proc/{daemon}").exists()  # still running, as dockerd would

    second = docker_ready(stub_env, KTINFRA_DOCKER_READY_WAIT="10")
    assert second.returncode == 0, second.stderr
    assert "engine up, base image" in second.stdout
    # the daemon holds no descriptor of the lock file
    lock = tmp_path / "ktinfra-docker-ready.lock"
    fds = Path(f"/proc/{daemon}/fd")
    assert all(os.path.realpath(fd) != str(lock) for fd in fds.iterdir())


def test_a_lock_held_too_long_is_an_error_that_names_it(stub_env, tmp_path):
    lock = tmp_path / "ktinfra-docker-ready.lock"
    with lock.open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        blocked = docker_ready(stub_env, KTINFRA_DOCKER_READY_WAIT="1")
    assert blocked.returncode == 1
    assert f"another docker-ready still holds {lock} after 1 s" in blocked.stderr
    assert not (tmp_path / "up").exists()  # it started nothing
