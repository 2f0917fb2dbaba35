"""An installed env whose pins the profile bumped is installed again by kt_python_env (its requirements
differ from the last finished install): pip downloads the new wheels into the wheelhouse and unpacks the new
versions into the env before it removes the old ones. The install check counted no disk for an env with a
recorded freeze, so a torch bump on a nearly full disk passed the check ("no problems") and the install
then failed on a full disk half-way. Such an env now needs its download and its size less the pinned
distributions that stay at their pin."""

from __future__ import annotations

import shutil
from pathlib import Path

from installed_env import record_install

from ktinfra import envcheck

GB = 10**9


def _profile(disk: int, download: int) -> dict:
    return {
        "name": "site",
        "generation": "current",
        "python": ["3.11"],
        "envs": {
            "inference": {
                "name": "inf",
                "packages": ["torch==2.9.1", "kt-kernel==0.7.2"],
                "disk_bytes": disk,
                "download_bytes": download,
            }
        },
    }


def _installed_env(root: Path, freeze: dict[str, str], sizes: dict[str, int] | None = None) -> Path:
    """An env under root/inf installed at the pins `freeze` (its records as kt_python_env leaves them) and,
    for each of `sizes`, a dist-info whose RECORD lists that many bytes (as pip writes it: path,hash,size)."""
    prefix = root / "inf"
    site = prefix / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    profile = _profile(0, 0)
    profile["envs"]["inference"]["packages"] = [f"{n}=={v}" for n, v in freeze.items()]
    record_install(prefix, profile, "inference")
    for name, size in (sizes or {}).items():
        info = site / f"{name.replace('-', '_')}-{freeze[name]}.dist-info"
        info.mkdir()
        (info / "RECORD").write_text(
            f"{name}/__init__.py,sha256=x,{size - 100}\n{name}/a.pyc,sha256=y,100\n{info.name}/RECORD,,\n"
        )
    return prefix


def _check(tmp_path: Path, profile: dict) -> dict:
    return envcheck.check_install(
        profile, ["inference"], root=tmp_path / "envs", wheelhouse=tmp_path / "wh", manager="venv"
    )


def _need(result: dict) -> int:
    (disk,) = result["disks"]  # env and wheelhouse on tmp_path's one disk
    return disk["need_bytes"]


def test_a_pin_bump_on_a_too_small_disk_is_refused(tmp_path):
    free = shutil.disk_usage(tmp_path).free
    _installed_env(tmp_path / "envs", {"torch": "2.8.0", "kt-kernel": "0.7.2"})
    result = _check(tmp_path, _profile(disk=free + 10 * GB, download=5 * GB))
    assert any(p.startswith("disk too small:") for p in result["problems"]), result["problems"]
    assert _need(result) == free + 15 * GB
    assert result["envs"][0]["installed"] and result["envs"][0]["reinstall_due"]


def test_an_env_at_its_pins_needs_no_disk(tmp_path):
    free = shutil.disk_usage(tmp_path).free
    _installed_env(tmp_path / "envs", {"torch": "2.9.1", "kt-kernel": "0.7.2"})
    result = _check(tmp_path, _profile(disk=free + 10 * GB, download=5 * GB))
    assert result["problems"] == [] and _need(result) == 0
    assert not result["envs"][0].get("reinstall_due")


def test_the_pinned_distributions_that_stay_are_not_counted_again(tmp_path):
    """kt-kernel bumped, torch stays at its pin: torch's installed bytes stay where they are."""
    _installed_env(
        tmp_path / "envs", {"torch": "2.9.1", "kt-kernel": "0.7.1"}, sizes={"torch": 3 * GB, "kt-kernel": GB}
    )
    result = _check(tmp_path, _profile(disk=10 * GB, download=5 * GB))
    assert result["envs"][0]["reinstall_due"]
    assert _need(result) == (10 * GB - 3 * GB) + 5 * GB  # kt-kernel 0.7.1's own bytes are no credit


def test_a_pin_added_to_the_profile_makes_the_install_due(tmp_path):
    profile = _profile(disk=2 * GB, download=GB)
    profile["envs"]["inference"]["packages"].append("torchaudio==2.9.1")
    _installed_env(tmp_path / "envs", {"torch": "2.9.1", "kt-kernel": "0.7.2"})
    assert _check(tmp_path, profile)["envs"][0]["reinstall_due"]
