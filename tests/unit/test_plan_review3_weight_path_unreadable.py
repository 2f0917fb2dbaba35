"""`ktinfra plan --weight-path` on a folder the planning user may not read (another user's, mode 0700, or
one under such a folder): the plan took it for empty and charged a conversion or download of tens of GB
to the disk without a word. It is still planned as not there yet (it may be another host's path:
test_weights_review2_gguf_unreadable), now with a warning naming the path and the error. Run as nobody, as
the tests run as root (root reads any folder)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

HOST = Path(__file__).parents[1] / "fixtures" / "hosts" / "h100-xeon-amx-16c"
AS_NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] if os.geteuid() == 0 else []


@pytest.fixture
def base():
    base = Path(tempfile.mkdtemp(prefix="ktinfra-wp-"))  # /tmp: nobody can reach it
    base.chmod(0o755)
    for name in ("closed", "closed-parent"):
        (base / name).mkdir()
    (base / "closed" / "layer0.kt").write_bytes(b"W")
    (base / "closed-parent" / "w").mkdir()
    for name in ("closed", "closed-parent"):
        (base / name).chmod(0o700 if AS_NOBODY else 0o000)
    yield base
    for name in ("closed", "closed-parent"):
        (base / name).chmod(0o755)
    shutil.rmtree(base)


def _plan(base: Path, weight_path: Path, cpu_format: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*AS_NOBODY, sys.executable, "-m", "ktinfra", "plan", "--model", "Qwen3-30B-A3B", "--mode", "serve",
         "--from", str(HOST), "--cpu-format", cpu_format, "--weight-path", str(weight_path), "--json"],
        capture_output=True, text=True, cwd=base, check=False,
    )  # fmt: skip


@pytest.mark.parametrize("cpu_format", ["AMXINT8", "GGUF:Q4_K_M"])
@pytest.mark.parametrize("where", ["closed", "closed-parent/w"])
def test_a_weight_path_this_user_cannot_read_is_planned_with_a_warning(base, where, cpu_format):
    res = _plan(base, base / where, cpu_format)
    assert res.returncode in (0, 2), res.stdout[-2000:] + res.stderr  # 2: the capture's disk may not hold it
    warnings = json.loads(res.stdout)["warnings"]
    said = f"--weight-path {base / where}: Permission denied for this user, so it is planned as not there yet"
    assert any(w.startswith(said) for w in warnings), warnings


def test_a_weight_path_not_there_yet_is_still_planned(base):
    res = _plan(base, base / "later", "AMXINT8")
    assert res.returncode in (0, 2), res.stderr  # 2: the capture's disk may not hold it; still a plan
    assert f"{base / 'later'}: the conversion writes" in res.stdout, res.stdout[-2000:]
    assert not [w for w in json.loads(res.stdout)["warnings"] if w.startswith("--weight-path")]
