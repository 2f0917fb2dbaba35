"""kt_model_store's fetcher against the real huggingface_hub client and a hub on loopback (mini_hub.py): a
download cut off in a file the next request no longer wants, and a model larger than the disk."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import time

from huggingface_hub._local_folder import get_local_download_paths
from mini_hub import MiniHub
from test_store_hub_fetch import FETCH, MARKER, V1, V2, fetch, files_in

CUT_SHARD = "model-00002-of-00002.safetensors"


def fetch_command(hub: MiniHub, dest) -> tuple[list[str], dict]:
    """fetch()'s command and environment (test_store_hub_fetch.py), for a run the test kills."""
    env = {
        "PATH": "/usr/bin:/bin",
        "HF_ENDPOINT": hub.url,
        "HF_HOME": str(dest.parent.parent / "hf-cache"),
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "HF_HUB_ETAG_TIMEOUT": "5",
    }
    argv = [sys.executable, str(FETCH), "--name", "m", "--source", "hf", "--repo", "org/m"]
    return [*argv, "--dest", str(dest)], env


def cut_name(dest, name: str, data: bytes) -> str:
    """The part of huggingface_hub's partial file name that names the file and its ETag."""
    return get_local_download_paths(dest, name).incomplete_path(hashlib.sha1(data).hexdigest()).stem


