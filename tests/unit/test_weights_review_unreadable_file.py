"""`ktinfra weights check` said "matches" for a tree holding a .kt file the user cannot read (root's, mode
0600, checked as another user): it compares sizes, not contents, so it never opened the file, while
kt-kernel's loader (sft/weight_manifest.py) refuses such a tree ("INT8 weight file is not readable"). It now
names the file, exit 1. Run as nobody where the tests run as root (root reads any file)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from int8_tree import moe_model, write_tree

from ktinfra import int8_weights


def check_as_other_user(tree: Path, model: Path) -> subprocess.CompletedProcess:
    run_as = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] if os.geteuid() == 0 else []
    return subprocess.run(
        [*run_as, sys.executable, "-m", "ktinfra", "weights", "check", str(tree), "--model-path", str(model)],
        capture_output=True,
        text=True,
        cwd=tree.parent,
        check=False,
    )


def test_a_file_the_user_cannot_read_fails_the_check():
    base = Path(tempfile.mkdtemp(prefix="ktinfra-int8-"))  # /tmp: nobody can reach it
    try:
        base.chmod(0o755)
        tree, model = write_tree(base / "m-INT8"), moe_model(base / "m")
        int8_weights.write_manifest(tree, model)
        for path in [tree, *tree.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        assert check_as_other_user(tree, model).returncode == 0  # readable: it matches
        hidden = tree / "_layer_1" / "_numa_0" / "INT8_up_2_2048Byte_quant_.kt"
        hidden.chmod(0o600 if os.geteuid() == 0 else 0o000)
        res = check_as_other_user(tree, model)
        assert "Traceback" not in res.stderr, res.stderr
        assert res.returncode == 1, res.stdout + res.stderr
        named = "error: _layer_1/_numa_0/INT8_up_2_2048Byte_quant_.kt cannot be read by this user"
        assert named in res.stderr
    finally:
        shutil.rmtree(base)
