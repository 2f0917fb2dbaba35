"""What a kt_python_env run killed where no always runs (SIGKILL, the OOM killer) leaves: a wheel file's
partial download in the wheelhouse (.NAME.whl.HOST.XXXXXXXX, .NAME.whl.XXXXXXXX before) and the git script of
the checkouts in the sources' folder (.ktinfra-git.XXXXXXXX.sh). The next run removes those of its user
(kt_common's tasks/leftovers.yml), run for real on localhost; files of another shape, user, host or folder
stay."""

from __future__ import annotations

import os
from pathlib import Path

from role_play import run_play
from test_kt_python_env_proxy_secret import _wheel_url_run
from test_kt_python_env_review_offline_git import PIP, _commit, _git, _vars

NOBODY = 65534


def _files(folder: Path, names: list[str], other_user: list[str] = ()) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name in [*names, *other_user]:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text("partial\n")
    for name in other_user:
        os.chown(folder / name, NOBODY, NOBODY)


def _left(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}


def test_partial_wheel_downloads_of_this_user_and_host_are_removed(tmp_path):
    """Before: each killed download left its partial file in the wheelhouse for good."""
    whl = "ktprobe-1.0.0-py3-none-any.whl"
    node = os.uname().nodename
    gone = [f".{whl}.k2j4h6g8", f".{whl}.{node}.a_b1c2d3"]
    kept = [f".{whl}.otherhost.abcd1234", f".{whl}.abc", f"{whl}.abcd1234x", f"sub/.{whl}.abcd1234"]
    _files(tmp_path / "wh", gone + kept, other_user=[".other-1.0-py3-none-any.whl.zz99zz99"])
    rc, output, wheel = _wheel_url_run(tmp_path, None)
    assert rc == 0 and wheel.is_file(), output[-3000:]
    assert _left(tmp_path / "wh") == {whl, *kept, ".other-1.0-py3-none-any.whl.zz99zz99"}, output[-3000:]


def test_git_scripts_a_killed_run_left_are_removed(tmp_path):
    """Before: each killed checkout left its git script (which sources the settings file) in the sources'
    folder for good."""
    upstream = tmp_path / "upstream"
    _git(tmp_path, "init", "-q", str(upstream))
    sha = _commit(upstream, "1")
    gone = [".ktinfra-git.ab12cd34.sh", ".ktinfra-git.zz_99y8x.sh"]
    kept = [".ktinfra-git.ab12cd34.sh.bak", ".ktinfra-git.ab.sh", "ktinfra-git.ab12cd34.sh"]
    _files(tmp_path / "src", gone + kept, other_user=[".ktinfra-git.qwer5678.sh"])
    (tmp_path / "scratch").mkdir()
    rc, output = run_play(
        tmp_path, PIP, _vars(tmp_path, sha, offline=False), env={"TMPDIR": str(tmp_path / "scratch")}
    )
    assert rc == 0, output[-3000:]
    left = {name for name in _left(tmp_path / "src") if "/" not in name}
    assert left == {*kept, ".ktinfra-git.qwer5678.sh"}, output[-3000:]
    assert _git(tmp_path / "src" / "probe", "rev-parse", "HEAD") == sha
