"""kt_model_store's fetcher with a ModelScope model that has a folder (DeepSeek-V3's inference/, figures/).

modelscope 1.40's HubApi.get_model_files (modelscope_hub's compat layer, modelscope_hub 0.5) answers the
listing as [{"Path", "Size"}] for every entry of /api/v1/models/ID/repo/files, folders included, and no
longer passes on their "Type": "tree" (older modelscope returned the raw entries). The fetcher took such a
folder for a file to fetch and then refused, on every run, to mark the model complete ("1 listed file(s)
missing"). And modelscope's snapshot_download matches allow_patterns with fnmatch alone, where the fetcher
selects the listing as huggingface_hub does (a pattern ending in / is that folder's files).

The fetcher runs for real, as the role runs it, with the real modelscope client (the dev extra installs the
version kt_model_store installs on targets) against a ModelScope hub on loopback (mini_modelscope.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from mini_modelscope import MiniModelScope

FETCH = Path(__file__).resolve().parents[2] / "roles" / "kt_model_store" / "files" / "kt_store_fetch.py"
MARKER = ".ktinfra-complete.json"
MODEL = "deepseek-ai/ds"

REPO = {
    "config.json": b'{"model_type": "deepseek_v3"}',
    "model-00001-of-00001.safetensors": b"shard" * 50,
    "inference/model.py": b"print('ds')",
    "inference/configs/config_671B.json": b"{}",
}
INFERENCE = ["inference/configs/config_671B.json", "inference/model.py"]


@pytest.fixture
def hub():
    with MiniModelScope() as hub:
        hub.add(MODEL, REPO)
        yield hub


def fetch(hub: MiniModelScope, tmp: Path, dest: Path, *extra: str) -> tuple[int, dict]:
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp / "home"),
        "MODELSCOPE_CACHE": str(tmp / "ms-cache"),
        "MODELSCOPE_ENDPOINT": hub.url,
        "NO_PROXY": "127.0.0.1",
    }
    argv = [sys.executable, str(FETCH), "--name", "ds", "--source", "modelscope", "--repo", MODEL]
    proc = subprocess.run(
        [*argv, "--dest", str(dest), *extra], capture_output=True, text=True, env=env, timeout=60
    )
    assert proc.stdout.strip(), proc.stderr[-2000:]
    return proc.returncode, json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_hub_lists_folders_and_the_real_client_drops_their_type(hub, tmp_path, monkeypatch):
    """What the fetcher's folder handling rests on: the real client, not a stand-in, lists inference/ as an
    entry without a Type."""
    from modelscope.hub.api import HubApi

    monkeypatch.setenv("MODELSCOPE_ENDPOINT", hub.url)
    monkeypatch.setenv("HOME", str(tmp_path))
    entries = HubApi().get_model_files(MODEL, recursive=True)
    assert {"Path": "inference", "Size": 0} in entries
    assert {e["Path"] for e in entries} == {*REPO, "inference", "inference/configs"}


def test_a_modelscope_model_with_folders_is_fetched_and_marked_complete(hub, tmp_path):
    dest = tmp_path / "store" / "models" / "ds"
    rc, report = fetch(hub, tmp_path, dest)
    assert rc == 0 and report["complete"] is True, report
    assert report["files"] == len(REPO)
    marker = json.loads((dest / MARKER).read_text())
    assert sorted(marker["files"]) == sorted(REPO)
    assert {rel: (dest / rel).read_bytes() for rel in REPO} == REPO
    assert sorted(hub.files_sent()) == sorted(REPO)
    # and a re-run finds it complete without asking the hub
    asked = len(hub.requests)
    rc, report = fetch(hub, tmp_path, dest, "--check")
    assert (rc, report["complete"]) == (0, True)
    assert len(hub.requests) == asked


def test_allow_patterns_naming_a_folder_fetch_its_files_only(hub, tmp_path):
    """A GGUF repo's quant folder (unsloth's UD-Q2_K_XL/): the pattern matches the folder's entry as well."""
    dest = tmp_path / "store" / "gguf" / "ds"
    rc, report = fetch(hub, tmp_path, dest, "--allow-pattern=inference*")
    assert rc == 0 and report["complete"] is True, report
    marker = json.loads((dest / MARKER).read_text())
    assert sorted(marker["files"]) == INFERENCE
    assert sorted(hub.files_sent()) == INFERENCE


def test_a_folder_pattern_ending_in_a_slash_fetches_that_folder(hub, tmp_path):
    """allow_patterns ["inference/"]: huggingface_hub's matching (which selects the listing) takes it as the
    folder's files, modelscope's snapshot_download (fnmatch) as nothing."""
    dest = tmp_path / "store" / "gguf" / "ds"
    rc, report = fetch(hub, tmp_path, dest, "--allow-pattern=inference/")
    assert rc == 0 and report["complete"] is True, report
    marker = json.loads((dest / MARKER).read_text())
    assert sorted(marker["files"]) == INFERENCE
    assert {rel: (dest / rel).read_bytes() for rel in INFERENCE} == {rel: REPO[rel] for rel in INFERENCE}


def test_a_pattern_with_dot_star_fetches_only_what_it_selects(tmp_path):
    """modelscope also reads a pattern holding ".*" as a regex (".*" as "*"): "config.*" fetched
    configuration_deepseek.py as well, which the listing's selection (and the disk check) left out and the
    marker then recorded."""
    with MiniModelScope() as hub:
        hub.add(MODEL, {**REPO, "configuration_deepseek.py": b"class Config: pass"})
        dest = tmp_path / "store" / "models" / "ds"
        rc, report = fetch(hub, tmp_path, dest, "--allow-pattern=config.*")
        assert rc == 0 and report["complete"] is True, report
        assert sorted(json.loads((dest / MARKER).read_text())["files"]) == ["config.json"]
        assert hub.files_sent() == ["config.json"]
        assert sorted(p.name for p in dest.iterdir()) == [MARKER, "config.json"]
