"""A real docker image build of the reduced (smoke) profile through packer + ansible, then verify and list.

CI builds this profile rather than kt-0.7 (several GB of CUDA wheels): same template, same play
(playbooks/image.yml), same validate and cleanup steps, same manifest; docs/results/image-build.md has the
full-profile numbers.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from ktinfra.image import REPO_ROOT, dockercli

HERE = Path(__file__).parent
SMOKE_PROFILE = HERE / "smoke-profile.yaml"
IMAGE_CHECKS = HERE / "testinfra" / "image_checks.py"
KTINFRA = [sys.executable, "-m", "ktinfra"]
REPO = os.environ.get("KTINFRA_IMAGE_CI_REPO", "image-ci/kt")
# The real play (roles kt_preflight, kt_python_env, kt_host_tuning) bakes the image under test; the failure
# tests only exercise the driver's clean-up, so they use the minimal play, which fails or stops as fast.
PLAYBOOK = Path(os.environ.get("KTINFRA_IMAGE_CI_PLAYBOOK", REPO_ROOT / "playbooks" / "image.yml"))
FAST_PLAY = HERE / "smoke-play.yml"


def ktinfra(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*KTINFRA, *args], capture_output=True, text=True, cwd=REPO_ROOT)


@pytest.fixture(scope="module")
def out(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("image-out")


@pytest.fixture(scope="module")
def built(out):
    proc = ktinfra(
        "image",
        "build",
        "--json",
        "--profile",
        str(SMOKE_PROFILE),
        "--playbook",
        str(PLAYBOOK),
        "--repository",
        REPO,
        "--out",
        str(out),
    )
    if proc.returncode != 0:
        log = out / "last-failed.log"
        pytest.fail(proc.stderr[-3000:] + (log.read_text()[-3000:] if log.exists() else ""))
    manifest = json.loads(proc.stdout)
    yield manifest
    subprocess.run(["docker", "rmi", manifest["image"]["tag"]], capture_output=True)


def _build_container_left(log: Path, profile: str = "smoke") -> str:
    """The build's own container (named in packer's log), if it is still there; other runs' don't count."""
    names = set(re.findall(rf"image-build-{profile}-[0-9a-f]{{6}}\b", log.read_text()))
    assert len(names) == 1, f"expected the build container's name in {log}, found {sorted(names)}"
    flt = f"name=^/?{names.pop()}$"
    ps = subprocess.run(["docker", "ps", "-aq", "--filter", flt], capture_output=True, text=True)
    return ps.stdout.strip()


def test_manifest_has_pins_with_wheel_sha256(built):
    pins = {(p["env"], p["name"].lower(), p["version"]): p["sha256"] for p in built["pins"]}
    profile = yaml.safe_load(SMOKE_PROFILE.read_text())
    for env in profile["envs"].values():
        for pin in env["packages"]:
            name, version = pin.split("==")
            sha = pins[(env["name"], name.lower(), version)]
            assert sha and len(sha) == 64


def test_manifest_describes_image_and_build(built, out):
    assert built["image"]["tag"] == f"{REPO}:smoke"
    assert built["image"]["id"].startswith("sha256:")
    assert built["profile"]["name"] == "smoke"
    assert built["sizes"]["image_bytes"] > built["sizes"]["base_bytes"] > 0
    assert set(built["sizes"]["envs_bytes"]) == {"kt-kernel", "kt-sft"}
    assert built["build"]["duration_s"] > 0
    assert built["build"]["packer_version"]
    assert len(built["build"]["git"]["revision"]) == 40
    build_dir = out / "smoke-docker"
    assert json.loads((build_dir / "manifest.json").read_text()) == built
    assert not (out / "smoke-docker.partial").exists()


def test_image_boots_systemd_and_keeps_labels(built):
    info = dockercli.image_info(built["image"]["id"])
    assert info["labels"]["ktinfra.profile"] == "smoke"
    assert info["labels"]["ktinfra.revision"] == built["build"]["git"]["revision"]
    config = json.loads(
        subprocess.run(
            ["docker", "image", "inspect", "-f", "{{json .Config}}", built["image"]["id"]],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    assert config["Entrypoint"] == ["/usr/bin/env"]
    assert config["Cmd"] == ["/lib/systemd/systemd"]


def test_verify_runs_testinfra_against_the_image(built, out):
    """--out, as after `make image`: the manifest is the one whose image id is the real image's (--manifest
    PATH is read as given, tests/unit/test_image_verify.py)."""
    # The smoke envs hold no kt-kernel: only the image checks apply (make image runs both suites on kt-0.7).
    proc = ktinfra(
        "image", "verify", "--json", built["image"]["tag"], "--suite", str(IMAGE_CHECKS), "--out", str(out)
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    assert result["manifest"] == str(out / "smoke-docker" / "manifest.json")
    assert result["passed"] and result["systemd"] in ("running", "degraded")
    assert [s["suite"] for s in result["suites"]] == [str(IMAGE_CHECKS)]
    assert " passed" in result["suites"][0]["summary"] and "failed" not in result["suites"][0]["summary"]
    left = subprocess.run(
        ["docker", "ps", "-aq", "--filter", "name=image-verify-"], capture_output=True, text=True
    )
    assert left.stdout.strip() == ""


def test_list_shows_the_build(built, out):
    proc = ktinfra("image", "list", "--json", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    rows = [r for r in json.loads(proc.stdout) if r["id"] == built["image"]["id"]]
    assert rows and rows[0]["manifest"].endswith("smoke-docker/manifest.json")


def test_failed_build_leaves_nothing(tmp_path):
    profile = yaml.safe_load(SMOKE_PROFILE.read_text())
    profile["name"] = "smoke-bad"
    profile["envs"]["inference"]["packages"] = ["packaging==0.0.999"]
    bad = tmp_path / "smoke-bad.yaml"
    bad.write_text(yaml.safe_dump(profile))
    out = tmp_path / "out"
    proc = ktinfra(
        "image",
        "build",
        "--profile",
        str(bad),
        "--playbook",
        str(FAST_PLAY),
        "--repository",
        REPO,
        "--out",
        str(out),
    )
    assert proc.returncode == 1
    assert "packer build failed" in proc.stderr
    assert sorted(p.name for p in out.iterdir()) == ["last-failed.log"]
    assert "packaging==0.0.999" in (out / "last-failed.log").read_text()
    assert _build_container_left(out / "last-failed.log", "smoke-bad") == ""
    assert dockercli.image_info(f"{REPO}:smoke-bad") is None


def test_interrupted_build_leaves_nothing(tmp_path):
    out = tmp_path / "out"
    cmd = [
        *KTINFRA,
        "image",
        "build",
        "--profile",
        str(SMOKE_PROFILE),
        "--playbook",
        str(FAST_PLAY),
        "--repository",
        REPO,
        "--tag",
        "interrupted",
        "--out",
        str(out),
    ]
    # a Ctrl-C from a terminal: SIGINT at its default disposition, even when this test itself runs under a
    # shell's background job (`cmd &` starts with SIGINT ignored, and an ignored SIGINT is inherited)
    proc = subprocess.Popen(
        cmd,
        cwd=REPO_ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    log = out / "smoke-docker.partial" / "build.log"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not (log.exists() and "TASK [" in log.read_text()):
        time.sleep(1)
    assert proc.poll() is None, "the build ended before ansible started"
    proc.send_signal(signal.SIGINT)  # Ctrl-C while ansible provisions the container
    assert proc.wait(timeout=180) != 0
    assert sorted(p.name for p in out.iterdir()) == ["last-failed.log"]
    assert _build_container_left(out / "last-failed.log") == ""
    running = subprocess.run(["pgrep", "-af", f"packer build .*{out}"], capture_output=True, text=True).stdout
    assert not running, running
    assert dockercli.image_info(f"{REPO}:interrupted") is None