def cut_off(dest, name: str, data: bytes) -> os.PathLike:
    """What huggingface_hub leaves of a download into local_dir killed in `name`: a third of its bytes under
    the name it resumes from (the hub's ETag of that file)."""
    dest.mkdir(parents=True, exist_ok=True)
    partial = get_local_download_paths(dest, name).incomplete_path(hashlib.sha1(data).hexdigest())
    partial.write_bytes(data[: len(data) // 3])
    return partial


def test_a_cut_off_download_of_a_file_no_longer_wanted_does_not_block_the_model(tmp_path):
    """v1 was being fetched when the run was cut off (Ctrl-C, a dropped SSH session) in its second shard; the
    user then asked for v2, which has no such shard. Before: every later run fetched v2 whole and then failed
    "partial files left after fetch, not marking complete" on v1's partial shard, which nothing resumes."""
    dest = tmp_path / "models" / "m"
    with MiniHub() as hub:
        hub.commit("org/m", V1, "v1")
        hub.commit("org/m", V2, "v2", "main")
        partial = cut_off(dest, CUT_SHARD, V1[CUT_SHARD])
        rc, out = fetch(hub, dest, "--revision", "v2")
        assert (rc, out["complete"]) == (0, True), out
        assert files_in(dest) == V2 and (dest / MARKER).is_file()
        assert not partial.exists()
        assert fetch(hub, dest, "--revision", "v2")[1]["changed"] is False


def test_a_cut_off_download_of_a_file_the_branch_since_changed_does_not_block_the_model(tmp_path):
    """The same file at a newer commit of main (another ETag): the old partial bytes are never resumed."""
    dest = tmp_path / "models" / "m"
    with MiniHub() as hub:
        hub.commit("org/m", V1, "main")
        partial = cut_off(dest, CUT_SHARD, V1[CUT_SHARD])
        newer = dict(V1) | {CUT_SHARD: b"re-uploaded" * 100}
        hub.commit("org/m", newer, "main")
        rc, out = fetch(hub, dest)
        assert (rc, out["complete"]) == (0, True), out
        assert files_in(dest) == newer and not partial.exists()


class StallHub(MiniHub):
    """Sends the first third of `stalled`, then holds the connection open (a download in progress)."""

    stalled = CUT_SHARD

    def _handler(self):
        base = super()._handler()
        stalled = self.stalled

        class Handler(base):
            def _send(self, status: int, data: bytes, headers=None, body: bool = True) -> None:
                if not (body and self.command == "GET" and self.path.endswith("/" + stalled)):
                    return super()._send(status, data, headers, body)
                self.send_response(status)
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data[: len(data) // 3])
                self.wfile.flush()
                time.sleep(30)

        return Handler


def test_a_download_killed_mid_file_does_not_block_the_model(tmp_path):
    """The fetch was killed (SIGKILL: Ansible's async timeout, the OOM killer, the host went down) while a
    shard arrived. huggingface_hub 2.x writes each download to a name of its own (<hash>.<etag>.<uuid>
    .incomplete) and starts a file cut off from zero on the next run, so that partial file stays. Before:
    every later run fetched the model whole and failed "partial files left after fetch", for good."""
    dest = tmp_path / "models" / "m"
    with StallHub() as hub:
        hub.commit("org/m", V1, "main")
        argv, env = fetch_command(hub, dest)
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        download = dest / ".cache" / "huggingface" / "download"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not list(download.glob("*.incomplete")):
            time.sleep(0.05)
        time.sleep(0.5)  # the first third is on its way (the client writes it when its buffer fills)
        proc.kill()
        proc.wait()
        [partial] = download.glob("*.incomplete")  # the name is this download's own
        assert partial.name.startswith(cut_name(dest, CUT_SHARD, V1[CUT_SHARD])), partial.name
    with MiniHub() as hub:  # the same commit, served whole
        hub.commit("org/m", V1, "main")
        rc, out = fetch(hub, dest)
        assert (rc, out["complete"]) == (0, True), out
        assert files_in(dest) == V1 and not partial.exists()


class HugeHub(MiniHub):
    """The hub's listing gives `huge` a size of 8 TiB (a 671B model on a small data disk); its bytes are
    the few the commit holds."""

    huge = "model-00001-of-00001.safetensors"

    def _handler(self):
        base = super()._handler()
        huge = self.huge

        class Handler(base):
            def _json(self, value, body: bool) -> None:
                if isinstance(value, list):
                    value = [e | ({"size": 1 << 43} if e.get("path") == huge else {}) for e in value]
                super()._json(value, body)

        return Handler


def test_a_model_larger_than_the_free_disk_is_refused_before_anything_changes(tmp_path):
    """Before: the listing's sizes were not read; the download ran for hours until the disk filled (ENOSPC),
    after the complete model there (v1) had lost its marker and its files."""
    dest = tmp_path / "models" / "m"
    with HugeHub() as hub:
        hub.commit("org/m", V1, "v1")
        hub.commit("org/m", V2, "main")
        assert fetch(hub, dest, "--revision", "v1")[0] == 0
        marker = (dest / MARKER).read_bytes()
        hub.requests.clear()
        rc, out = fetch(hub, dest)
        assert (rc, out["changed"], out["complete"]) == (1, False, False), out
        assert out["error"].startswith("needs 8192.0 GiB free under ") and "larger disk" in out["error"], out
        assert files_in(dest) == V1 and (dest / MARKER).read_bytes() == marker
        assert hub.files_sent() == []
        # the model fits where the huge file is left out
        rc, out = fetch(hub, dest, "--allow-pattern", "*.json")
        assert (rc, out["complete"]) == (0, True), out


def load_fetcher():
    spec = importlib.util.spec_from_file_location("kt_store_fetch", FETCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_space_check_counts_files_already_whole_and_files_to_be_removed(tmp_path):
    fetcher = load_fetcher()
    dest = tmp_path / "m"
    dest.mkdir()
    free = __import__("shutil").disk_usage(tmp_path).free
    (dest / "whole.bin").write_bytes(b"x" * 10)
    assert fetcher.space_problem(dest, {"whole.bin": 10, "new.bin": free // 2}) is None
    assert fetcher.space_problem(dest, {"whole.bin": 10, "new.bin": free * 2}).startswith("needs ")
    # a file of the wrong size there is fetched again: it counts whole
    assert fetcher.space_problem(dest, {"whole.bin": free * 2}).startswith("needs ")
    # not created yet: the nearest directory that exists is asked
    assert fetcher.space_problem(tmp_path / "a" / "b", {"x": free * 2}).startswith("needs ")
    assert fetcher.space_problem(tmp_path / "a" / "b", {"x": 1}) is None
    assert fetcher.space_problem(dest, None) is None  # a listing without sizes: not checked
    # files the fetch removes first (sparse: they take no blocks, yet count as freed by their size)
    with open(dest / "old.bin", "wb") as handle:
        handle.truncate(free * 2)
    assert fetcher.space_problem(dest, {"new.bin": free * 2}) is None
    assert json.dumps(fetcher.space_problem(dest, {"new.bin": free * 4})).count("would remove") == 1
