"""kt_model_store under --check on a host without git (real ansible-playbook on localhost, with a PATH that
holds no git): the converter clone is what a real run does after installing git, so --check says so instead
of failing. Before: "could not clone ...: Failed to find required executable git" (seen in the
debian12-systemd container with git removed, too)."""

from __future__ import annotations

import os
import shutil
import sys

from role_play import run_play
from test_kt_model_store_role import TASKS, role_vars

TOOLS = ["sh", "mkdir", "chmod", "rm", "sleep", "cat", "dpkg-query", "env", "echo", "ls", "cp", "mv", "id"]


def test_check_on_a_host_without_git_does_not_fail_on_the_clone(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in TOOLS:
        found = shutil.which(tool)
        if found:
            (bin_dir / tool).symlink_to(found)
    os.symlink(sys.executable, bin_dir / "python3")
    extra = role_vars(
        tmp_path,
        [{"name": "m", "repo": "org/m", "cpu_weights": "int4"}],
        kt_model_store_convert_repo=f"file://{tmp_path / 'no-such-repo'}",
        kt_model_store_convert_checkout=str(tmp_path / "checkout"),
    )
    rc, output = run_play(tmp_path, TASKS, extra, env={"PATH": str(bin_dir)}, flags=["--check"])
    assert "--check: git is not installed yet; a real run installs it and clones" in output, output[-3000:]
    assert rc == 0, output[-3000:]
    assert not (tmp_path / "checkout").exists() and not (tmp_path / "store").exists()
