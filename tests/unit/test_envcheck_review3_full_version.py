"""The install check's wheelhouse credit follows a requirement whose marker holds for the env's Python. A
marker on the micro version (`python_full_version >= "3.11.4"`) was read with the env's Python as X.Y.0, or,
where ktinfra itself runs on that X.Y, as ktinfra's own X.Y.Z: for an env that exists already (made with
3.12.5, its pyvenv.cfg or conda-meta says so) the dependency was left out and its wheel in the wheelhouse
not taken off the download; for an env not made yet (only X.Y known: conda takes its newest X.Y.Z) it was
silently read as false. Now an existing env's own X.Y.Z decides, and a marker whose value depends on a
micro version nobody knows yet counts as applying. Real zip wheels (py3-none-any: any host takes them),
sparse sizes."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest

from ktinfra import envcheck


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


def _make_env(prefix: Path, layout: str, full: str) -> None:
    """An env at `prefix` made with Python `full` (X.Y.Z) as `layout` leaves it, nothing installed yet."""
    prefix.mkdir(parents=True)
    if layout == "venv":
        (prefix / "pyvenv.cfg").write_text(
            f"home = /usr/bin\ninclude-system-site-packages = false\nversion = {full}\n"
        )
    elif layout == "virtualenv":
        (prefix / "pyvenv.cfg").write_text(
            f"home = /usr/bin\nimplementation = CPython\nversion_info = {full}.final.0\n"
        )
    else:
        (prefix / "conda-meta").mkdir()
        (prefix / "conda-meta" / f"python-{full}-h955ad1f_0.json").write_text("{}")


def _need(tmp_path: Path, python: str, packages: list[str]) -> int:
    profile = {
        "name": "site",
        "generation": "current",
        "python": [python],
        "envs": {"inference": {"name": "kt-kernel", "packages": packages, "download_bytes": 10**9}},
    }
    result = envcheck.check_install(
        profile, ["inference"], root=tmp_path / "envs", wheelhouse=tmp_path / "wh", manager="venv"
    )
    assert result["python"] == python
    (disk,) = result["disks"]
    return disk["need_bytes"]


@pytest.fixture
def wh(tmp_path: Path) -> Path:
    (tmp_path / "wh").mkdir()
    return tmp_path / "wh"


@pytest.mark.parametrize("layout", ["venv", "virtualenv", "conda"])
@pytest.mark.parametrize(
    ("full", "credited"), [("3.12.5", True), ("3.12.2", False), ("3.11.5", True), ("3.11.2", False)]
)
def test_an_existing_envs_own_micro_version_decides(tmp_path, wh, layout, full, credited):
    python = full.rsplit(".", 1)[0]
    _make_env(tmp_path / "envs" / "kt-kernel", layout, full)
    _wheel(wh, "kt_kernel-0.7.2-py3-none-any.whl", [f'big==1.0; python_full_version >= "{python}.4"'], 10_000)
    _wheel(wh, "big-1.0-py3-none-any.whl", [], 300_000)
    need = _need(tmp_path, python, ["kt-kernel==0.7.2"])
    assert need == 10**9 - 10_000 - (300_000 if credited else 0)


@pytest.mark.parametrize("layout", ["venv", "virtualenv", "conda"])
def test_an_existing_env_says_its_x_y_z(tmp_path, layout):
    _make_env(tmp_path / "kt-kernel", layout, "3.12.5")
    assert envcheck.made_with_full_python(tmp_path / "kt-kernel") == "3.12.5"
    assert envcheck.minor_version(envcheck.made_with_full_python(tmp_path / "kt-kernel")) == "3.12"
    assert envcheck.made_with_full_python(tmp_path / "none") is None


@pytest.mark.parametrize("python", ["3.11", "3.12"])
def test_an_unknown_micro_version_is_not_read_as_false(tmp_path, wh, python):
    """No env yet: the profile says X.Y only. The dependency pip installs from X.Y.4 on is counted (conda
    takes the newest X.Y.Z), as is a profile package with such a marker; one that no X.Y.Z takes is not."""
    requires = [
        f'big==1.0; python_full_version >= "{python}.4"',
        f'never==1.0; python_full_version < "{python}"',
    ]
    _wheel(wh, "kt_kernel-0.7.2-py3-none-any.whl", requires, 10_000)
    _wheel(wh, "big-1.0-py3-none-any.whl", [], 300_000)
    _wheel(wh, "never-1.0-py3-none-any.whl", [], 50_000)
    _wheel(wh, "own-1.0-py3-none-any.whl", [], 7_000)
    packages = ["kt-kernel==0.7.2", f'own==1.0; python_full_version < "{python}.9"']
    assert _need(tmp_path, python, packages) == 10**9 - 10_000 - 300_000 - 7_000


@pytest.mark.parametrize(
    ("marker", "python", "applies"),
    [
        ('python_full_version >= "3.11.4"', "3.11.7", True),
        ('python_full_version >= "3.11.4"', "3.11.2", False),
        ('python_full_version >= "3.11.4"', "3.11", None),  # X.Y.Z not known: cannot be told
        ('python_full_version == "3.11.4"', "3.11", None),
        ('python_full_version != "3.11.4"', "3.11", None),
        ('implementation_version < "3.11.4"', "3.11", None),
        ('python_full_version > "3.11"', "3.11", None),  # 3.11.0 is not, 3.11.1 is
        ('python_full_version >= "3.10.4"', "3.11", True),  # every 3.11.Z
        ('python_full_version < "3.11"', "3.11", False),
        ('python_version >= "3.11"', "3.11", True),
        ('python_version >= "3.12"', "3.11.9", False),
    ],
)
def test_a_marker_on_the_micro_version(marker, python, applies):
    assert envcheck._marker_applies(marker, python, frozenset()) is applies
