"""kt_host_tuning's kt-tune.sh: a governor the kernel refuses on one CPU part-way through the CPUs.

Before, the loop stopped at the refusing CPU and reported not_set, but the CPUs before it stayed on the new
governor: a host half on performance, half on powersave, with a report saying nothing was set. Now the ones
already written are put back. The refusal is the kernel's: cpu2's scaling_governor is a link to
/proc/self/oom_score_adj, which refuses a word with EINVAL (self is the writing process: nothing else
changes).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from role_play import ROLES

SCRIPT = ROLES / "kt_host_tuning" / "files" / "kt-tune.sh"


def cpus(tmp: Path, refusing: int | None) -> list[Path]:
    files = []
    for n in range(4):
        folder = tmp / f"cpu{n}" / "cpufreq"
        folder.mkdir(parents=True)
        governor = folder / "scaling_governor"
        if n == refusing:
            governor.symlink_to("/proc/self/oom_score_adj")
        else:
            governor.write_text("powersave\n")
        files.append(governor)
    return files


def tune(tmp: Path) -> dict:
    env = dict(os.environ, KT_TUNE_CPU_ROOT=str(tmp))
    out = subprocess.run(["sh", str(SCRIPT), "governor", "scaling_governor", "performance"],
                         capture_output=True, text=True, env=env, check=True).stdout  # fmt: skip
    return json.loads(out)


def test_a_refusal_part_way_puts_back_the_cpus_already_written(tmp_path):
    files = cpus(tmp_path, refusing=2)
    report = tune(tmp_path)
    assert report["status"] == "not_set", report
    assert report["reason"].endswith(
        "cpu2/cpufreq/scaling_governor: Invalid argument (the 2 written before it were put back)"
    ), report
    assert [f.read_text() for f in files if not f.is_symlink()] == ["powersave\n"] * 3


def test_every_cpu_is_set_where_none_refuses(tmp_path):
    files = cpus(tmp_path, refusing=None)
    assert tune(tmp_path)["status"] == "set"
    assert [f.read_text() for f in files] == ["performance\n"] * 4
    assert tune(tmp_path)["status"] == "applied"
