"""images/scripts/validate.py, run for real against this interpreter's environment."""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import importlib.util
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[2] / "images" / "scripts" / "validate.py"
_spec = importlib.util.spec_from_file_location("validate", SCRIPT)
validate = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(validate)

PYYAML = importlib.metadata.version("PyYAML")


def test_pins_and_wheel_names_parse():
    assert validate.parse_pin("ktransformers[sft]==0.7.2") == ("ktransformers", "0.7.2")
    assert validate.parse_pin("Sglang_KT == 0.7.2") == ("sglang-kt", "0.7.2")
    assert validate.parse_pin("torch") == ("torch", None)


def test_wheelhouse_index_and_sha(tmp_path):
    wheel = tmp_path / "PyYAML-6.0.2-cp311-cp311-manylinux_2_17_x86_64.whl"
    wheel.write_bytes(b"wheel bytes")
    (tmp_path / "kt_kernel-0.7.2.tar.gz").write_bytes(b"sdist")
    index = validate.wheel_index(str(tmp_path))
    assert index[("pyyaml", "6.0.2")] == [str(wheel)]
    assert ("kt-kernel", "0.7.2") in index
    assert validate.sha256(str(wheel)) == hashlib.sha256(b"wheel bytes").hexdigest()


def run(tmp_path, pins, wheelhouse=None):
    spec = {"profile": "t", "envs": {"here": {"python": sys.executable, "pins": pins}}}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    proc = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            str(tmp_path / "spec.json"),
            str(tmp_path / "out.json"),
            str(wheelhouse or tmp_path / "none"),
        ],
        capture_output=True,
        text=True,
    )
    return proc, json.loads((tmp_path / "out.json").read_text())


def test_matching_pins_import_and_are_listed(tmp_path):
    wheelhouse = tmp_path / "wh"
    wheelhouse.mkdir()
    (wheelhouse / f"PyYAML-{PYYAML}-cp311-cp311-linux_x86_64.whl").write_bytes(b"x")
    proc, out = run(tmp_path, [f"PyYAML=={PYYAML}"], wheelhouse)
    assert proc.returncode == 0, proc.stderr
    env = out["envs"]["here"]
    assert env["imports"]["yaml"] == "ok"
    pinned = [p for p in env["packages"] if p["pinned"]]
    assert pinned == [
        {
            "name": "PyYAML",
            "version": PYYAML,
            "pinned": True,
            "wheel": f"PyYAML-{PYYAML}-cp311-cp311-linux_x86_64.whl",
            "sha256": hashlib.sha256(b"x").hexdigest(),
        }
    ]
    assert env["size_bytes"] > 0


def test_sha256_is_of_the_wheel_the_env_installed_not_another_of_the_same_version(tmp_path):
    # a shared wheelhouse holds kt-kernel's cp311 and cp312 wheels of one version; the manifest's checksum
    # must be of the one this env's python installed (its dist-info WHEEL tags say which), not the last
    tags = importlib.metadata.distribution("PyYAML").read_text("WHEEL")
    mine = [line.split(":", 1)[1].strip() for line in tags.splitlines() if line.startswith("Tag:")][0]
    py = mine.split("-")[0]
    other = "cp399" if py != "cp399" else "cp398"
    wheelhouse = tmp_path / "wh"
    wheelhouse.mkdir()
    (wheelhouse / f"PyYAML-{PYYAML}-{mine}.whl").write_bytes(b"mine")
    (wheelhouse / f"PyYAML-{PYYAML}-{other}-{other}-{mine.split('-')[2]}.whl").write_bytes(b"other")
    (wheelhouse / f"PyYAML-{PYYAML}-zz1-zz1-any.whl").write_bytes(b"sorts last")
    proc, out = run(tmp_path, [f"PyYAML=={PYYAML}"], wheelhouse)
    assert proc.returncode == 0, proc.stderr
    [pinned] = [p for p in out["envs"]["here"]["packages"] if p["pinned"]]
    assert pinned["wheel"] == f"PyYAML-{PYYAML}-{mine}.whl"
    assert pinned["sha256"] == hashlib.sha256(b"mine").hexdigest()


def test_no_checksum_when_several_wheels_could_be_the_installed_one(tmp_path):
    wheelhouse = tmp_path / "wh"
    wheelhouse.mkdir()
    (wheelhouse / f"PyYAML-{PYYAML}-cp398-cp398-linux_x86_64.whl").write_bytes(b"a")
    (wheelhouse / f"PyYAML-{PYYAML}-cp399-cp399-linux_x86_64.whl").write_bytes(b"b")
    proc, out = run(tmp_path, [f"PyYAML=={PYYAML}"], wheelhouse)
    assert proc.returncode == 0, proc.stderr
    [pinned] = [p for p in out["envs"]["here"]["packages"] if p["pinned"]]
    assert pinned["wheel"] is None and pinned["sha256"] is None


def test_version_drift_and_missing_pin_fail(tmp_path):
    proc, out = run(tmp_path, ["PyYAML==0.0.1", "no-such-dist==1.0"])
    assert proc.returncode == 1
    assert f"pyyaml is {PYYAML}, profile pins 0.0.1" in proc.stderr
    assert "no-such-dist==1.0 is not installed" in proc.stderr
    assert len(out["problems"]) == 2


