"""kt_model_store's fetcher with the real huggingface_hub client against a hub on loopback (mini_hub.py):
the model folder holds exactly the requested revision's files, and a listing that fails changes nothing."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
from mini_hub import MiniHub

FETCH = Path(__file__).resolve().parents[2] / "roles" / "kt_model_store" / "files" / "kt_store_fetch.py"
MARKER = ".ktinfra-complete.json"

# two revisions of one repo, sharded differently (as Qwen3's -2507 re-uploads were): v1's second shard has no
# counterpart in v2, and kt-kernel's converter would load it beside v2's shard
V1 = {
    "config.json": b'{"model_type": "qwen3_moe", "rev": 1}',
    "model.safetensors.index.json": b'{"weight_map": {"a": "model-00001-of-00002.safetensors"}}',
    "model-00001-of-00002.safetensors": b"v1-shard-1" * 100,
    "model-00002-of-00002.safetensors": b"v1-shard-2" * 100,
}
V2 = {
    "config.json": b'{"model_type": "qwen3_moe", "rev": 2}',
    "model.safetensors.index.json": b'{"weight_map": {"a": "model-00001-of-00001.safetensors"}}',
    "model-00001-of-00001.safetensors": b"v2-only-shard" * 100,
}


def fetch(hub: MiniHub, dest: Path, *extra: str, token: str | None = None) -> tuple[int, dict]:
    token_file = dest.parent.parent / "hf-token"
    token_file.unlink(missing_ok=True)
    if token:
        token_file.write_text(token)
    env = {
        "PATH": "/usr/bin:/bin",
        "HF_ENDPOINT": hub.url,
        "HF_HOME": str(dest.parent.parent / "hf-cache"),
        "HF_TOKEN_PATH": str(token_file),  # as the role passes it; a missing file is no token
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "HF_HUB_ETAG_TIMEOUT": "5",
    }
    argv = [sys.executable, str(FETCH), "--name", "m", "--source", "hf", "--repo", "org/m"]
    argv += ["--dest", str(dest)]
    proc = subprocess.run([*argv, *extra], capture_output=True, text=True, env=env, timeout=120)
    assert proc.stdout.strip(), proc.stderr[-2000:]
    return proc.returncode, json.loads(proc.stdout.strip().splitlines()[-1])


def files_in(dest: Path) -> dict[str, bytes]:
    return {
        p.relative_to(dest).as_posix(): p.read_bytes()
        for p in dest.rglob("*")
        if p.is_file() and not p.relative_to(dest).as_posix().startswith(".")
    }


def test_another_revision_replaces_the_old_revisions_files(tmp_path):
    """Before: v1's two shards stayed beside v2's one and in the marker's file list."""
    dest = tmp_path / "models" / "m"
    with MiniHub() as hub:
        hub.commit("org/m", V1, "v1")
        v2 = hub.commit("org/m", V2, "v2", "main")
        rc, out = fetch(hub, dest, "--revision", "v1")
        assert (rc, out["complete"], out["files"]) == (0, True, 4), out
        assert files_in(dest) == V1

        rc, out = fetch(hub, dest, "--revision", "v2")
        assert (rc, out["changed"], out["complete"]) == (0, True, True), out
        assert out["removed"] == ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
        assert files_in(dest) == V2
        marker = json.loads((dest / MARKER).read_text())
        assert set(marker["files"]) == set(V2) and marker["request"]["revision"] == "v2"
        assert marker["commit"] == v2  # the commit the tag named when it was fetched
        assert sorted(p.name for p in dest.glob("*.safetensors")) == ["model-00001-of-00001.safetensors"]
        records = dest / ".cache" / "huggingface" / "download"
        assert not (records / "model-00002-of-00002.safetensors.metadata").exists()


@pytest.fixture
def v2_fetched(tmp_path):
    """A hub whose main is V2, fetched whole into models/m; the hub's request log starts empty."""
    dest = tmp_path / "models" / "m"
    with MiniHub() as hub:
        hub.commit("org/m", V2, "main")
        assert fetch(hub, dest)[0] == 0
        hub.requests.clear()
        yield hub, dest


