"""images/scripts/cleanup.sh against kt_model_store's layout (roles/kt_model_store: data root /srv/ktinfra or
AutoDL's /root/autodl-tmp, token file /opt/ktinfra/etc/hf-token), run in a throwaway container of the local
base image as test_cleanup.py runs it: a base image made from a provisioned host carries that store."""

from __future__ import annotations

from test_cleanup import _base_image, left_after_cleanup  # noqa: F401 (_base_image: autouse fixture)

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


def test_the_model_stores_weights_and_tokens_do_not_ship():
    # before: only /models, /data/models, /opt/kt/models, /root/autodl-tmp/models and the home tokens
    assert left_after_cleanup(LEFT) == []


def test_keeping_models_keeps_the_stores_weights_but_not_its_tokens():
    assert left_after_cleanup(LEFT, "models") == [f"left: {p}" for p in WEIGHTS]


def test_keeping_tokens_keeps_the_stores_token_file():
    assert left_after_cleanup(LEFT, "tokens") == ["left: /opt/ktinfra/etc/hf-token"]
