"""The install check's wheelhouse credit counts a wheel only where pip would install it, by all three of its
tags: the Python, the ABI and the platform. Before, the platform tag was not read: a shared wheelhouse that
held a macOS, aarch64 or musllinux build of a pinned package (or one for a newer glibc than the host's) had
its bytes taken off this x86_64 glibc host's download, which pip then made in full. The tags an env takes
come from packaging (the host's own platform tags by default; here given, for an x86_64 host of glibc 2.35).
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest

from ktinfra import envcheck

X86_64_GLIBC_2_35 = [f"manylinux_2_{minor}_x86_64" for minor in range(35, 16, -1)] + [
    "manylinux2014_x86_64",
    "linux_x86_64",
]
KT_311 = "kt_kernel-0.7.2-cp311-cp311-manylinux_2_35_x86_64.whl"
KT_312 = "kt_kernel-0.7.2-cp312-cp312-manylinux_2_35_x86_64.whl"


@pytest.mark.parametrize(
    ("filename", "py311", "py312"),
    [
        (KT_311, True, False),
        (KT_312, False, True),
        ("kt_kernel-0.7.2-py3-none-manylinux_2_35_x86_64.whl", True, True),
        ("cryptography-44.0.0-cp39-abi3-manylinux_2_34_x86_64.whl", True, True),
        ("cryptography-44.0.0-cp39-abi3-manylinux_2_17_x86_64.manylinux2014_x86_64.whl", True, True),
        ("tqdm-4.67.1-py3-none-any.whl", True, True),
        ("newer-1.0-py312-none-any.whl", False, True),
        ("kt_kernel-0.7.2-cp311-cp311-macosx_11_0_arm64.whl", False, False),
        ("kt_kernel-0.7.2-cp312-cp312-manylinux_2_35_aarch64.whl", False, False),
        ("kt_kernel-0.7.2-cp311-cp311-musllinux_1_2_x86_64.whl", False, False),
        ("kt_kernel-0.7.2-cp311-cp311-win_amd64.whl", False, False),
        ("numpy-2.3.0-cp311-cp311-manylinux_2_36_x86_64.whl", False, False),  # needs a newer glibc
        ("kt_kernel-0.7.2.tar.gz", False, False),  # no wheel: pip builds one, the download is not saved
        ("kt_kernel-0.7.2.whl", False, False),  # no wheel name pip takes
    ],
)
def test_a_wheel_fits_by_its_python_abi_and_platform(filename, py311, py312):
    assert (envcheck._rank(filename, envcheck._env_tags("3.11", X86_64_GLIBC_2_35)) is not None) is py311
    assert (envcheck._rank(filename, envcheck._env_tags("3.12", X86_64_GLIBC_2_35)) is not None) is py312


def test_this_hosts_platform_tags_are_the_default():
    assert envcheck._rank("tqdm-4.67.1-py3-none-any.whl", envcheck._env_tags("3.12")) is not None
    assert (
        envcheck._rank("kt_kernel-0.7.2-cp312-cp312-macosx_11_0_arm64.whl", envcheck._env_tags("3.12"))
        is None
    )


def _wheel(wheelhouse: Path, filename: str, size: int) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("kt_kernel-0.7.2.dist-info/METADATA", "Metadata-Version: 2.1\nName: kt_kernel\n\n")
    data = buffer.getvalue()
    with (wheelhouse / filename).open("wb") as handle:
        handle.truncate(size - len(data))  # a hole: no disk used
        handle.seek(0, 2)
        handle.write(data)


def test_another_platforms_build_of_a_pin_saves_nothing_of_the_download(tmp_path):
    (tmp_path / "wh").mkdir()
    sizes = {
        KT_312: 300_000,
        "kt_kernel-0.7.2-cp312-cp312-macosx_11_0_arm64.whl": 500_000,
        "kt_kernel-0.7.2-cp312-cp312-manylinux_2_35_aarch64.whl": 700_000,
        "kt_kernel-0.7.2-cp312-cp312-musllinux_1_2_x86_64.whl": 900_000,
    }
    for filename, size in sizes.items():
        _wheel(tmp_path / "wh", filename, size)
    envs = [{"name": "kt", "packages": ["kt-kernel==0.7.2"], "wheels": [], "pip": {}}]
    assert envcheck._wheelhouse_bytes(tmp_path / "wh", envs, "3.12", X86_64_GLIBC_2_35) == 300_000
    assert envcheck._wheelhouse_bytes(tmp_path / "wh", envs, "3.11", X86_64_GLIBC_2_35) == 0


def test_the_install_check_takes_a_macos_wheel_off_no_download(tmp_path):
    """Through check_install on this host (Linux): a macOS build never fits, whatever the host's arch."""
    (tmp_path / "wh").mkdir()
    _wheel(tmp_path / "wh", "kt_kernel-0.7.2-cp311-cp311-macosx_11_0_arm64.whl", 400_000)
    _wheel(tmp_path / "wh", "kt_kernel-0.7.2-cp311-cp311-win_amd64.whl", 200_000)
    profile = {
        "name": "site",
        "generation": "current",
        "python": ["3.11"],
        "envs": {
            "inference": {"name": "kt-kernel", "packages": ["kt-kernel==0.7.2"], "download_bytes": 10**6}
        },
    }
    result = envcheck.check_install(
        profile, ["inference"], root=tmp_path / "envs", wheelhouse=tmp_path / "wh", manager="conda"
    )
    (disk,) = result["disks"]
    assert disk["need_bytes"] == 10**6


def test_one_file_of_a_distribution_is_credited_as_pip_installs_one(tmp_path):
    """kt_preflight's local build (linux_x86_64) beside the manylinux wheel of the same version, an abi3
    and a py3 build of it, and an older release: pip installs one of them, the newest version's file of the
    tag it prefers (cp311-cp311 before abi3 before py3; manylinux before linux_x86_64)."""
    (tmp_path / "wh").mkdir()
    sizes = {
        KT_311: 300_000,
        "kt_kernel-0.7.2-cp311-cp311-linux_x86_64.whl": 500_000,
        "kt_kernel-0.7.2-cp39-abi3-manylinux_2_35_x86_64.whl": 700_000,
        "kt_kernel-0.7.2-py3-none-any.whl": 900_000,
        "kt_kernel-0.6.0-cp311-cp311-manylinux_2_35_x86_64.whl": 1_100_000,
    }
    for filename, size in sizes.items():
        _wheel(tmp_path / "wh", filename, size)
    pinned = [{"name": "kt", "packages": ["kt-kernel==0.7.2"], "wheels": [], "pip": {}}]
    unpinned = [{"name": "kt", "packages": ["kt-kernel"], "wheels": [], "pip": {}}]
    # the platforms in the order packaging gives them: manylinux_2_35 first, linux_x86_64 last
    for envs in (pinned, unpinned):
        assert envcheck._wheelhouse_bytes(tmp_path / "wh", envs, "3.11", X86_64_GLIBC_2_35) == 300_000