def test_missing_env_python_fails(tmp_path):
    spec = {"envs": {"gone": {"python": str(tmp_path / "nope/bin/python"), "pins": ["x==1"]}}}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path / "spec.json"), str(tmp_path / "o.json"), str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1
    assert "env gone: no python at" in proc.stderr


# Distributions without top_level.txt (hatchling, flit, maturin and other modern backends write none):
# real wheels, installed by pip into a real venv, checked by validate.py run with that venv's python.


def _wheel(
    where: Path, name: str, files: dict[str, bytes], entry_points: str | None = None, version: str = "0.1"
) -> Path:
    """A wheel as a modern backend writes it: the files, METADATA, WHEEL and a RECORD of sha256s, and no
    top_level.txt. Tagged py3-none-any even around an extension module: pip does not look inside. Also used by
    test_kt_router_role.py (sglang-router stand-ins)."""
    dist_info = f"{name}-{version}.dist-info"
    files = {
        **files,
        f"{dist_info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
        f"{dist_info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        b"Tag: py3-none-any\n",
    }
    if entry_points:
        files[f"{dist_info}/entry_points.txt"] = entry_points.encode()
    record = [
        f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},"
        f"{len(data)}"
        for path, data in files.items()
    ]
    files[f"{dist_info}/RECORD"] = ("\n".join([*record, f"{dist_info}/RECORD,,"]) + "\n").encode()
    wheel = where / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for path, data in files.items():
            zf.writestr(path, data)
    return wheel


