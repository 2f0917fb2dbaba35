"""kt_model_store's fetch step run by real ansible on localhost (-c local) into tmp_path; the fetcher's
interpreter is a stand-in that records the environment the role gives it."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from mini_hub import MiniHub
from role_play import PREFLIGHT, interrupt_play, run_play, task_output
from test_store_hub_fetch import V1, V2

FETCHER = """#!/bin/sh
case "$*" in *--check*) echo '{"changed": false, "complete": false}'; exit 3;; esac
env | grep '^HF_' | sort > "$KT_TEST_FETCH_ENV"
echo '{"changed": false, "complete": true}'
"""


# stands in for kt-kernel's convert_cpu_weights.py (it needs kt-kernel and an AVX-512/AMX CPU): its output is
# the bytes of the input's safetensors, so a test sees which model a conversion was made from
CONVERTER = """import argparse, pathlib
p = argparse.ArgumentParser()
for a in ('--input-path', '--input-type', '--output', '--quant-method'): p.add_argument(a)
a = p.parse_args(); out = pathlib.Path(a.output); out.mkdir(parents=True)
shards = sorted(pathlib.Path(a.input_path).glob('*.safetensors'))
(out / 'experts.bin').write_bytes(b''.join(f.read_bytes() for f in shards))
"""
MARKER = ".ktinfra-complete.json"
TASKS = [{"ansible.builtin.include_role": {"name": "kt_model_store"}}]


def role_vars(tmp: Path, models: list[dict], **more) -> dict:
    """The role's variables with every path under tmp (and kt_preflight's facts)."""
    paths = {
        "kt_model_store_root": str(tmp / "store"),
        "kt_model_store_prefix": str(tmp / "prefix"),
        "kt_model_store_tool_venv": str(tmp / "venv"),
        "kt_model_store_state_file": str(tmp / "store.json"),
        "kt_model_store_models": models,
    }
    return PREFLIGHT | paths | more


def fetcher_python(tmp: Path, script: str) -> None:
    """The fetcher venv's bin/python, a stand-in the role takes as a whole venv (the probe exits 0)."""
    python = tmp / "venv" / "bin" / "python"
    python.parent.mkdir(parents=True, exist_ok=True)
    python.write_text(script)
    python.chmod(python.stat().st_mode | stat.S_IXUSR)


