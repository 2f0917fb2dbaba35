"""A wheel's METADATA is an email header, its end the first empty line, whatever the line ends: pip reads it
with the email parser. The install check found the header's end by "\\n\\n" only: in a METADATA written with
CRLF line ends it read the whole file, so a `Requires-Dist:` line of the package's description (its README)
was followed and that wheel's bytes in the wheelhouse were taken off the download pip then made; a folded
Requires-Dist lost its marker. Real zip wheels (py3-none-any: any host takes them), sparse sizes."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest

from ktinfra import envcheck

DESCRIPTION = "# kt-kernel\n\nInstall what the build needs:\n\nRequires-Dist: big==1.0\n"


def _wheel(wheelhouse: Path, filename: str, header: list[str], body: str, newline: str, size: int) -> Path:
    dist, version = filename.split("-")[:2]
    lines = [f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n", *header, "\n", body]
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        text = "".join(lines).replace("\n", newline)
        archive.writestr(f"{dist}-{version}.dist-info/METADATA", text.encode())
    data = buffer.getvalue()
    path = wheelhouse / filename
    with path.open("wb") as handle:
        handle.truncate(size - len(data))  # a hole: no disk used
        handle.seek(0, 2)
        handle.write(data)
    return path


def _need(tmp_path: Path) -> int:
    profile = {
        "name": "site",
        "generation": "current",
        "python": ["3.11"],
        "envs": {
            "inference": {"name": "kt-kernel", "packages": ["kt-kernel==0.7.2"], "download_bytes": 10**9}
        },
    }
    result = envcheck.check_install(
        profile, ["inference"], root=tmp_path / "envs", wheelhouse=tmp_path / "wh", manager="venv"
    )
    (disk,) = result["disks"]
    return disk["need_bytes"]


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_the_description_of_a_crlf_metadata_is_not_read_for_requirements(tmp_path, newline):
    (tmp_path / "wh").mkdir()
    header = ["Requires-Dist: small==1.0\n", "Description-Content-Type: text/markdown\n"]
    kt = _wheel(tmp_path / "wh", "kt_kernel-0.7.2-py3-none-any.whl", header, DESCRIPTION, newline, 10_000)
    _wheel(tmp_path / "wh", "small-1.0-py3-none-any.whl", [], "", "\n", 20_000)
    _wheel(tmp_path / "wh", "big-1.0-py3-none-any.whl", [], "", "\n", 300_000)
    assert envcheck._requirements(kt, frozenset(), "3.11") == [("small", "1.0", frozenset())]
    assert _need(tmp_path) == 10**9 - 10_000 - 20_000


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_a_folded_requirement_keeps_its_marker(tmp_path, newline):
    (tmp_path / "wh").mkdir()
    header = ['Requires-Dist: tomli==2.0.1;\n  python_version < "3.11"\n', "Requires-Dist: small==1.0\n"]
    kt = _wheel(tmp_path / "wh", "kt_kernel-0.7.2-py3-none-any.whl", header, "", newline, 10_000)
    assert envcheck._requirements(kt, frozenset(), "3.11") == [("small", "1.0", frozenset())]
    assert envcheck._requirements(kt, frozenset(), "3.10") == [
        ("tomli", "2.0.1", frozenset()),
        ("small", "1.0", frozenset()),
    ]
