"""How `ktinfra image verify` points the testinfra suites at a build (no container needed here)."""

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
        "kt-kernel": {"prefix": "/opt/kt/envs/kt-kernel", "python": "/opt/kt/envs/kt-kernel/bin/python"},
        "kt-sft": {"prefix": "/opt/kt/envs/kt-sft", "python": "/opt/kt/envs/kt-sft/bin/python"},
    },
}


def test_host_suite_gets_profile_and_env_pythons():
    args = verify.suite_args(verify.HOST_SUITE, MANIFEST, "any")
    assert args == [
        "--kt-role",
        "any",
        "--kt-profile",
        "/x/smoke-profile.yaml",
        "--kt-python",
        "/opt/kt/envs/kt-kernel/bin/python",
        "--kt-sft-python",
        "/opt/kt/envs/kt-sft/bin/python",
    ]


def test_host_suite_options_follow_the_env_roles_not_their_names():
    # a site profile may name its envs as it likes: the inference env named "serve" is --kt-python
    named = {
        **MANIFEST,
        "envs": {
            "train": {
                "role": "sft",
                "prefix": "/opt/kt/envs/train",
                "python": "/opt/kt/envs/train/bin/python",
            },
            "serve": {
                "role": "inference",
                "prefix": "/opt/kt/envs/serve",
                "python": "/opt/kt/envs/serve/bin/python",
            },
        },
    }
    args = verify.suite_args(verify.HOST_SUITE, named, "any")
    assert args[args.index("--kt-python") + 1] == "/opt/kt/envs/serve/bin/python"
    assert args[args.index("--kt-sft-python") + 1] == "/opt/kt/envs/train/bin/python"


def test_image_checks_take_no_host_options():
    assert verify.suite_args(verify.IMAGE_SUITE, MANIFEST, "any") == []
    assert verify.suite_args(verify.HOST_SUITE, None, "any") == []


def test_manifest_found_by_image_id(tmp_path):
    (tmp_path / "a-docker").mkdir()
    (tmp_path / "a-docker" / "manifest.json").write_text(json.dumps(MANIFEST))
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "manifest.json").write_text("{")
    assert verify.find_manifest("sha256:abc", tmp_path) == tmp_path / "a-docker" / "manifest.json"
    assert verify.find_manifest("sha256:other", tmp_path) is None


def test_corrupt_manifests_passed_over_when_looking_up(tmp_path):
    for name, text in (("a", "[]"), ("b", '{"image": []}'), ("c", '{"image": {"id": 1}}')):
        (tmp_path / name).mkdir()
        (tmp_path / name / "manifest.json").write_text(text)
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "manifest.json").write_text(json.dumps(MANIFEST))
    assert verify.find_manifest("sha256:abc", tmp_path) == tmp_path / "d" / "manifest.json"


@pytest.fixture
def no_docker(monkeypatch):
    """verify must refuse a bad --manifest before docker is asked anything."""

    def docker(*_, **__):
        raise AssertionError("docker was called")

    for name in ("ensure_daemon", "image_info", "run_detached"):
        monkeypatch.setattr(verify.dockercli, name, docker)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (None, "does not exist"),
        ("{", "is not valid JSON"),
        ("[1]", "is not a JSON object"),
        (json.dumps({**MANIFEST, "envs": {"kt": {"prefix": "/p"}}}), "envs.kt.python is missing"),
        (json.dumps({**MANIFEST, "profile": "smoke"}), "profile is not an object"),
    ],
)
def test_bad_manifest_refused_before_docker(tmp_path, no_docker, text, message):
    path = tmp_path / "manifest.json"
    if text is not None:
        path.write_text(text)
    result = CliRunner().invoke(app, ["image", "verify", "ktinfra/kt:smoke", "--manifest", str(path)])
    assert result.exit_code == 1
    assert isinstance(result.exception, SystemExit)
    assert result.output.startswith(f"error: manifest {path}") and message in result.output
    assert len(result.output.strip().splitlines()) == 1