def test_a_complete_model_asks_the_hub_nothing(v2_fetched):
    hub, dest = v2_fetched
    rc, out = fetch(hub, dest)
    assert (rc, out["changed"], out["complete"]) == (0, False, True)
    assert hub.requests == []


def test_narrower_allow_patterns_remove_what_they_leave_out(v2_fetched):
    hub, dest = v2_fetched
    rc, out = fetch(hub, dest, "--allow-pattern", "*.json")
    assert (rc, out["complete"]) == (0, True), out
    assert files_in(dest) == {k: v for k, v in V2.items() if k.endswith(".json")}
    marker = json.loads((dest / MARKER).read_text())
    assert set(marker["files"]) == {"config.json", "model.safetensors.index.json"}
    assert not [path for path in hub.files_sent() if path.endswith(".safetensors")]


def test_a_listing_that_fails_or_selects_nothing_leaves_the_model_as_it_was(tmp_path):
    """Before: the marker was removed first, so a mistyped revision or pattern left a whole model marked
    incomplete; the hub's answer now comes before anything in the folder changes."""
    dest = tmp_path / "models" / "m"
    with MiniHub() as hub:
        hub.commit("org/m", V1, "v1")
        assert fetch(hub, dest, "--revision", "v1")[0] == 0
        before = (dest / MARKER).read_bytes()

        rc, out = fetch(hub, dest, "--revision", "v9")
        assert (rc, out["changed"], out["complete"]) == (1, False, False) and "v9" in out["error"], out
        rc, out = fetch(hub, dest, "--revision", "v1", "--allow-pattern", "*.gguf")
        assert (rc, out["changed"]) == (1, False) and "nothing to fetch" in out["error"], out
        assert "allow_patterns ['*.gguf']" in out["error"]
        assert files_in(dest) == V1 and (dest / MARKER).read_bytes() == before


def test_a_gated_repo_is_fetched_with_the_token_file_and_refused_without(tmp_path):
    dest = tmp_path / "models" / "m"
    with MiniHub(token="hf_gated_secret") as hub:
        hub.commit("org/m", V2, "main")
        rc, out = fetch(hub, dest)
        assert (rc, out["changed"]) == (1, False) and "401" in out["error"], out
        assert not dest.exists()

        hub.requests.clear()
        rc, out = fetch(hub, dest, token="hf_gated_secret")
        assert (rc, out["complete"]) == (0, True), out
        assert files_in(dest) == V2
        hub_calls = [r for r in hub.requests if not r[1].startswith("/api/agent")]  # 2.x's harness probe
        assert hub_calls and {auth for _, _, auth in hub_calls} == {"Bearer hf_gated_secret"}
        assert "hf_gated_secret" not in json.dumps(out)


def test_a_listed_file_the_hub_does_not_serve_fails_the_fetch(tmp_path):
    """A listing out of step with the hub's storage: the client's 404 fails the fetch, and the model is not
    marked complete without that shard (the fetcher also compares the folder with the listing before it
    writes the marker, for a client that would skip a file silently)."""
    dest = tmp_path / "models" / "m"
    with MiniHub() as hub:
        hub.commit("org/m", V2, "main")
        hub.unserved.add("model-00001-of-00001.safetensors")
        rc, out = fetch(hub, dest)
        assert (rc, out["complete"]) == (1, False), out
        assert "model-00001-of-00001.safetensors" in out["error"]
        assert not (dest / MARKER).exists()


def test_the_marker_is_written_only_when_every_listed_file_is_there(tmp_path):
    """For a hub client that would skip a listed file without an error: the folder is compared with the
    listing before the marker is written."""
    spec = importlib.util.spec_from_file_location("kt_store_fetch", FETCH)
    fetcher = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fetcher)
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(RuntimeError, match=r"1 listed file\(s\) missing.*model.safetensors"):
        fetcher.write_marker(tmp_path, "m", {}, {"config.json", "model.safetensors"}, "abc", None)
    assert not (tmp_path / MARKER).exists()
    marker = fetcher.write_marker(tmp_path, "m", {}, {"config.json"}, "abc", None)
    assert marker["commit"] == "abc" and json.loads((tmp_path / MARKER).read_text()) == marker
