"""images/scripts/cleanup.sh against kt_model_store's layout (roles/kt_model_store: data root /srv/ktinfra or
AutoDL's /root/autodl-tmp, token file /opt/ktinfra/etc/hf-token), run in a throwaway container of the local
base image as test_cleanup.py runs it: a base image made from a provisioned host carries that store."""

from __future__ import annotations

import os
import subprocess

import pytest

from ktinfra.image import REPO_ROOT

BASE = os.environ.get("KTINFRA_BASE_IMAGE", "ktinfra/debian12-systemd:latest")
SCRIPT = REPO_ROOT / "images" / "scripts" / "cleanup.sh"

WEIGHTS = [
    "/srv/ktinfra/models/Qwen3-30B-A3B/model-00001.safetensors",
    "/srv/ktinfra/cpu-weights/Qwen3-30B-A3B/layer0.kt",
    "/srv/ktinfra/gguf/Qwen3-30B-A3B/q4.gguf",
    "/srv/ktinfra/loras/adapter/adapter_model.safetensors",
    "/srv/ktinfra/hf-cache/hub/models--Qwen--Qwen3/blobs/abc",
    "/root/autodl-tmp/models/m/model.safetensors",
    "/root/autodl-tmp/cpu-weights/m/layer0.kt",
]
TOKENS = [
    "/opt/ktinfra/etc/hf-token",  # kt_model_store's HF_TOKEN_PATH
    "/srv/ktinfra/hf-cache/token",  # a login with HF_HOME set to the store's hf-cache
    "/root/autodl-tmp/hf-cache/stored_tokens",
]
LEFT = WEIGHTS + TOKENS
SEED = " && ".join(f"mkdir -p {os.path.dirname(p)} && echo secret > {p}" for p in LEFT)
REPORT = "for f in " + " ".join(LEFT) + '; do [ -s "$f" ] && echo "left: $f"; done; true'


def _run(keep: str = "") -> list[str]:
    proc = subprocess.run(
        ["docker", "run", "--rm", "--entrypoint", "/bin/sh", "-e", f"KTINFRA_KEEP={keep}",
         "-v", f"{SCRIPT}:/cleanup.sh:ro", BASE,
         "-c", f"{SEED} && sh /cleanup.sh >/dev/null && {REPORT}"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


@pytest.fixture(scope="module", autouse=True)
def _base_image():
    if subprocess.run(["docker", "image", "inspect", BASE], capture_output=True).returncode != 0:
        pytest.fail(f"base image {BASE} missing: `make docker-ready` builds it")


def test_the_model_stores_weights_and_tokens_do_not_ship():
    # before: only /models, /data/models, /opt/kt/models, /root/autodl-tmp/models and the home tokens
    assert _run() == []


def test_keeping_models_keeps_the_stores_weights_but_not_its_tokens():
    assert _run("models") == [f"left: {p}" for p in WEIGHTS]


def test_keeping_tokens_keeps_the_stores_token_file():
    assert _run("tokens") == ["left: /opt/ktinfra/etc/hf-token"]
