"""kt_model_store's fetch step run by real ansible on localhost (-c local) into tmp_path; the fetcher's
interpreter is a stand-in that records the environment the role gives it."""

from __future__ import annotations

import json
import stat
import subprocess
from pathlib import Path

from role_play import interrupt_play, run_play, task_output

FETCHER = """#!/bin/sh
env | grep '^HF_' | sort > "$KT_TEST_FETCH_ENV"
echo '{"changed": false, "complete": true}'
"""


def store(tmp: Path, token: str) -> tuple[int, str]:
    venv_bin = tmp / "venv" / "bin"
    venv_bin.mkdir(parents=True, exist_ok=True)
    python = venv_bin / "python"
    python.write_text(FETCHER)
    python.chmod(python.stat().st_mode | stat.S_IXUSR)
    (tmp / "src").mkdir(exist_ok=True)
    extra = {
        "kt_model_store_root": str(tmp / "store"),
        "kt_model_store_prefix": str(tmp / "prefix"),
        "kt_model_store_tool_venv": str(tmp / "venv"),
        "kt_model_store_state_file": str(tmp / "store.json"),
        "kt_model_store_models": [{"name": "m", "source": "local", "repo": str(tmp / "src")}],
        "kt_model_store_hf_token": token,
    }
    tasks = [{"ansible.builtin.include_role": {"name": "kt_model_store"}}]
    return run_play(tmp, tasks, extra, env={"KT_TEST_FETCH_ENV": str(tmp / "fetch.env")})


def test_a_removed_token_is_removed_from_the_host(tmp_path):
    """Before: with kt_model_store_hf_token emptied, the old token stayed in etc/hf-token and HF_TOKEN_PATH
    still pointed the fetcher at it."""
    token_file = tmp_path / "prefix" / "etc" / "hf-token"
    rc, output = store(tmp_path, "hf_old_secret")
    assert rc == 0, output[-3000:]
    assert token_file.read_text() == "hf_old_secret" and stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert f"HF_TOKEN_PATH={token_file}" in (tmp_path / "fetch.env").read_text().splitlines()
    assert "hf_old_secret" not in output

    rc, output = store(tmp_path, "")
    assert rc == 0, output[-3000:]
    assert not token_file.exists()
    assert "HF_TOKEN_PATH" not in (tmp_path / "fetch.env").read_text()
    assert json.loads((tmp_path / "store.json").read_text())["models"]["m"]


def test_a_gguf_model_with_cpu_weights_is_refused_before_anything_is_fetched(tmp_path):
    """The argument spec takes kind: gguf with cpu_weights: int8. Before: the model was downloaded into
    gguf/NAME, then the converter looked for models/NAME (no *.safetensors there) and failed."""
    (tmp_path / "src").mkdir()
    gguf = {"name": "q", "source": "local", "repo": str(tmp_path / "src"), "kind": "gguf"}
    extra = {
        "kt_model_store_root": str(tmp_path / "store"),
        "kt_model_store_prefix": str(tmp_path / "prefix"),
        "kt_model_store_tool_venv": str(tmp_path / "venv"),
        "kt_model_store_state_file": str(tmp_path / "store.json"),
        "kt_model_store_models": [gguf | {"cpu_weights": "int8"}],
    }
    rc, output = run_play(tmp_path, [{"ansible.builtin.include_role": {"name": "kt_model_store"}}], extra)
    assert rc != 0
    message = "kt_model_store_models: q: kind gguf is served from its .gguf files as they are"
    assert message in output, output[-3000:]
    assert not (tmp_path / "store").exists() and not (tmp_path / "prefix").exists()


def test_a_fetch_venv_cut_off_while_it_was_created_is_created_again(tmp_path):
    """Ctrl-C while the fetcher's venv was created left bin/python without pip or activate. Before: `creates:
    bin/python` kept that venv, and every re-run failed installing the hub client (the pip module, finding
    no venv there, wanted `virtualenv`: "Failed to find required executable")."""
    venv = tmp_path / "venv"
    extra = {
        "kt_model_store_root": str(tmp_path / "store"),
        "kt_model_store_prefix": str(tmp_path / "prefix"),
        "kt_model_store_tool_venv": str(venv),
        "kt_model_store_state_file": str(tmp_path / "store.json"),
        "kt_model_store_models": [{"name": "m", "source": "hf", "repo": "org/m"}],
        "kt_model_store_hf_endpoint": "http://127.0.0.1:9",  # no hub: the fetch fails, after the install
    }
    tasks = [{"ansible.builtin.include_role": {"name": "kt_model_store"}}]
    rc, output = interrupt_play(tmp_path, tasks, extra, venv / "bin" / "python")
    assert rc != 0 and (venv / "bin" / "python").exists() and not (venv / "bin" / "pip").exists(), output[
        -3000:
    ]
    rc, output = run_play(tmp_path, tasks, extra)
    assert "changed:" in task_output(output, "Install hub clients"), output[-3000:]
    assert rc != 0 and "FAILED" in task_output(output, "Fetch models into the store"), output[-3000:]
    subprocess.run([venv / "bin" / "python", "-c", "import huggingface_hub"], check=True)
    assert not (tmp_path / "store" / "models" / "m" / ".ktinfra-complete.json").exists()