def _venv_with(tmp_path: Path, wheels: list[Path]) -> Path:
    """A real venv (no pip of its own) with `wheels` installed by this interpreter's pip."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-index", "--no-deps"]
    proc = subprocess.run([*pip, *map(str, wheels)], capture_output=True, text=True)
    if proc.returncode != 0 and "no such option: --python" in proc.stderr:
        pytest.skip("this pip has no --python (it came in pip 22.3)")
    assert proc.returncode == 0, proc.stderr
    return python


def _validate(tmp_path: Path, python: Path, pins: list[str]):
    spec = {"profile": "t", "envs": {"t": {"python": str(python), "pins": pins}}}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    args = [str(tmp_path / "spec.json"), str(tmp_path / "out.json"), str(tmp_path / "none")]
    proc = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True)
    return proc, json.loads((tmp_path / "out.json").read_text())["envs"]["t"]


def test_top_level_names_come_from_record_without_top_level_txt():
    record = [
        "hpkg/__init__.py",
        "hpkg/sub/mod.py",
        "hpkg/__pycache__/__init__.cpython-312.pyc",
        "hpkg-0.1.dist-info/RECORD",
        "hpkg-0.1.data/scripts/tool.py",
        "../../../bin/hpkg-cli",
        "../../../share/man/hpkg.1",
        "single.py",
        "_speedups.cpython-312-x86_64-linux-gnu.so",
        "limited.abi3.so",
        "nvidia/cublas/__init__.py",  # namespace package nvidia: its regular package is what imports
        "nvidia/cublas/lib/libcublas.so.12",
        "ns_only/plugin.py",
        "bin/tool.py",  # a --prefix install's script
        "__editable___hpkg_0_1_finder.py",
        "hpkg.pth",
        "docs/index.txt",
        "not-an-identifier/__init__.py",
    ]
    assert validate.top_level_from_record(record) == [
        "_speedups",
        "hpkg",
        "limited",
        "ns_only.plugin",
        "nvidia.cublas",
        "single",
    ]
    assert validate.top_level_from_record(["x-0.1.dist-info/METADATA", "x-0.1.data/scripts/x"]) == []


def test_dists_without_top_level_txt_are_imported_or_reported_not_checked(tmp_path):
    wheels = [
        _wheel(
            tmp_path,
            "hatchpkg",
            {"hatchpkg/__init__.py": b"VALUE = 1\n"},
            "[console_scripts]\nh = hatchpkg:x\n",
        ),
        # a namespace package (no kt_ns/__init__.py) holding one regular package
        _wheel(tmp_path, "kt_ns_plugin", {"kt_ns/plugin/__init__.py": b"", "kt_ns/plugin/core.py": b""}),
        _wheel(tmp_path, "flatmod", {"flatmod.py": b"X = 1\n"}),
        # a metapackage: nothing to import, only a script
        _wheel(tmp_path, "metapkg", {"metapkg-0.1.data/scripts/meta-tool": b"#!/bin/sh\n"}),
    ]
    python = _venv_with(tmp_path, wheels)
    # and a distribution installed without a RECORD (by hand, or by a tool that writes none)
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (Path(site) / "norecord-0.1.dist-info").mkdir()
    (Path(site) / "norecord-0.1.dist-info" / "METADATA").write_text("Name: norecord\nVersion: 0.1\n")
    pins = ["hatchpkg==0.1", "kt-ns-plugin==0.1", "flatmod==0.1", "metapkg==0.1", "norecord==0.1"]
    proc, env = _validate(tmp_path, python, pins)
    assert proc.returncode == 0, proc.stderr
    assert env["imports"] == {"hatchpkg": "ok", "kt_ns.plugin": "ok", "flatmod": "ok"}
    # what has nothing to import is not counted as passed: it is listed, on stderr and in the summary line
    assert env["not_checked"] == {
        "metapkg": "no top_level.txt, and its RECORD lists no importable module",
        "norecord": "no top_level.txt and no RECORD",
    }
    assert "validate: env t: import of metapkg NOT CHECKED" in proc.stderr
    assert "validate: env t: import of norecord NOT CHECKED" in proc.stderr
    assert "imports not checked: metapkg, norecord" in proc.stdout


def test_a_broken_import_without_top_level_txt_fails_validate(tmp_path):
    suffix = subprocess.run(
        [sys.executable, "-c", "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    wheels = [
        _wheel(tmp_path, "brokenpkg", {"brokenpkg/__init__.py": b"raise RuntimeError('broken on import')\n"}),
        # a top-level extension module (maturin's layout) that is not a loadable shared object
        _wheel(tmp_path, "badext", {f"badext{suffix}": b"not an ELF file"}),
        _wheel(tmp_path, "goodpkg", {"goodpkg/__init__.py": b""}),
    ]
    python = _venv_with(tmp_path, wheels)
    proc, env = _validate(tmp_path, python, ["brokenpkg==0.1", "badext==0.1", "goodpkg==0.1"])
    assert proc.returncode == 1
    assert "validate: env t: import brokenpkg failed: RuntimeError: broken on import" in proc.stderr
    assert "validate: env t: import badext failed: ImportError" in proc.stderr
    assert env["imports"]["goodpkg"] == "ok"
    assert env["not_checked"] == {}


@pytest.mark.skipif(not shutil.which("gcc"), reason="no C compiler")
def test_a_compiled_extension_module_without_top_level_txt_is_imported(tmp_path):
    paths = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sysconfig as s; print(s.get_paths()['include']); print(s.get_config_var('EXT_SUFFIX'))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    include, suffix = paths
    if not (Path(include) / "Python.h").is_file():
        pytest.skip("no Python.h")
    source = tmp_path / "realext.c"
    source.write_text(
        "#include <Python.h>\n"
        'static struct PyModuleDef def = {PyModuleDef_HEAD_INIT, "realext", NULL, -1, NULL};\n'
        "PyMODINIT_FUNC PyInit_realext(void) { return PyModule_Create(&def); }\n"
    )
    lib = tmp_path / f"realext{suffix}"
    subprocess.run(["gcc", "-shared", "-fPIC", f"-I{include}", "-o", str(lib), str(source)], check=True)
    python = _venv_with(tmp_path, [_wheel(tmp_path, "realext", {lib.name: lib.read_bytes()})])
    proc, env = _validate(tmp_path, python, ["realext==0.1"])
    assert proc.returncode == 0, proc.stderr
    assert env["imports"] == {"realext": "ok"}
    assert env["not_checked"] == {}


def test_a_pin_without_a_local_label_is_met_by_a_local_build(tmp_path):
    # torch==2.9.1 from a CUDA index installs 2.9.1+cu128, as pip and uv read `==` (and as the profile
    # drift check does): validate failed the whole image build on it
    wheels = [
        _wheel(tmp_path, "cudapkg", {"cudapkg/__init__.py": b""}, version="2.9.1+cu128"),
        _wheel(tmp_path, "otherpkg", {"otherpkg/__init__.py": b""}, version="1.0+cu128"),
    ]
    python = _venv_with(tmp_path, wheels)
    proc, env = _validate(tmp_path, python, ["cudapkg==2.9.1", "otherpkg==1.0+cu128"])
    assert proc.returncode == 0, proc.stderr
    assert env["imports"] == {"cudapkg": "ok", "otherpkg": "ok"}
    # a pin that names a local label must match it, and the public version still must match
    proc, _ = _validate(tmp_path, python, ["cudapkg==2.9.1+cu129", "otherpkg==1.1"])
    assert proc.returncode == 1
    assert "validate: env t: cudapkg is 2.9.1+cu128, profile pins 2.9.1+cu129" in proc.stderr
    assert "validate: env t: otherpkg is 1.0+cu128, profile pins 1.1" in proc.stderr


@pytest.mark.parametrize(
    ("installed", "pinned"),
    [("2.9.1", "2.9.1"), ("2.9.1+cu128", "2.9.1"), ("2.9.1", "2.9.1+cu128"), ("2.9.1+cpu", "2.9.1+cu128"),
     ("2.9.10", "2.9.1"), ("2.0.0", "2.0")],
)  # fmt: skip
def test_the_images_pin_check_reads_as_ktinfras_drift_check(installed, pinned):
    """validate.py runs in the image with the stdlib only, so it keeps its own same_version: it must answer
    as ktinfra.profiles._same_version, which `ktinfra doctor`'s drift check uses on the same pins."""
    from ktinfra.profiles import _same_version

    assert validate.same_version(installed, pinned) == _same_version(installed, pinned)
