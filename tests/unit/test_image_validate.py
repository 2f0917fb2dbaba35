"""images/scripts/validate.py, run for real against this interpreter's environment."""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

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
