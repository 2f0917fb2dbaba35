"""kt_model_store's convert helper and kt-kernel's /dev/shm scratch: convert_cpu_weights.py (kt-kernel >=
0.6.4) writes a merged (int4) output's layers to /dev/shm/kt_convert_PID and removes the folder only after a
conversion that succeeded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from test_provision_store import CONVERT, model

# stands in for convert_cpu_weights.py (kt-kernel and an AMX CPU are not here): its scratch as upstream makes
# it (f"kt_convert_{os.getpid()}" under /dev/shm, here the --shm-path the helper is given), then `status`
SCRATCH_CONVERTER = """import argparse, os, pathlib, sys
p = argparse.ArgumentParser()
for a in ('--input-path', '--input-type', '--output', '--quant-method'): p.add_argument(a)
a = p.parse_args()
scratch = pathlib.Path(os.environ['KT_TEST_SHM']) / f'kt_convert_{os.getpid()}'
(scratch / '_layer_0').mkdir(parents=True)
(scratch / '_layer_0' / 'INT4_up_0_64Byte_quant_.kt').write_bytes(b'x' * 64)
if {status}:
    sys.exit({status})  # upstream: "Error during conversion", return 1, no close()
out = pathlib.Path(a.output); out.mkdir(parents=True); (out / 'model.safetensors').write_bytes(b'w')
__import__('shutil').rmtree(scratch)  # close()
"""


def run(tmp_path: Path, status: int) -> tuple[int, dict]:
    script = tmp_path / "kt-kernel" / "scripts" / "convert_cpu_weights.py"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(SCRATCH_CONVERTER.replace("{status}", str(status)))
    argv = [sys.executable, str(CONVERT), "--python", sys.executable, "--script", str(script)]
    argv += ["--input-path", str(tmp_path / "src"), "--output", str(tmp_path / "cpu" / "tiny-INT4")]
    argv += ["--quant-method", "int4", "--shm-path", str(tmp_path / "shm")]
    env = dict(os.environ, KT_TEST_SHM=str(tmp_path / "shm"))
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    return proc.returncode, json.loads(proc.stdout.strip().splitlines()[-1])


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_failed_conversion_leaves_no_scratch_in_shared_memory(tmp_path):
    """Before: each failed attempt left its layer files in /dev/shm (RAM; GBs per layer of a large model),
    and the next attempt's shm check and the serve that followed had that much less."""
    model(tmp_path)
    (tmp_path / "cpu").mkdir()
    (tmp_path / "shm").mkdir()
    rc, out = run(tmp_path, 1)
    assert (rc, out["error"]) == (1, "converter exited 1"), out
    assert list((tmp_path / "shm").iterdir()) == []
    assert list((tmp_path / "cpu").iterdir()) == []


def test_scratch_left_by_a_killed_conversion_is_removed_and_a_running_ones_kept(tmp_path):
    """A conversion killed (the host's OOM killer, Ansible's async timeout) left kt_convert_PID; the next
    run removes it before it starts. A folder of a process still running (another conversion) is kept, and
    so is what only looks like one."""
    model(tmp_path)
    (tmp_path / "cpu").mkdir()
    shm = tmp_path / "shm"
    stale, live = shm / f"kt_convert_{dead_pid()}", shm / f"kt_convert_{os.getpid()}"
    other = shm / "kt_convert_notes"
    for folder in (stale, live, other):
        (folder / "_layer_3").mkdir(parents=True)
        (folder / "_layer_3" / "x.kt").write_bytes(b"x")
    rc, out = run(tmp_path, 0)
    assert (rc, out["complete"]) == (0, True), out
    assert sorted(p.name for p in shm.iterdir()) == sorted([live.name, other.name])


def test_the_rendered_convert_unit_removes_the_scratch_a_failed_conversion_left(tmp_path):
    """`ktinfra render convert`'s unit: its ExecStopPost (run after the converter exited, whatever its
    status), run here as systemd splits it, on this machine's /dev/shm. Before there was none: a failed
    int4 unit left kt_convert_PID in RAM until the host rebooted."""
    import shlex

    from ktinfra.render.convert import render_convert

    rendered = render_convert(
        model_path=str(tmp_path / "m"), output=str(tmp_path / "m-INT4"), method="int4", python=sys.executable,
        cpuinfer_threads=4, threadpool_count=1,
    )  # fmt: skip
    unit = rendered.files["ktinfra-convert@.service"][0]
    [line] = [x for x in unit.splitlines() if x.startswith("ExecStopPost=")]
    argv = shlex.split(line.removeprefix("ExecStopPost="))
    assert argv[0] == sys.executable and "%" not in line and "$" not in line and "\\" not in line
    shm = Path("/dev/shm")
    stale, live = shm / f"kt_convert_{dead_pid()}", shm / f"kt_convert_{os.getpid()}"
    try:
        for folder in (stale, live):
            (folder / "_layer_0").mkdir(parents=True)
        subprocess.run(argv, check=True, timeout=60)
        assert not stale.exists() and live.is_dir()
    finally:
        for folder in (stale, live):
            subprocess.run(["rm", "-rf", str(folder)], check=True)
