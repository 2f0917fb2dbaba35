"""Fresh-eyes review: `ktinfra image verify IMAGE --suite tests/infra/test_envs.py` (one file of the KT host
suite) ran it without the options verify fills from the manifest (--kt-role any, --kt-profile, the env
pythons): the host suite's defaults (role serve, profile kt-0.7, pythons looked up) then failed the checks of
a smoke or site image, read as a broken image. A file or folder inside tests/infra now gets them as the whole
suite does."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from ktinfra.cli import app
from ktinfra.image import verify

MANIFEST = {
    "image": {"id": "sha256:abc"},
    "profile": {"ref": "/x/smoke-profile.yaml", "name": "smoke"},
    "envs": {
        "kt-kernel": {"prefix": "/opt/kt/envs/kt-kernel", "python": "/opt/kt/envs/kt-kernel/bin/python"}
    },
}


@pytest.fixture
def runs(monkeypatch):
    """docker holding the image sha256:abc; the pytest command lines verify would run."""
    info = {"id": "sha256:abc", "size_bytes": 1, "tags": ["ktinfra/kt:smoke"], "labels": {}}
    monkeypatch.setattr(verify.dockercli, "ensure_daemon", lambda: None)
    monkeypatch.setattr(verify.dockercli, "image_info", lambda ref: info)
    monkeypatch.setattr(verify.dockercli, "run_detached", lambda *_: None)
    monkeypatch.setattr(verify.dockercli, "remove_container", lambda name: None)
    monkeypatch.setattr(verify, "wait_for_systemd", lambda name: "running")
    cmds: list[list[str]] = []

    def run_suite(cmd, env, timeout_s):
        cmds.append(cmd)
        return verify.SuiteRun(0, "1 passed\n", "")

    monkeypatch.setattr(verify, "run_suite", run_suite)
    return cmds


@pytest.mark.parametrize("part", ["test_envs.py", "probes", "."])
def test_part_of_the_host_suite_gets_the_manifest_options(tmp_path, runs, part):
    (tmp_path / "m.json").write_text(json.dumps(MANIFEST))
    suite = verify.HOST_SUITE / part
    args = [
        "image",
        "verify",
        "ktinfra/kt:smoke",
        "--manifest",
        str(tmp_path / "m.json"),
        "--suite",
        str(suite),
    ]
    result = CliRunner().invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    (cmd,) = runs
    assert cmd[cmd.index("--kt-role") + 1] == "any"
    assert cmd[cmd.index("--kt-profile") + 1] == "/x/smoke-profile.yaml"
    assert cmd[cmd.index("--kt-python") + 1] == "/opt/kt/envs/kt-kernel/bin/python"


def test_a_suite_outside_the_host_suite_gets_none(tmp_path, runs):
    (tmp_path / "m.json").write_text(json.dumps(MANIFEST))
    (tmp_path / "infra").mkdir()  # a folder of the same name elsewhere is not the host suite
    (tmp_path / "infra" / "test_x.py").write_text("def test_x():\n    pass\n")
    args = ["image", "verify", "ktinfra/kt:smoke", "--manifest", str(tmp_path / "m.json")]
    result = CliRunner().invoke(app, [*args, "--suite", str(tmp_path / "infra" / "test_x.py"), "--json"])
    assert result.exit_code == 0, result.output
    (cmd,) = runs
    assert "--kt-role" not in cmd and "--kt-profile" not in cmd
