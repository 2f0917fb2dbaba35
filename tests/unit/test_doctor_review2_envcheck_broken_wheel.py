"""A damaged wheel in the shared wheelhouse (a download cut off or corrupted on its way) ended
`ktinfra profile check` in a traceback: reading its METADATA raised zlib.error ('invalid code lengths set'),
which the reader did not catch; the role's check task then failed with Python's traceback as its message.
Such a wheel's requirements are now left unread, as for any unreadable wheel. Real zip files, the real CLI."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from ktinfra import envcheck

METADATA = "Metadata-Version: 2.1\nName: kt-kernel\nVersion: 0.7.2\nRequires-Dist: torch==2.9.1\n" * 40


def _damaged(path: Path) -> Path:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("kt_kernel-0.7.2.dist-info/METADATA", METADATA)
    data = bytearray(buffer.getvalue())
    start = 30 + len("kt_kernel-0.7.2.dist-info/METADATA")  # the deflate stream after the local header
    for i in range(start, start + 20):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))
    with zipfile.ZipFile(path) as archive, pytest.raises(Exception) as raised:  # noqa: PT011
        archive.read(archive.namelist()[0])
    assert not isinstance(raised.value, (OSError, zipfile.BadZipFile, RuntimeError, ValueError)), raised
    return path


def test_a_damaged_wheel_is_read_as_requiring_nothing(tmp_path):
    wheel = _damaged(tmp_path / "kt_kernel-0.7.2-cp311-cp311-manylinux_2_35_x86_64.whl")
    assert envcheck._requirements(wheel, frozenset(), "3.11") == []


def test_profile_check_over_a_wheelhouse_with_a_damaged_wheel_reports_its_plan(tmp_path):
    (tmp_path / "wh").mkdir()
    _damaged(tmp_path / "wh" / "kt_kernel-0.7.2-cp311-cp311-manylinux_2_35_x86_64.whl")
    done = subprocess.run(
        [sys.executable, "-m", "ktinfra", "profile", "check", "kt-0.7", "--json", "--env", "inference",
         "--root", str(tmp_path / "envs"), "--wheelhouse", str(tmp_path / "wh"), "--manager", "conda"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode in (0, 2), done.stderr  # 2: no conda here
    assert json.loads(done.stdout)["envs"][0]["name"] == "kt-kernel"
