"""The install check's wheelhouse credit follows a requirement only where pip would install it: a PEP 508
environment marker (`; python_version < "3.11"`, `; platform_machine == "aarch64"`) that does not hold for the
env's Python on this host means the wheel is not installed, so its bytes in the shared wheelhouse save nothing
of the download. Before, only `extra == ...` was read and every other marker was ignored: such wheels were
taken off the download and the disk check passed on a disk the download then filled. Real zip wheels with
METADATA, sparse sizes (as in test_profile_review2_wheelhouse)."""

from __future__ import annotations

import io
import platform
import zipfile
from pathlib import Path

import pytest

from ktinfra import envcheck

OTHER_MACHINE = "aarch64" if platform.machine() != "aarch64" else "x86_64"

# The wheels here are x86_64 glibc builds (manylinux_2_35 at most): the host's platform tags are pinned to an
# x86_64 glibc 2.35 host's, in packaging's order, so that these tests assert the same on any machine (an
# aarch64 or older-glibc one takes none of these wheels).
X86_64_GLIBC_2_35 = ["linux_x86_64", *(f"manylinux_2_{minor}_x86_64" for minor in range(35, 16, -1))]


@pytest.fixture(autouse=True)
def _x86_64_glibc_2_35_host(monkeypatch):
    monkeypatch.setattr(envcheck.tags, "platform_tags", lambda: iter(X86_64_GLIBC_2_35))


def _wheel(wheelhouse: Path, filename: str, requires: list[str], size: int) -> None:
    dist, version = filename.split("-")[:2]
    metadata = f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n"
    metadata += "".join(f"Requires-Dist: {r}\n" for r in requires)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(f"{dist}-{version}.dist-info/METADATA", metadata + "\nDescription\n")
    data = buffer.getvalue()
    with (wheelhouse / filename).open("wb") as handle:
        handle.truncate(size - len(data))  # a hole: no disk used
        handle.seek(0, 2)
        handle.write(data)


def _need(tmp_path: Path, packages: list[str], python: str = "3.11") -> int:
    profile = {
        "name": "site",
        "generation": "current",
        "python": [python],
        "envs": {"inference": {"name": "kt-kernel", "packages": packages, "download_bytes": 10**9}},
    }
    # conda (none here: a problem, the plan still made) so that the env's Python need not be on PATH
    result = envcheck.check_install(
        profile, ["inference"], root=tmp_path / "envs", wheelhouse=tmp_path / "wh", manager="conda"
    )
    assert result["python"] == python
    (disk,) = result["disks"]
    return disk["need_bytes"]


@pytest.fixture
def wh(tmp_path: Path) -> Path:
    (tmp_path / "wh").mkdir()
    return tmp_path / "wh"


@pytest.mark.parametrize(
    ("marker", "credited"),
    [
        ('python_version < "3.11"', False),  # tomli, exceptiongroup: not on 3.11
        ('python_version >= "3.11"', True),
        (f'platform_machine == "{OTHER_MACHINE}"', False),  # another architecture's build
        (f'platform_machine == "{platform.machine()}"', True),
        ('sys_platform == "win32" or python_version < "3"', False),
        ('extra == "sft" and python_version < "3.11"', False),  # the extra is asked for, the Python is not
        ('extra == "sft" and python_version >= "3.11"', True),
    ],
)
def test_a_dependency_counts_only_where_its_marker_holds(tmp_path, wh, marker, credited):
    _wheel(wh, "kt_kernel-0.7.2-cp311-cp311-manylinux_2_35_x86_64.whl", [f"big==1.0; {marker}"], 10_000)
    _wheel(wh, "big-1.0-py3-none-any.whl", [], 300_000)
    need = _need(tmp_path, ["kt-kernel[sft]==0.7.2"])
    assert need == 10**9 - 10_000 - (300_000 if credited else 0)


def test_the_envs_python_decides_not_ktinfras_own(tmp_path, wh):
    """The env is made with the profile's Python (3.12 here), whatever Python ktinfra itself runs on."""
    _wheel(
        wh,
        "kt_kernel-0.7.2-py3-none-manylinux_2_35_x86_64.whl",
        ['big==1.0; python_version<"3.12"'],
        10_000,
    )
    _wheel(wh, "big-1.0-py3-none-any.whl", [], 300_000)
    assert _need(tmp_path, ["kt-kernel==0.7.2"], python="3.12") == 10**9 - 10_000
    assert _need(tmp_path, ["kt-kernel==0.7.2"], python="3.11") == 10**9 - 10_000 - 300_000


def test_a_profile_package_whose_marker_does_not_hold_is_not_credited(tmp_path, wh):
    _wheel(wh, "big-1.0-py3-none-any.whl", [], 300_000)
    assert _need(tmp_path, [f'big==1.0; platform_machine == "{OTHER_MACHINE}"']) == 10**9
    assert _need(tmp_path, [f'big==1.0; platform_machine == "{platform.machine()}"']) == 10**9 - 300_000


def test_a_marker_that_does_not_parse_is_followed_as_before(tmp_path, wh):
    _wheel(wh, "kt_kernel-0.7.2-cp311-cp311-manylinux_2_35_x86_64.whl", ["big==1.0; os_name === 'x'"], 10_000)
    _wheel(wh, "big-1.0-py3-none-any.whl", [], 300_000)
    assert _need(tmp_path, ["kt-kernel==0.7.2"]) == 10**9 - 10_000 - 300_000


def test_a_wheel_for_another_python_in_the_shared_wheelhouse_is_not_credited(tmp_path, wh):
    """kt-0.7 installs with 3.11 or 3.12, whichever the host has: a wheelhouse shared with a 3.11 host (or an
    earlier 3.11 install) holds torch's cp311 wheel, which pip passes over for a 3.12 env and downloads the
    cp312 one. Before, the cp311 wheel's bytes were taken off the 3.12 env's download."""
    _wheel(wh, "torch-2.9.1+cu128-cp311-cp311-manylinux_2_28_x86_64.whl", ["tiny==1.0"], 900_000)
    _wheel(wh, "tiny-1.0-py3-none-any.whl", [], 1_000)
    _wheel(wh, "abi-1.0-cp39-abi3-manylinux_2_28_x86_64.whl", [], 2_000)  # a stable-ABI wheel: any 3.9+
    _wheel(wh, "newer-1.0-py313-none-any.whl", [], 4_000)  # py313: 3.13 and later only
    packages = ["torch==2.9.1", "abi==1.0", "newer==1.0"]
    assert _need(tmp_path, packages, python="3.12") == 10**9 - 2_000
    assert _need(tmp_path, packages, python="3.11") == 10**9 - 900_000 - 1_000 - 2_000
    assert _need(tmp_path, packages, python="3.13") == 10**9 - 2_000 - 4_000