@pytest.fixture
def docker_with_image(monkeypatch):
    """docker holding the image sha256:abc; the containers started are recorded (returned)."""
    started: list[str] = []
    info = {"id": "sha256:abc", "size_bytes": 1, "tags": ["ktinfra/kt:smoke"], "labels": {}, "created": "x"}
    monkeypatch.setattr(verify.dockercli, "ensure_daemon", lambda: None)
    monkeypatch.setattr(verify.dockercli, "image_info", lambda ref: info)
    monkeypatch.setattr(verify.dockercli, "run_detached", lambda image, name, args: started.append(name))
    monkeypatch.setattr(verify.dockercli, "remove_container", lambda name: None)
    monkeypatch.setattr(verify, "wait_for_systemd", lambda name: "running")
    return started


def test_image_without_a_manifest_is_refused_before_a_container_starts(tmp_path, docker_with_image):
    """Before: verify ran every suite with KTINFRA_IMAGE_MANIFEST empty, every check failed (exit 1)."""
    result = CliRunner().invoke(app, ["image", "verify", "ktinfra/kt:smoke", "--out", str(tmp_path)])
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
    text = " ".join(result.output.split())
    assert text.startswith(f"error: no build manifest of ktinfra/kt:smoke (sha256:abc) under {tmp_path}")
    assert "pass --out with the build's --out, or --manifest PATH" in text
    assert len(result.output.strip().splitlines()) == 1
    assert docker_with_image == []


def test_manifest_found_under_the_out_of_the_build(tmp_path, docker_with_image, monkeypatch):
    (tmp_path / "smoke-docker").mkdir()
    (tmp_path / "smoke-docker" / "manifest.json").write_text(json.dumps(MANIFEST))
    runs = []

    def pytest_run(cmd, env, timeout_s):
        runs.append((cmd, env["KTINFRA_IMAGE_MANIFEST"]))
        return verify.SuiteRun(0, "1 passed\n", "")

    monkeypatch.setattr(verify, "run_suite", pytest_run)
    result = CliRunner().invoke(
        app, ["image", "verify", "ktinfra/kt:smoke", "--out", str(tmp_path), "--json"]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["manifest"] == str(tmp_path / "smoke-docker" / "manifest.json")
    assert runs and all(env == str(tmp_path / "smoke-docker" / "manifest.json") for _, env in runs)
    host = next(cmd for cmd, _ in runs if str(verify.HOST_SUITE) in cmd)
    assert host[host.index("--kt-profile") + 1] == "/x/smoke-profile.yaml"


def test_manifest_help_says_where_it_is_looked_up():
    result = CliRunner().invoke(app, ["image", "verify", "--help"])
    shown = " ".join(result.stdout.replace("│", " ").split())
    assert "labels" not in shown and "--out" in shown


def test_relative_suite_and_manifest_are_found_by_the_pytest_verify_runs(
    tmp_path, docker_with_image, monkeypatch
):
    """Before: pytest ran in the checkout with the caller's relative paths: "file or directory not found"
    (exit 4), read as a failed image. The suite here is real and runs in a real pytest; it checks the
    manifest path it is handed."""
    (tmp_path / "mysuite").mkdir()
    (tmp_path / "mysuite" / "test_x.py").write_text(
        "import json, os\n\n\ndef test_manifest_is_readable():\n"
        "    assert json.load(open(os.environ['KTINFRA_IMAGE_MANIFEST']))['profile']\n"
    )
    (tmp_path / "m.json").write_text(json.dumps(MANIFEST))
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(
        app,
        [
            "image",
            "verify",
            "ktinfra/kt:smoke",
            "--manifest",
            "m.json",
            "--suite",
            "mysuite/test_x.py",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["manifest"] == str(tmp_path / "m.json")
    assert [r["rc"] for r in doc["suites"]] == [0] and doc["passed"], doc
