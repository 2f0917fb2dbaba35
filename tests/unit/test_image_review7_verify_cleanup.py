"""image verify's container removal never takes the place of verify's own error.

Since 14b5d35 dockercli.remove_container raises when `docker rm -f` fails. verify called it in a `finally`,
so a failed removal after systemd never came up (or after Ctrl-C / SIGTERM) replaced that error, or the
130/143 exit, with the removal's. docker is the test's stand-in here, as in test_image_verify: the daemon's
failure to remove a container cannot be made on purpose."""

from __future__ import annotations

import json

import pytest
from test_image_verify import MANIFEST

from ktinfra.image import ImageError, verify


@pytest.fixture
def stuck_container(monkeypatch, tmp_path):
    """A container that starts, and that docker then cannot remove."""
    info = {"id": "sha256:abc", "size_bytes": 1, "tags": ["ktinfra/kt:smoke"], "labels": {}, "created": "x"}
    monkeypatch.setattr(verify.dockercli, "ensure_daemon", lambda: None)
    monkeypatch.setattr(verify.dockercli, "image_info", lambda ref: info)
    monkeypatch.setattr(verify.dockercli, "run_detached", lambda image, name, args: None)

    def cannot_remove(name):
        raise ImageError(f"docker container {name} could not be removed (device busy); it is left")

    monkeypatch.setattr(verify.dockercli, "remove_container", cannot_remove)
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps(MANIFEST))
    return manifest


def test_systemds_failure_is_the_error_and_the_left_container_a_warning(monkeypatch, stuck_container):
    def no_systemd(name):
        raise ImageError("systemd in it did not come up in 90 s (state: starting)")

    monkeypatch.setattr(verify, "wait_for_systemd", no_systemd)
    said: list[str] = []
    with pytest.raises(ImageError, match="systemd in it did not come up"):
        verify.verify("ktinfra/kt:smoke", manifest=stuck_container, on_line=said.append)
    assert any(line.startswith("warning: docker container image-verify-") for line in said), said


def test_a_sigterm_exit_stays_143(monkeypatch, stuck_container):
    def terminated(name):
        raise SystemExit(143)

    monkeypatch.setattr(verify, "wait_for_systemd", terminated)
    with pytest.raises(SystemExit) as stopped:
        verify.verify("ktinfra/kt:smoke", manifest=stuck_container, on_line=lambda line: None)
    assert stopped.value.code == 143


def test_a_container_left_after_passing_suites_fails_verify(monkeypatch, stuck_container):
    monkeypatch.setattr(verify, "wait_for_systemd", lambda name: "running")
    monkeypatch.setattr(verify, "run_suite", lambda cmd, env, timeout_s: verify.SuiteRun(0, "1 passed\n", ""))
    with pytest.raises(ImageError, match="could not be removed"):
        verify.verify("ktinfra/kt:smoke", manifest=stuck_container)
