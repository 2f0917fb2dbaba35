"""kt_model_store's fetcher with a ModelScope model that has a folder (DeepSeek-V3's inference/, figures/).

modelscope 1.40's HubApi.get_model_files (modelscope_hub's compat layer, modelscope_hub 0.5) answers the
listing as [{"Path", "Size"}] for every entry of /api/v1/models/ID/repo/files, folders included, and no
longer passes on their "Type": "tree" (older modelscope returned the raw entries). The fetcher took such a
folder for a file to fetch and then refused, on every run, to mark the model complete ("1 listed file(s)
missing").

No ModelScope server or client is in this environment: the stand-in `modelscope` package below answers the
listing exactly as modelscope 1.40.2 / modelscope_hub 0.5.1 do (checked against that client and a loopback
server answering its repo/files request) and its snapshot_download writes the repo's files as the real one
does. The fetcher itself runs for real, as the role runs it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

FETCH = Path(__file__).resolve().parents[2] / "roles" / "kt_model_store" / "files" / "kt_store_fetch.py"
MARKER = ".ktinfra-complete.json"

REPO = {
    "config.json": b'{"model_type": "deepseek_v3"}',
    "model-00001-of-00001.safetensors": b"shard" * 50,
    "inference/model.py": b"print('ds')",
    "inference/configs/config_671B.json": b"{}",
}

STAND_IN = """
import json, os
from pathlib import Path

REPO = {k: bytes.fromhex(v) for k, v in json.loads(os.environ["KT_TEST_MS_REPO"]).items()}


def _entries(typed):
    folders = sorted({rel.rsplit("/", i)[0] for rel in REPO for i in range(1, rel.count("/") + 1)})
    raw = [{"Path": f, "Type": "tree", "Size": 0} for f in folders]
    raw += [{"Path": rel, "Type": "blob", "Size": len(data)} for rel, data in sorted(REPO.items())]
    # modelscope_hub 0.5.1 compat/hub_api.py get_model_files:
    # [{"Path": f.path, "Size": f.size} for f in files]
    return raw if typed else [{"Path": e["Path"], "Size": e["Size"]} for e in raw]


class HubApi:
    def get_model_files(self, model_id, revision=None, root=None, recursive=True, **kwargs):
        return _entries(os.environ.get("KT_TEST_MS_TYPED") == "1")


def snapshot_download(model_id, revision=None, local_dir=None, allow_patterns=None, **kwargs):
    import fnmatch
    for rel, data in REPO.items():
        if allow_patterns and not any(fnmatch.fnmatch(rel, p) for p in allow_patterns):
            continue
        path = Path(local_dir) / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return local_dir
"""


def stand_in(tmp: Path) -> Path:
    site = tmp / "site"
    (site / "modelscope" / "hub").mkdir(parents=True)
    (site / "modelscope" / "__init__.py").write_text("from modelscope.hub.api import snapshot_download\n")
    (site / "modelscope" / "hub" / "__init__.py").write_text("")
    (site / "modelscope" / "hub" / "api.py").write_text(STAND_IN)
    return site


def fetch(tmp: Path, dest: Path, *extra: str, typed: bool = False) -> tuple[int, dict]:
    site = tmp / "site" if (tmp / "site").exists() else stand_in(tmp)
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(site),
        "KT_TEST_MS_REPO": json.dumps({k: v.hex() for k, v in REPO.items()}),
        "KT_TEST_MS_TYPED": "1" if typed else "0",
    }
    argv = [sys.executable, str(FETCH), "--name", "ds", "--source", "modelscope", "--repo", "deepseek-ai/ds"]
    proc = subprocess.run(
        [*argv, "--dest", str(dest), *extra], capture_output=True, text=True, env=env, timeout=60
    )
    assert proc.stdout.strip(), proc.stderr[-2000:]
    return proc.returncode, json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("typed", [False, True], ids=["modelscope-1.40-untyped-listing", "typed-listing"])
def test_a_modelscope_model_with_folders_is_fetched_and_marked_complete(tmp_path, typed):
    dest = tmp_path / "store" / "models" / "ds"
    rc, report = fetch(tmp_path, dest, typed=typed)
    assert rc == 0 and report["complete"] is True, report
    assert report["files"] == len(REPO)
    marker = json.loads((dest / MARKER).read_text())
    assert sorted(marker["files"]) == sorted(REPO)
    assert {rel: (dest / rel).read_bytes() for rel in REPO} == REPO
    # and a re-run finds it complete without fetching
    rc, report = fetch(tmp_path, dest, "--check", typed=typed)
    assert (rc, report["complete"]) == (0, True)


def test_allow_patterns_naming_a_folder_fetch_its_files_only(tmp_path):
    """A GGUF repo's quant folder (unsloth's UD-Q2_K_XL/): the pattern matches the folder's entry as well."""
    dest = tmp_path / "store" / "gguf" / "ds"
    rc, report = fetch(tmp_path, dest, "--allow-pattern=inference*")
    assert rc == 0 and report["complete"] is True, report
    marker = json.loads((dest / MARKER).read_text())
    assert sorted(marker["files"]) == ["inference/configs/config_671B.json", "inference/model.py"]


def test_a_folder_pattern_ending_in_a_slash_fetches_that_folder(tmp_path):
    """allow_patterns ["inference/"]: huggingface_hub's matching (which selects the listing) takes it as the
    folder's files, modelscope's (fnmatch, as the stand-in's snapshot_download) as nothing."""
    dest = tmp_path / "store" / "gguf" / "ds"
    rc, report = fetch(tmp_path, dest, "--allow-pattern=inference/")
    assert rc == 0 and report["complete"] is True, report
    marker = json.loads((dest / MARKER).read_text())
    assert sorted(marker["files"]) == ["inference/configs/config_671B.json", "inference/model.py"]
