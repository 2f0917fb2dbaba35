"""An INT8 tree the reading user may not search (another user's, mode 0700): read_manifest, which `ktinfra
render train` calls on a local kt_weight_path, raised PermissionError out of Path.exists() (a traceback
from render) instead of its WeightsError. Run as nobody where the tests run as root (root searches any
folder)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from int8_tree import moe_model, write_tree

from ktinfra import int8_weights

PROBE = """import sys
from pathlib import Path
from ktinfra import int8_weights
try:
    int8_weights.read_manifest(Path(sys.argv[1]))
except int8_weights.WeightsError as exc:
    print("WeightsError:", exc)
"""


def test_a_tree_that_cannot_be_searched_is_a_weights_error():
    base = Path(tempfile.mkdtemp(prefix="ktinfra-int8-"))  # /tmp: nobody can reach it
    try:
        base.chmod(0o755)
        tree = write_tree(base / "m-INT8")
        int8_weights.write_manifest(tree, moe_model(base / "m"))
        tree.chmod(0o700 if os.geteuid() == 0 else 0o600)  # root's own: nobody may not enter it
        run_as = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] if os.geteuid() == 0 else []
        res = subprocess.run(
            [*run_as, sys.executable, "-c", PROBE, str(tree)],
            capture_output=True,
            text=True,
            cwd=base,
            check=False,
        )
        assert "Traceback" not in res.stderr, res.stderr
        expected = f"WeightsError: cannot read {tree / int8_weights.MANIFEST_NAME}: Permission denied"
        assert res.stdout.strip() == expected, res.stdout + res.stderr
    finally:
        (base / "m-INT8").chmod(0o755)
        shutil.rmtree(base)
