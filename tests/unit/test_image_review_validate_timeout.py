"""Fresh-eyes review of images/scripts/validate.py: an import that hangs, or takes python down.

The validate step imported every pinned module in one `python -c` run through subprocess.run with no
timeout, so one import that hung (a CUDA init waiting on a device, a lock, a network call) hung the image
build for ever; one that killed the interpreter (SIGSEGV/SIGILL in an extension, os._exit) ended validate
with a RuntimeError traceback and no packages.json; and a process the import left behind holding python's
stdout kept subprocess.run waiting after python had ended. Each import is now bounded
(KTINFRA_VALIDATE_IMPORT_TIMEOUT seconds, default 600), the failure names the module, the other modules
are still checked, and what the import started is killed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[2] / "images" / "scripts" / "validate.py"


def _validate(tmp_path: Path, modules: dict[str, str], imports: list[str], timeout: str = "3"):
    """validate.py run for real with this interpreter as the env's python, the given modules on its path."""
    lib = tmp_path / "lib"
    lib.mkdir()
    for name, source in modules.items():
        (lib / f"{name}.py").write_text(source)
    spec = {"profile": "t", "envs": {"here": {"python": sys.executable, "pins": [], "imports": imports}}}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    env = {**os.environ, "PYTHONPATH": str(lib), "KTINFRA_VALIDATE_IMPORT_TIMEOUT": timeout}
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path / "spec.json"), str(tmp_path / "out.json"), str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,  # the old code never returned here
    )
    return proc, time.monotonic() - started


def _gone(pid: int) -> bool:
    for _ in range(50):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)
    return False


def test_a_hung_import_is_stopped_named_and_the_rest_still_checked(tmp_path):
    hang = (
        f"import os, time\nopen({str(tmp_path / 'pid')!r}, 'w').write(str(os.getpid()))\ntime.sleep(3600)\n"
    )
    proc, took = _validate(
        tmp_path, {"kt_review_hang": hang, "kt_review_fine": "X = 1\n"}, ["kt_review_hang", "kt_review_fine"]
    )
    assert proc.returncode == 1, proc.stderr
    assert (
        "validate: env here: import kt_review_hang failed: timed out: the import did not finish within 3 s"
        in (proc.stderr)
    )
    out = json.loads((tmp_path / "out.json").read_text())
    assert out["envs"]["here"]["imports"]["kt_review_fine"] == "ok"
    assert len(out["problems"]) == 1
    assert took < 30
    assert _gone(int((tmp_path / "pid").read_text())), "the hung python was left running"


def test_an_import_that_kills_python_is_a_problem_line_not_a_traceback(tmp_path):
    crash = "import os, signal\nprint('about to crash')\nos.kill(os.getpid(), signal.SIGSEGV)\n"
    quit_ = "import os\nos._exit(3)\n"
    proc, _ = _validate(
        tmp_path,
        {"kt_review_crash": crash, "kt_review_quit": quit_, "kt_review_fine": "X = 1\n"},
        ["kt_review_crash", "kt_review_fine", "kt_review_quit"],
    )
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    imports = json.loads((tmp_path / "out.json").read_text())["envs"]["here"]["imports"]
    assert imports["kt_review_crash"].startswith(
        "the import ended python (killed by SIGSEGV): about to crash"
    )
    assert imports["kt_review_quit"].startswith("the import ended python (exit status 3)")
    assert imports["kt_review_fine"] == "ok"


def test_a_process_left_by_an_import_neither_blocks_validate_nor_survives_it(tmp_path):
    # the import forks a child that keeps python's stdout and stderr open and sleeps
    leaver = (
        "import os, time\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    time.sleep(3600)\n"
        "    os._exit(0)\n"
        f"open({str(tmp_path / 'pid')!r}, 'w').write(str(pid))\n"
    )
    proc, took = _validate(tmp_path, {"kt_review_leaver": leaver}, ["kt_review_leaver"], timeout="20")
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "out.json").read_text())["envs"]["here"]["imports"] == {
        "kt_review_leaver": "ok"
    }
    assert took < 15
    assert _gone(int((tmp_path / "pid").read_text())), "the import's child was left running"


@pytest.mark.parametrize("value", ["soon", "0", "-5", "inf", "nan"])
def test_a_bad_timeout_is_refused_before_anything_runs(tmp_path, value):
    proc, _ = _validate(tmp_path, {"kt_review_fine": "X = 1\n"}, ["kt_review_fine"], timeout=value)
    assert proc.returncode == 2
    assert f"KTINFRA_VALIDATE_IMPORT_TIMEOUT={value!r} is not a number of seconds > 0" in proc.stderr
    assert not (tmp_path / "out.json").exists()