def converting(tmp: Path, repo: Path, **more) -> dict:
    """A local model with cpu_weights int4 (a merged output, one file: int8 is a layer tree with a manifest,
    see test_kt_store_int8.py), fetched by the real fetcher (run by this test's python, no venv to make) and
    converted by the stand-in CONVERTER."""
    fetcher_python(tmp, f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    script = tmp / "conv" / "convert_cpu_weights.py"
    if not script.exists():
        script.parent.mkdir(parents=True)
        script.write_text(CONVERTER)
    model = {"name": "m", "source": "local", "repo": str(repo), "cpu_weights": "int4"}
    convert = {"kt_model_store_convert_python": sys.executable, "kt_model_store_convert_script": str(script)}
    convert |= {f"kt_model_store_convert_{k}": 0 for k in ("min_shm_bytes", "threads", "threadpools")}
    return role_vars(tmp, [model], **convert, kt_model_store_convert_poll=1) | more


def source(tmp: Path, name: str, weights: bytes, **more: bytes) -> Path:
    """A model directory with a config.json and one safetensors file (and `more` files)."""
    d = tmp / name
    d.mkdir()
    (d / "config.json").write_text("{}")
    (d / "model.safetensors").write_bytes(weights)
    for file, content in more.items():
        (d / file).write_bytes(content)
    return d


def store(tmp: Path, token: str) -> tuple[int, str]:
    fetcher_python(tmp, FETCHER)
    (tmp / "src").mkdir(exist_ok=True)
    models = [{"name": "m", "source": "local", "repo": str(tmp / "src")}]
    extra = role_vars(tmp, models, kt_model_store_hf_token=token)
    return run_play(tmp, TASKS, extra, env={"KT_TEST_FETCH_ENV": str(tmp / "fetch.env")})


@pytest.mark.slow
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
    rc, output = run_play(tmp_path, TASKS, role_vars(tmp_path, [gguf | {"cpu_weights": "int8"}]))
    assert rc != 0
    message = "kt_model_store_models: q: kind gguf is served from its .gguf files as they are"
    assert message in output, output[-3000:]
    assert not (tmp_path / "store").exists() and not (tmp_path / "prefix").exists()


@pytest.mark.slow
def test_a_fetch_venv_cut_off_while_it_was_created_is_created_again(tmp_path):
    """Ctrl-C while the fetcher's venv was created left bin/python without pip or activate. Before: `creates:
    bin/python` kept that venv, and every re-run failed installing the hub client (the pip module, finding
    no venv there, wanted `virtualenv`: "Failed to find required executable")."""
    venv = tmp_path / "venv"
    models = [{"name": "m", "source": "hf", "repo": "org/m"}]
    # no hub: the fetch fails, after the install
    extra = role_vars(tmp_path, models, kt_model_store_hf_endpoint="http://127.0.0.1:9")
    tasks = TASKS
    rc, output = interrupt_play(tmp_path, tasks, extra, venv / "bin" / "python")
    assert rc != 0 and (venv / "bin" / "python").exists() and not (venv / "bin" / "pip").exists(), output[
        -3000:
    ]
    rc, output = run_play(tmp_path, tasks, extra)
    assert "changed:" in task_output(output, "Install hub clients"), output[-3000:]
    assert rc != 0 and "FAILED" in task_output(output, "Fetch models into the store"), output[-3000:]
    subprocess.run([venv / "bin" / "python", "-c", "import huggingface_hub"], check=True)
    assert not (tmp_path / "store" / "models" / "m" / MARKER).exists()


@pytest.mark.slow
def test_a_model_from_another_source_is_converted_again(tmp_path):
    """models/m fetched from base/, converted; then fetched from tuned/. Before: the conversion's marker held
    only the input path, input type and quant, so cpu-weights/m-INT8 stayed base's. A re-run with nothing
    changed converts nothing."""
    weights = tmp_path / "store" / "cpu-weights" / "m-INT4" / "experts.bin"
    rc, output = run_play(tmp_path, TASKS, converting(tmp_path, source(tmp_path, "base", b"BASE-WEIGHTS-v1")))
    assert rc == 0 and weights.read_bytes() == b"BASE-WEIGHTS-v1", output[-3000:]
    tuned = converting(tmp_path, source(tmp_path, "tuned", b"TUNED-WEIGHTS-version2"))
    rc, output = run_play(tmp_path, TASKS, tuned)
    assert rc == 0 and "changed:" in task_output(output, "Convert CPU expert weights"), output[-3000:]
    assert weights.read_bytes() == b"TUNED-WEIGHTS-version2"
    # the re-run looks (synchronously) and starts no conversion. Before: the async conversion ran for the
    # complete output too, and Ansible's first look at it came one poll interval (30 s) later
    rc, output = run_play(tmp_path, TASKS, tuned | {"kt_model_store_convert_poll": 3600})
    assert rc == 0, output[-3000:]
    looked = task_output(output, "Look for CPU weights already converted")
    assert "ok: [localhost] => (item=m -> int4)" in looked, output[-3000:]
    assert "skipping: [localhost]" in task_output(output, "Convert CPU expert weights"), output[-3000:]
    assert "(item=" not in task_output(output, "Convert CPU expert weights")


def test_a_store_without_a_directory_the_roles_use_is_refused_before_any_change(tmp_path):
    """kt_model_store_subdirs is a free list; before, leaving out datasets (say) laid the store out and failed
    later in kt_train on an undefined dirs.datasets, and loras/ missing gave adapter paths like /NAME."""
    extra = converting(
        tmp_path, source(tmp_path, "base", b"W"), kt_model_store_subdirs=["models", "cpu-weights"]
    )
    rc, output = run_play(tmp_path, TASKS, extra)
    assert rc != 0, output[-3000:]
    assert "kt_model_store_subdirs must include gguf, loras, datasets, outputs" in output, output[-3000:]
    assert not (tmp_path / "store").exists()


def test_a_conversion_poll_interval_under_one_second_is_refused(tmp_path):
    """Ansible's poll 0 starts the job and goes on: the play would record CPU weights not yet written."""
    extra = converting(tmp_path, source(tmp_path, "base", b"W"), kt_model_store_convert_poll=0)
    rc, output = run_play(tmp_path, TASKS, extra)
    assert rc != 0, output[-3000:]
    assert "kt_model_store_convert_poll must be at least 1 second, not 0" in output, output[-3000:]
    assert not (tmp_path / "store").exists()


@pytest.mark.slow
def test_another_local_source_with_files_of_the_same_sizes_is_copied(tmp_path):
    """A fine-tune of the same architecture has shards of the same sizes. Before: every file whose size
    matched was skipped and a fresh marker was written for tuned/ over base's bytes; base's files that
    tuned/ does not have stayed in models/m."""
    base = source(tmp_path, "base", b"BASE-WEIGHTS-v1", **{"base-only.json": b"{}"})
    rc, output = run_play(tmp_path, TASKS, converting(tmp_path, base))
    assert rc == 0, output[-3000:]
    tuned = source(tmp_path, "tuned", b"TUNED-WEIGHTS-2")
    rc, output = run_play(tmp_path, TASKS, converting(tmp_path, tuned))
    assert rc == 0, output[-3000:]
    model = tmp_path / "store" / "models" / "m"
    assert (model / "model.safetensors").read_bytes() == b"TUNED-WEIGHTS-2"
    assert sorted(p.name for p in model.iterdir()) == [MARKER, "config.json", "model.safetensors"]
    experts = tmp_path / "store" / "cpu-weights" / "m-INT4" / "experts.bin"
    assert experts.read_bytes() == b"TUNED-WEIGHTS-2"


@pytest.mark.slow
def test_a_local_source_rewritten_in_place_is_copied_and_converted_again(tmp_path):
    """Train, merge into /data/merged, serve; train again, merge into the same directory: the shard has the
    same size. Before: the fetch marker's request and sizes matched, so models/m and its CPU weights stayed
    the first merge's."""
    merged = source(tmp_path, "merged", b"MERGE-1")
    experts = tmp_path / "store" / "cpu-weights" / "m-INT4" / "experts.bin"
    rc, output = run_play(tmp_path, TASKS, converting(tmp_path, merged))
    assert rc == 0 and experts.read_bytes() == b"MERGE-1", output[-3000:]
    (merged / "model.safetensors").write_bytes(b"MERGE-2")
    rc, output = run_play(tmp_path, TASKS, converting(tmp_path, merged))
    assert rc == 0, output[-3000:]
    assert (tmp_path / "store" / "models" / "m" / "model.safetensors").read_bytes() == b"MERGE-2"
    assert experts.read_bytes() == b"MERGE-2"


def test_a_missing_converter_or_python_is_refused_before_anything_changes(tmp_path):
    """Before: the store was laid out and the model fetched, and only then the converter (or its python)
    was found missing."""
    base = source(tmp_path, "base", b"BASE-WEIGHTS-v1")
    for var in ("kt_model_store_convert_script", "kt_model_store_convert_python"):
        rc, output = run_play(tmp_path, TASKS, converting(tmp_path, base, **{var: str(tmp_path / "nope")}))
        assert rc != 0
        assert f"m want cpu_weights, but {var} {tmp_path / 'nope'} is not" in output, output[-3000:]
        assert not (tmp_path / "store").exists() and not (tmp_path / "prefix").exists()


def test_the_store_description_is_written_into_a_new_directory(tmp_path):
    """On a fresh host /etc/ktinfra did not exist. Before: 'Write the store description' failed, after the
    whole fetch (and conversion)."""
    state = tmp_path / "etc" / "ktinfra" / "store.json"
    extra = converting(tmp_path, source(tmp_path, "base", b"W"), kt_model_store_state_file=str(state))
    extra["kt_model_store_models"][0]["cpu_weights"] = "none"
    rc, output = run_play(tmp_path, TASKS, extra)
    assert rc == 0, output[-3000:]
    assert json.loads(state.read_text())["models"]["m"]["path"] == str(tmp_path / "store" / "models" / "m")


@pytest.mark.slow
def test_a_hub_model_moved_to_another_revision_is_converted_from_that_revision_alone(tmp_path):
    """The whole hub path: the role makes the fetcher's venv, installs huggingface_hub from PyPI, writes the
    token file and fetches from a gated hub on loopback. Before: v1's shards stayed in models/m beside v2's,
    and the CPU weights converted after the move held v1's second shard too (the converter, like kt-kernel's,
    reads every *.safetensors in the folder)."""
    script = tmp_path / "conv" / "convert_cpu_weights.py"
    script.parent.mkdir()
    script.write_text(CONVERTER)
    convert = {"kt_model_store_convert_python": sys.executable, "kt_model_store_convert_script": str(script)}
    convert |= {f"kt_model_store_convert_{k}": 0 for k in ("min_shm_bytes", "threads", "threadpools")}
    convert["kt_model_store_convert_poll"] = 1
    experts = tmp_path / "store" / "cpu-weights" / "m-INT4" / "experts.bin"
    with MiniHub(token="hf_role_secret") as hub:
        hub.commit("org/m", V1, "v1")
        hub.commit("org/m", V2, "v2")
        hub_vars = {"kt_model_store_hf_endpoint": hub.url, "kt_model_store_hf_token": "hf_role_secret"}
        for revision, files in (("v1", V1), ("v2", V2)):
            model = {"name": "m", "source": "hf", "repo": "org/m", "revision": revision}
            model["cpu_weights"] = "int4"
            rc, output = run_play(tmp_path, TASKS, role_vars(tmp_path, [model], **hub_vars, **convert))
            assert rc == 0, output[-3000:]
            assert "hf_role_secret" not in output
            stored = tmp_path / "store" / "models" / "m"
            assert sorted(p.name for p in stored.iterdir() if not p.name.startswith(".")) == sorted(files)
            shards = [data for name, data in sorted(files.items()) if name.endswith(".safetensors")]
            assert experts.read_bytes() == b"".join(shards)
        sent = {auth for _, path, auth in hub.requests if not path.startswith("/api/agent")}  # 2.x's probe
        assert sent == {"Bearer hf_role_secret"}
        hub.requests.clear()
        rc, output = run_play(tmp_path, TASKS, role_vars(tmp_path, [model], **hub_vars, **convert))
        assert rc == 0, output[-3000:]
        # looked at, not fetched: before, the async fetch ran and Ansible waited its poll interval first
        assert "ok: [localhost] => (item=m)" in task_output(output, "Look for models already complete")
        assert "(item=" not in task_output(output, "Fetch models into the store"), output[-3000:]
        assert hub.requests == []
