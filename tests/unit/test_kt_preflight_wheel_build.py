"""kt_preflight's controller-side wheel build (files/build_wheel.py, run by tasks/tool.yml) for real on this
checkout: runs from one checkout at the same time share its dist folder. Before, each emptied the folder
(`rm -rf $DIST`) while another built or copied into it: molecule's envs and serve scenarios, run side by side,
both failed at "Build the ktinfra wheel from the controller checkout"."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BUILD = REPO / "roles" / "kt_preflight" / "files" / "build_wheel.py"


def _start(dist: Path) -> subprocess.Popen:
    env = {**os.environ, "SOURCE_DATE_EPOCH": "315532800"}
    command = [sys.executable, str(BUILD), str(REPO), str(dist)]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def test_builds_started_together_each_end_with_the_whole_wheel(tmp_path):
    dist = tmp_path / "dist"
    dist.mkdir()
    stale = dist / "ktinfra-0.0.1-py3-none-any.whl"  # a wheel of an older checkout
    stale.write_bytes(b"old")
    runs = [_start(dist) for _ in range(3)]
    results = [(run.wait(timeout=600), *run.communicate()) for run in runs]
    assert all(rc == 0 for rc, _, _ in results), [err[-2000:] for _, _, err in results]
    [path] = {out.strip() for _, out, _ in results}
    wheel = Path(path)
    assert wheel.parent == dist and wheel.name.startswith("ktinfra-") and wheel.name != stale.name
    with zipfile.ZipFile(wheel) as archive:
        assert archive.testzip() is None and "ktinfra/__init__.py" in archive.namelist()
    assert sorted(p.name for p in dist.iterdir()) == [".build.lock", wheel.name]  # no scratch, no stale wheel


def test_a_failed_build_says_so_and_leaves_no_wheel(tmp_path):
    dist = tmp_path / "dist"
    not_a_project = tmp_path / "empty"
    not_a_project.mkdir()
    proc = subprocess.run(
        [sys.executable, str(BUILD), str(not_a_project), str(dist)], capture_output=True, text=True
    )
    assert proc.returncode != 0 and "pip wheel failed" in proc.stderr and proc.stdout == ""
    assert not list(dist.glob("ktinfra-*.whl")) and not list(dist.glob(".build-*"))


def test_a_build_into_another_dist_folder_waits_for_the_one_on_the_same_checkout(tmp_path):
    """The unit tests build into tmp folders of their own from this one checkout; setuptools' build/ in it is
    shared, and two at once failed with "File exists: build/bdist.linux-x86_64/wheel/...". A build holds the
    checkout's lock (flock on its directory): here the test holds it, and the build waits until it lets go."""
    source_fd = os.open(REPO, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(source_fd, fcntl.LOCK_EX)
        run = _start(tmp_path / "dist")
        try:
            run.wait(timeout=20)
        except subprocess.TimeoutExpired:
            pass
        assert run.poll() is None, "the build went on while another held the checkout"
    finally:
        os.close(source_fd)
    out, err = run.communicate(timeout=600)
    assert run.returncode == 0, err[-2000:]
    assert Path(out.strip()).parent == tmp_path / "dist"


def test_a_missing_checkout_is_named_without_a_traceback(tmp_path):
    missing = tmp_path / "no-such-checkout"
    proc = subprocess.run(
        [sys.executable, str(BUILD), str(missing), str(tmp_path / "dist")], capture_output=True, text=True
    )
    assert (
        proc.returncode == 1
        and proc.stderr.strip() == f"cannot build from {missing}: No such file or directory"
    )
