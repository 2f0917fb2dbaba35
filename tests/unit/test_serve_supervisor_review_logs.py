"""kt_serve under supervisord: the server's log holds its API key (sglang logs `server_args=ServerArgs(...,
api_key='...')` at start, entrypoints/engine.py), so the log directory must keep it from other users, as the
0600 env file does. The role's own task, run for real on localhost against a folder in tmp_path."""

from __future__ import annotations

import stat

import yaml
from role_play import REPO, run_play

TASKS = REPO / "roles" / "kt_serve" / "tasks" / "supervisor.yml"
LOGS = "/var/log/ktinfra"


def _log_dir_tasks(where: str) -> list:
    """The tasks of supervisor.yml that create the log directory, pointed at `where`."""
    tasks = [
        t
        for t in yaml.safe_load(TASKS.read_text())
        if "ansible.builtin.file" in t and LOGS in yaml.safe_dump(t)  # not the checks that name a log in it
    ]
    assert tasks, f"no task of {TASKS} creates {LOGS}"
    return yaml.safe_load(yaml.safe_dump(tasks).replace(LOGS, where))


def test_an_earlier_runs_world_readable_log_is_no_longer_readable_by_others(tmp_path):
    logs = tmp_path / "log"
    logs.mkdir(mode=0o755)
    logs.chmod(0o755)  # what the role made before, and supervisord's umask 022 made the log 0644
    log = logs / "serve-tiny.log"
    log.write_text("[2026-01-01] server_args=ServerArgs(model_path='/srv/m', api_key='s3cret', ...)\n")
    log.chmod(0o644)
    rc, output = run_play(tmp_path, _log_dir_tasks(str(logs)))
    assert rc == 0, output[-3000:]
    mode = stat.S_IMODE(logs.stat().st_mode)
    assert mode & (stat.S_IRWXG | stat.S_IRWXO) == 0, oct(mode)  # no one but the owner reaches the log


def test_a_new_log_directory_is_the_owners_only(tmp_path):
    logs = tmp_path / "fresh" / "log"
    rc, output = run_play(tmp_path, _log_dir_tasks(str(logs)))
    assert rc == 0, output[-3000:]
    assert stat.S_IMODE(logs.stat().st_mode) == 0o700
