"""How `ktinfra image verify` points the testinfra suites at a build (no container needed here)."""

from __future__ import annotations

import json

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
