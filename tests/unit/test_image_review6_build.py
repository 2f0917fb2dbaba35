"""Review 6 of `ktinfra image build`: a failed `docker rm -f` was silent (the build's or verify's container
ran on, verify exited 0); a publish stopped between its two renames left no build at OUT/NAME (the previous
one in .NAME.old-*, the new one in NAME.partial, which the next build deleted); build.log stayed open when
packer's TMPDIR could not be made."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import time

import pytest
from typer.testing import CliRunner

from ktinfra.cli import app
from ktinfra.image import ImageError, build, dockercli, verify
from ktinfra.image.packer_adapter import PackerError, Validation

RM_ERROR = "Error response from daemon: removal of container {} is already in progress"


@pytest.fixture
def fake_docker(tmp_path, monkeypatch):
    """A docker on PATH whose `rm` answers as FAKE_RM_RC / FAKE_RM_ERR say; anything else succeeds."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "docker").write_text(
        '#!/bin/sh\nif [ "$1" = rm ]; then echo "$FAKE_RM_ERR" >&2; exit "${FAKE_RM_RC:-1}"; fi\nexit 0\n'
    )
    (bindir / "docker").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")

    def answer(rc: int, err: str) -> None:
        monkeypatch.setenv("FAKE_RM_RC", str(rc))
        monkeypatch.setenv("FAKE_RM_ERR", err)

    return answer


def test_a_failed_docker_rm_names_the_container_and_dockers_message(fake_docker):
    fake_docker(1, RM_ERROR.format("image-build-x"))
    with pytest.raises(ImageError) as exc:
        dockercli.remove_container("image-build-x")
    assert "docker container image-build-x could not be removed" in str(exc.value)
    assert "removal of container image-build-x is already in progress" in str(exc.value)


@pytest.mark.parametrize("rc", [0, 1])  # docker 28 says it and exits 0; older ones exit 1
def test_a_container_that_is_not_there_is_no_error(fake_docker, rc):
    fake_docker(rc, "Error response from daemon: No such container: image-build-x")
    dockercli.remove_container("image-build-x")


def _prepared(tmp_path) -> build.Prepared:
    req = build.BuildRequest(profile="kt-0.7", out_root=tmp_path / "out", wheelhouse=tmp_path / "wh")
    variables = {"docker_container_name": "image-build-x", "docker_tag": "kt-0.7"}
    return build.Prepared(req, {"name": "kt-0.7"}, {}, "kt-0.7-docker", variables, {"git": {}})


@pytest.fixture
def staged(tmp_path, monkeypatch):
    """run() up to packer: prepare and the packer check stubbed (no docker daemon, base image or packer)."""
    prep = _prepared(tmp_path)
    monkeypatch.setattr(build, "prepare", lambda req, ec2=None: prep)
    monkeypatch.setattr(build, "ensure_available", lambda exec_path: None)
    return prep


class _FailingPacker:
    def __init__(self, *args, **kwargs):
        pass

    def version(self):
        return "1.6.6"

    def validate(self):
        return Validation(True, "")

    def build(self):
        raise PackerError("packer build failed (exit 1)")


def test_a_failed_build_says_its_container_could_not_be_removed(tmp_path, staged, fake_docker, monkeypatch):
    fake_docker(1, RM_ERROR.format("image-build-x"))
    monkeypatch.setattr(build, "Packer", _FailingPacker)
    lines: list[str] = []
    with pytest.raises(ImageError, match="packer build failed"):  # the build's own error stays the error
        build.run(staged.request, on_line=lines.append)
    warning = "warning: docker container image-build-x could not be removed"
    assert any(line.startswith(warning) for line in lines), lines
    assert warning in (tmp_path / "out" / "last-failed.log").read_text()


