"""kt_host_tuning: a kt_host_tuning_sysctls fs.nr_open below kt_host_tuning_nofile.

validate.yml took the larger of the host's fs.nr_open and the one the role sets as the ceiling, so
`fs.nr_open: 65536` with the default nofile 1048576 passed: runtime.yml lowered fs.nr_open to 65536, limits.d
then holds `* hard nofile 1048576` (pam_limits refuses every login above fs.nr_open) and systemd's
DefaultLimitNOFILE=1048576 fails every service it starts. The role's fs.nr_open is the ceiling once it runs.
The play is validate.yml and the two limits templates (test_kt_host_tuning_role.render), into tmp_path.
"""

from __future__ import annotations

import json
from pathlib import Path

from test_kt_host_tuning_role import render

HOST_NR_OPEN = int(Path("/proc/sys/fs/nr_open").read_text())


def test_a_role_fs_nr_open_below_nofile_is_refused_before_anything_is_written(tmp_path):
    low = 65536
    assert low < 1048576 <= HOST_NR_OPEN  # the host's ceiling alone would pass 1048576
    sysctls = json.dumps({"kt_host_tuning_sysctls": {"fs.nr_open": low}})
    limits = ["kt_host_tuning_memlock=unlimited", "kt_host_tuning_nofile=1048576"]
    rc, output = render(tmp_path, [*limits, sysctls])
    assert rc != 0, output[-3000:]
    refusal = f"nofile 1048576 is above the fs.nr_open that kt_host_tuning_sysctls sets ({low})"
    assert refusal in output, output[-3000:]
    assert not (tmp_path / "limits.conf").exists() and not (tmp_path / "systemd-limits.conf").exists()


def test_a_role_fs_nr_open_at_or_above_nofile_passes_even_below_the_hosts(tmp_path):
    sysctls = json.dumps({"kt_host_tuning_sysctls": {"fs.nr_open": 2048}})
    rc, output = render(tmp_path, ["kt_host_tuning_memlock=unlimited", "kt_host_tuning_nofile=2048", sysctls])
    assert rc == 0, output[-3000:]
    assert "*    hard nofile  2048\n" in (tmp_path / "limits.conf").read_text()
