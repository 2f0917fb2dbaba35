"""kt_host_tuning: a sysctl.d file read after 90-ktinfra.conf that sets one of its sysctls to another value.

systemd-sysctl reads all *.conf of its directories in file-name order and the last value wins; Debian and
Ubuntu link /etc/sysctl.d/99-sysctl.conf to /etc/sysctl.conf. Before, an admin's `vm.swappiness = 60` there
put the host back on 60 at every boot while the run reported 10 applied and persisted. Now the play stops
before any change and names the file and line. The play is tasks/main.yml's steps run for real on localhost,
with the sysctl directories, /proc/sys and the drop-in all under tmp_path.
"""

from __future__ import annotations

from pathlib import Path

from role_play import run_play
from test_host_tuning_review3_refused_sysctl import main_yml_play, sysctl_root

NAME = "ktinfra_test.swappiness"


def layout(tmp: Path) -> tuple[Path, Path, Path]:
    """tmp/etc (systemd's first directory), tmp/lib (a later one), tmp/sysctl.conf."""
    etc, lib = tmp / "etc", tmp / "lib"
    etc.mkdir()
    lib.mkdir()
    return etc, lib, tmp / "sysctl.conf"


def play(tmp: Path, sysctls: dict) -> tuple[int, str, Path]:
    tasks, dropin = main_yml_play(tmp)
    extra = {
        "kt_host_tuning_sysctls": sysctls,
        "kt_host_tuning_report_file": str(tmp / "tuning.json"),
        "kt_host_tuning_sysctl_dir": str(tmp),
        "kt_host_tuning__sysctl_boot_dirs": [str(tmp / "etc"), str(tmp / "lib")],
        "kt_host_tuning__sysctl_conf": str(tmp / "sysctl.conf"),
    }
    extra |= dict.fromkeys(
        ["kt_host_tuning_thp", "kt_host_tuning_cpu_governor", "kt_host_tuning_shm_size"], ""
    )
    rc, output = run_play(tmp, tasks, extra, env={"KT_TUNE_SYSCTL_ROOT": str(sysctl_root(tmp))})
    return rc, output, dropin


def live(tmp: Path) -> str:
    return (tmp / "sys" / "ktinfra_test" / "swappiness").read_text()


def test_debians_sysctl_conf_setting_another_value_stops_the_play_before_any_change(tmp_path):
    etc, _, conf = layout(tmp_path)
    conf.write_text("# admin's file\n#vm.foo = 1\n\nktinfra_test.swappiness = 60\n")
    (etc / "99-sysctl.conf").symlink_to(conf)
    rc, output, dropin = play(tmp_path, {NAME: 10})
    assert rc != 0, output[-3000:]
    # read through the link and again last (procps' sysctl --system): named as the file to edit
    assert f"{conf} line 4 sets {NAME} = 60: read after {tmp_path}/90-ktinfra.conf" in output, output[-3000:]
    assert f"so {NAME} = 10 would hold until the next reboot only" in output
    assert not dropin.exists() and live(tmp_path) == "60\n"
    assert not (tmp_path / "tuning.json").exists()


def test_a_later_file_in_the_slash_form_counts_and_earlier_files_do_not(tmp_path):
    etc, lib, _ = layout(tmp_path)
    (etc / "10-early.conf").write_text("ktinfra_test.swappiness = 30\n")
    (lib / "95-vendor.conf").write_text("-ktinfra_test/swappiness=30\n")
    rc, output, dropin = play(tmp_path, {NAME: 10})
    assert rc != 0, output[-3000:]
    assert f"{lib}/95-vendor.conf line 1 sets {NAME} = 30" in output, output[-3000:]
    assert "10-early.conf" not in output.split("TASK [")[-1]
    assert not dropin.exists()


def test_same_values_globs_masked_files_and_a_value_set_back_pass(tmp_path):
    etc, lib, conf = layout(tmp_path)
    (etc / "95-same.conf").write_text("ktinfra_test.swappiness =   10\n")
    (etc / "96-glob.conf").write_text("ktinfra_test.* = 60\n")
    (etc / "97-masked.conf").symlink_to("/dev/null")  # hides lib's file of that name, as systemd does
    (lib / "97-masked.conf").write_text("ktinfra_test.swappiness = 60\n")
    (etc / "98-away.conf").write_text("ktinfra_test.swappiness = 60\n")
    conf.write_text("ktinfra_test.swappiness = 10\n")  # read last: the boot value is ours again
    rc, output, dropin = play(tmp_path, {NAME: 10})
    assert rc == 0, output[-3000:]
    assert live(tmp_path) == "10\n" and f"\n{NAME} = 10\n" in dropin.read_text()
