"""Fresh-eyes review: `ktinfra image verify IMAGE --manifest FILE` took the manifest of any build. With
another image's manifest, the host suite got that build's profile and env pythons, the image checks compared
its pins to what IMAGE holds and read its files by the manifest's image id (docker run MANIFEST_ID): failures
(or passes) about a different image. Such a manifest is now refused with one error line before a container
starts; a manifest without an image id (hand-written) is still taken."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from ktinfra.cli import app
from ktinfra.image import verify

MANIFEST = {"image": {"id": "sha256:" + "b" * 64}, "profile": {"name": "smoke"}, "envs": {}}


@pytest.fixture
def docker(monkeypatch):
    started: list[str] = []
    info = {"id": "sha256:" + "a" * 64, "size_bytes": 1, "tags": ["ktinfra/kt:smoke"], "labels": {}}
    monkeypatch.setattr(verify.dockercli, "ensure_daemon", lambda: None)
    monkeypatch.setattr(verify.dockercli, "image_info", lambda ref: info)
    monkeypatch.setattr(verify.dockercli, "run_detached", lambda _image, name, _args: started.append(name))
    monkeypatch.setattr(verify.dockercli, "remove_container", lambda name: None)
    monkeypatch.setattr(verify, "wait_for_systemd", lambda name: "running")
    monkeypatch.setattr(verify, "run_suite", lambda cmd, env, timeout_s: verify.SuiteRun(0, "1 passed\n", ""))
    return started


def test_manifest_of_another_image_is_refused_before_a_container_starts(tmp_path, docker):
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(MANIFEST))
    result = CliRunner().invoke(app, ["image", "verify", "ktinfra/kt:smoke", "--manifest", str(path)])
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
    text = " ".join(result.output.split())
    assert text.startswith(f"error: manifest {path} is of image sha256:bbbbbbbbbbbb, not of ktinfra/kt:smoke")
    assert len(result.output.strip().splitlines()) == 1
    assert docker == []


@pytest.mark.parametrize("image", [{"id": "sha256:" + "a" * 64}, {}])
def test_manifest_of_this_image_or_without_an_id_is_taken(tmp_path, docker, image):
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps({**MANIFEST, "image": image}))
    result = CliRunner().invoke(
        app, ["image", "verify", "ktinfra/kt:smoke", "--manifest", str(path), "--json"]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["passed"] and len(docker) == 1