def test_verify_exits_1_when_its_container_cannot_be_removed(tmp_path, fake_docker, monkeypatch):
    fake_docker(1, RM_ERROR.format("image-verify-x"))
    info = {"id": "sha256:" + "a" * 64, "size_bytes": 1, "tags": ["ktinfra/kt:smoke"], "labels": {}}
    monkeypatch.setattr(verify.dockercli, "image_info", lambda ref: info)
    monkeypatch.setattr(verify, "wait_for_systemd", lambda name: "running")
    monkeypatch.setattr(verify, "run_suite", lambda cmd, env, timeout_s: verify.SuiteRun(0, "1 passed\n", ""))
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps({"image": {"id": info["id"]}, "profile": {"name": "smoke"}, "envs": {}}))
    result = CliRunner().invoke(app, ["image", "verify", "ktinfra/kt:smoke", "--manifest", str(path)])
    assert result.exit_code == 1, result.output
    assert "could not be removed" in " ".join(result.output.split())


def _build_dir(path: pathlib.Path, started: str) -> None:
    path.mkdir(parents=True)
    (path / "manifest.json").write_text(json.dumps({"build": {"started": started}}))


def test_ctrl_c_between_publishs_renames_waits_until_the_new_build_is_in_place(tmp_path, monkeypatch):
    final, stage = tmp_path / "kt-docker", tmp_path / "kt-docker.partial"
    _build_dir(final, "previous")
    stage.mkdir()
    real_replace = os.replace

    def replace(src, dst):
        real_replace(src, dst)
        if pathlib.Path(src) == final:  # the previous build is aside now: Ctrl-C comes here
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.2)  # the handler runs by now (a sleep is interrupted by it)

    monkeypatch.setattr(build.os, "replace", replace)
    # Python's Ctrl-C handler, as in a terminal: a process started in the background of a shell without job
    # control (CI's lanes, scripts/test-lanes.sh) inherits SIGINT ignored: the test's own SIGINT did nothing
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):  # not swallowed: acted on once both renames are done
            build.publish(stage, final, json.dumps({"build": {"started": "new"}}))
    finally:
        signal.signal(signal.SIGINT, previous)
    assert json.loads((final / "manifest.json").read_text())["build"]["started"] == "new"


class _Stop(Exception):
    pass


@pytest.mark.parametrize(
    ("stage_finished", "kept"), [(True, "new"), (False, "previous")], ids=["new-in-stage", "only-previous"]
)
def test_the_next_build_puts_back_a_build_a_killed_publish_left_aside(
    tmp_path, staged, monkeypatch, stage_finished, kept
):
    out = staged.request.out_root
    _build_dir(out / ".kt-0.7-docker.old-0a1b2c3d", "previous")
    if stage_finished:
        _build_dir(out / "kt-0.7-docker.partial", "new")
    else:
        (out / "kt-0.7-docker.partial").mkdir()  # killed mid-build: no manifest
    seen = {}

    def run_packer(req, prep, stage, final, *args):
        seen["final"] = json.loads((final / "manifest.json").read_text())["build"]["started"]
        seen["names"] = sorted(p.name for p in out.iterdir())
        raise _Stop

    monkeypatch.setattr(build, "_run_packer", run_packer)
    with pytest.raises(_Stop):
        build.run(staged.request)
    assert seen == {"final": kept, "names": ["kt-0.7-docker", "kt-0.7-docker.partial"]}


def test_build_log_is_closed_when_packers_tmpdir_cannot_be_made(tmp_path, staged, monkeypatch):
    opened = []
    real_open = pathlib.Path.open

    def record_open(self, *args, **kwargs):
        handle = real_open(self, *args, **kwargs)
        opened.append(handle)
        return handle

    def no_space(**_kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pathlib.Path, "open", record_open)
    monkeypatch.setattr(build.tempfile, "mkdtemp", no_space)
    with pytest.raises(ImageError, match="cannot set up the build .*No space left on device"):
        build.run(staged.request)
    assert [handle for handle in opened if not handle.closed] == []
    assert not (staged.request.out_root / "kt-0.7-docker.partial").exists()
