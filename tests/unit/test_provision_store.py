"""kt_model_store helpers: completeness markers, resume after interruption, atomic CPU-weight conversion."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

ROLE_FILES = Path(__file__).resolve().parents[2] / "roles" / "kt_model_store" / "files"
FETCH = ROLE_FILES / "kt_store_fetch.py"
CONVERT = ROLE_FILES / "kt_store_convert.py"
MARKER = ".ktinfra-complete.json"


def fetch(src: Path, dest: Path, *extra: str, fsize_limit: int | None = None) -> tuple[int, dict]:
    def limit() -> None:  # RLIMIT_FSIZE: the kernel kills the copy mid-file, like a full quota would
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize_limit, fsize_limit))

    argv = [sys.executable, str(FETCH), "--name", "tiny", "--source", "local", "--repo", str(src)]
    preexec = limit if fsize_limit else None
    proc = subprocess.run(
        [*argv, "--dest", str(dest), *extra], capture_output=True, text=True, preexec_fn=preexec
    )
    out = json.loads(proc.stdout) if proc.stdout.strip() else {}
    return proc.returncode, out


def model(tmp_path: Path, big_bytes: int = 4 << 20) -> Path:
    src = tmp_path / "src"
    src.mkdir()
    (src / "config.json").write_text('{"model_type": "qwen3_moe"}')
    (src / "tokenizer.json").write_text("{}")
    (src / "model-00001-of-00001.safetensors").write_bytes(os.urandom(big_bytes))
    (src / ".git").mkdir()
    (src / ".git" / "HEAD").write_text("ref")
    return src


def test_fetch_marks_complete_and_is_idempotent(tmp_path: Path) -> None:
    src, dest = model(tmp_path), tmp_path / "models" / "tiny"
    rc, out = fetch(src, dest)
    assert (rc, out["changed"], out["complete"], out["files"]) == (0, True, True, 3)
    marker = json.loads((dest / MARKER).read_text())
    assert marker["files"]["model-00001-of-00001.safetensors"] == 4 << 20
    assert not (dest / ".git").exists()
    rc, out = fetch(src, dest)
    assert (rc, out["changed"]) == (0, False)


def test_a_local_source_rewritten_in_place_with_the_same_sizes_is_copied_again(tmp_path: Path) -> None:
    """A LoRA merged into the same directory again: same shard sizes, new bytes and mtime. Before: the
    request and the copied sizes matched, so the old copy was kept (and, in the role, its CPU weights)."""
    src, dest = model(tmp_path), tmp_path / "models" / "tiny"
    assert fetch(src, dest)[0] == 0
    shard = src / "model-00001-of-00001.safetensors"
    new = os.urandom(shard.stat().st_size)
    shard.write_bytes(new)
    os.utime(shard, ns=(time.time_ns(), time.time_ns() + 10**9))
    rc, out = fetch(src, dest, "--check")
    assert (rc, out["complete"]) == (3, False)
    rc, out = fetch(src, dest)
    assert (rc, out["changed"], out["complete"]) == (0, True, True), out
    assert (dest / shard.name).read_bytes() == new
    assert fetch(src, dest)[1]["changed"] is False


def test_a_marker_from_before_source_files_is_trusted_until_the_source_changes(tmp_path: Path) -> None:
    """An older ktinfra's marker has no source_files: a copy whose source did not change since it was
    written is not copied again (nor its conversion redone); a source file written after it is."""
    src, dest = model(tmp_path), tmp_path / "models" / "tiny"
    assert fetch(src, dest)[0] == 0
    marker = json.loads((dest / MARKER).read_text())
    del marker["source_files"]
    (dest / MARKER).write_text(json.dumps(marker))
    assert fetch(src, dest)[1]["changed"] is False
    (src / "config.json").write_text('{"model_type": "qwen3_moX"}')  # same size
    os.utime(src / "config.json", ns=(time.time_ns(), (marker["completed_at"] + 5) * 10**9))
    rc, out = fetch(src, dest)
    assert (rc, out["changed"]) == (0, True)
    assert json.loads((dest / "config.json").read_text())["model_type"] == "qwen3_moX"
    assert "source_files" in json.loads((dest / MARKER).read_text())


def test_interrupted_fetch_is_not_complete_and_rerun_resumes(tmp_path: Path) -> None:
    src, dest = model(tmp_path), tmp_path / "models" / "tiny"
    rc, _ = fetch(src, dest, fsize_limit=1 << 20)
    assert rc != 0
    assert not (dest / MARKER).exists()
    assert (dest / "model-00001-of-00001.safetensors.part").stat().st_size == 1 << 20
    rc, out = fetch(src, dest, "--check")
    assert rc == 3 and out["complete"] is False
    config_mtime = (dest / "config.json").stat().st_mtime_ns
    rc, out = fetch(src, dest)
    assert (rc, out["complete"]) == (0, True)
    assert (dest / "config.json").stat().st_mtime_ns == config_mtime  # already-complete files are kept
    assert not list(dest.glob("*.part"))


def test_damaged_or_different_request_is_fetched_again(tmp_path: Path) -> None:
    src, dest = model(tmp_path), tmp_path / "tiny"
    fetch(src, dest)
    with open(dest / "model-00001-of-00001.safetensors", "r+b") as fh:
        fh.truncate(10)
    rc, out = fetch(src, dest)
    assert (rc, out["changed"]) == (0, True)
    assert (dest / "model-00001-of-00001.safetensors").stat().st_size == 4 << 20
    rc, out = fetch(src, dest, "--allow-pattern", "*.json")
    assert (rc, out["changed"]) == (0, True)
    assert json.loads((dest / MARKER).read_text())["request"]["allow_patterns"] == ["*.json"]


def test_empty_fetch_is_an_error_not_a_complete_model(tmp_path: Path) -> None:
    src, dest = model(tmp_path), tmp_path / "tiny"
    rc, out = fetch(src, dest, "--allow-pattern", "*.gguf")
    assert rc == 1 and "nothing to fetch" in out["error"] and "allow_patterns ['*.gguf']" in out["error"]
    assert not dest.exists()
    # a complete model stays as it was (before: its marker was removed before the empty copy)
    assert fetch(src, dest)[0] == 0
    before = {p.name: p.read_bytes() for p in dest.iterdir()}
    rc, out = fetch(src, dest, "--allow-pattern", "*.gguf")
    assert (rc, out["changed"]) == (1, False)
    assert {p.name: p.read_bytes() for p in dest.iterdir()} == before
    rc, out = fetch(tmp_path / "absent", tmp_path / "x")
    assert rc == 1 and "not a directory" in out["error"]


def convert(tmp_path: Path, script: Path, *extra: str) -> tuple[int, dict]:
    argv = [sys.executable, str(CONVERT), "--python", sys.executable, "--script", str(script)]
    paths = ["--input-path", str(tmp_path / "src"), "--output", str(tmp_path / "cpu" / "tiny-INT4")]
    proc = subprocess.run([*argv, *paths, "--quant-method", "int4", *extra], capture_output=True, text=True)
    return proc.returncode, json.loads(proc.stdout.strip().splitlines()[-1])


def converter(tmp_path: Path, exit_status: int) -> Path:
    """Stands in for kt-kernel's convert_cpu_weights.py, which needs kt-kernel and an AVX-512/AMX CPU.
    It takes the same arguments and writes a partial output before exiting with the given status."""
    script = tmp_path / "kt-kernel" / "scripts" / "convert_cpu_weights.py"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(
        "import argparse, pathlib, sys\np = argparse.ArgumentParser()\n"
        "for a in ('--input-path', '--input-type', '--output', '--quant-method'): p.add_argument(a)\n"
        "a = p.parse_args()\nout = pathlib.Path(a.output); out.mkdir(parents=True)\n"
        "(out / 'layer0.bin').write_bytes(b'x' * 16)\n(out / 'layer0.bin').chmod(0o600)\n"
        f"sys.exit({exit_status})\n"
    )
    return script


def test_convert_checks_before_writing(tmp_path: Path) -> None:
    model(tmp_path)
    (tmp_path / "cpu").mkdir()
    rc, out = convert(tmp_path, tmp_path / "missing.py", "--min-shm-bytes", str(1 << 60))
    assert rc == 1
    assert any("converter" in p for p in out["problems"]) and any("/dev/shm" in p for p in out["problems"])
    assert list((tmp_path / "cpu").iterdir()) == []


def test_failed_conversion_leaves_nothing_and_success_is_renamed_into_place(tmp_path: Path) -> None:
    model(tmp_path)
    (tmp_path / "cpu").mkdir()
    rc, out = convert(tmp_path, converter(tmp_path, 1))
    assert rc == 1 and "exited 1" in out["error"]
    assert list((tmp_path / "cpu").iterdir()) == []
    rc, out = convert(tmp_path, converter(tmp_path, 0))
    assert (rc, out["changed"]) == (0, True)
    assert sorted(p.name for p in (tmp_path / "cpu" / "tiny-INT4").iterdir()) == [MARKER, "layer0.bin"]
    assert [p.name for p in (tmp_path / "cpu").iterdir()] == ["tiny-INT4"]
    assert (tmp_path / "cpu" / "tiny-INT4" / "layer0.bin").stat().st_mode & 0o777 == 0o644
    # complete output of this converter: not run again (it would fail with /bin/false as its python)
    rc, out = convert(tmp_path, converter(tmp_path, 0), "--python", "/bin/false")
    assert (rc, out["changed"]) == (0, False)


def test_convert_check_says_whether_the_output_is_complete_and_runs_nothing(tmp_path: Path) -> None:
    model(tmp_path)
    (tmp_path / "cpu").mkdir()
    script = converter(tmp_path, 0)
    rc, out = convert(tmp_path, script, "--check")
    assert (rc, out["complete"], out["changed"]) == (3, False, False)
    assert list((tmp_path / "cpu").iterdir()) == []
    assert convert(tmp_path, script)[0] == 0
    rc, out = convert(tmp_path, script, "--check", "--python", "/bin/false")
    assert (rc, out["complete"]) == (0, True)
    (tmp_path / "src" / "config.json").write_text('{"model_type": "qwen3_moe", "changed": 1}')
    rc, out = convert(tmp_path, script, "--check", "--python", "/bin/false")
    assert (rc, out["complete"]) == (3, False)  # no fetch marker: the input's files and mtimes decide


def test_convert_passes_the_plans_threads_and_refuses_zero(tmp_path: Path) -> None:
    model(tmp_path)
    (tmp_path / "cpu").mkdir()
    script = converter(tmp_path, 0)
    rc, out = convert(tmp_path, script, "--dry-run", "--cpuinfer-threads", "14", "--threadpool-count", "1")
    assert rc == 0
    assert out["command"][-4:] == ["--cpuinfer-threads", "14", "--threadpool-count", "1"]
    for extra in ([], ["--cpuinfer-threads", "0", "--threadpool-count", "0"]):
        rc, out = convert(tmp_path, script, "--dry-run", *extra)
        assert "--cpuinfer-threads" not in out["command"]  # the converter's own default then
    rc, out = convert(tmp_path, script, "--cpuinfer-threads", "-2")
    assert rc == 1
    assert "--cpuinfer-threads must be at least 1 (0: the converter's default), not -2" in out["problems"]
    assert list((tmp_path / "cpu").iterdir()) == []


def test_a_conversion_cut_off_leaves_space_the_next_one_counts_as_free(tmp_path: Path) -> None:
    """The host went down mid-conversion (here: SIGKILL to the convert script and the converter it runs):
    the temporary output stayed, up to half the model's size. The next run removes it before converting, but
    before, its disk check counted it as used: "needs X GiB free, has Y" on a disk that had room."""
    model(tmp_path)
    (tmp_path / "cpu").mkdir()
    script = tmp_path / "kt-kernel" / "scripts" / "convert_cpu_weights.py"
    script.parent.mkdir(parents=True)
    script.write_text(  # writes part of its output, then works on (until killed)
        "import argparse, pathlib, time\np = argparse.ArgumentParser()\n"
        "for a in ('--input-path', '--input-type', '--output', '--quant-method'): p.add_argument(a)\n"
        "out = pathlib.Path(p.parse_args().output); out.mkdir(parents=True)\n"
        "(out / 'part').write_bytes(b'x' * (1 << 20))\n(out / 'part').rename(out / 'layer0.bin')\n"
        "time.sleep(120)\n"
    )
    paths = ["--input-path", str(tmp_path / "src"), "--output", str(tmp_path / "cpu" / "tiny-INT4")]
    argv = [sys.executable, str(CONVERT), "--python", sys.executable, "--script", str(script), *paths]
    argv += ["--quant-method", "int4"]
    leftover = tmp_path / "cpu" / ".tiny-INT4.tmp-ktinfra"
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 60
    while not (leftover / "layer0.bin").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert (leftover / "layer0.bin").stat().st_size == 1 << 20
    weights = tmp_path / "src" / "model-00001-of-00001.safetensors"
    os.truncate(weights, 1 << 43)  # 8 TiB (sparse): more than this disk has, so the check speaks
    rc, out = convert(tmp_path, converter(tmp_path, 0), "--dry-run")
    [disk] = [p for p in out["problems"] if p.startswith("needs ")]
    assert rc == 1 and f"of {leftover}, left by a conversion that was cut off" in disk, disk
    os.truncate(weights, 4 << 20)
    rc, out = convert(tmp_path, converter(tmp_path, 0))
    assert (rc, out["changed"]) == (0, True)
    assert [p.name for p in (tmp_path / "cpu").iterdir()] == ["tiny-INT4"]


def test_another_source_with_files_of_the_same_sizes_is_copied_and_old_files_removed(tmp_path: Path) -> None:
    """Before: a file already in dest was kept whenever its size matched the source's, so another local
    source (a fine-tune, shards of the same sizes) was marked complete over the old bytes; files of the old
    source stayed. Now a file is kept only with the source file's size and mtime (copies carry it)."""
    src, dest = model(tmp_path), tmp_path / "models" / "tiny"
    (src / "old-only.json").write_text("{}")
    fetch(src, dest)
    other = tmp_path / "other"
    other.mkdir()
    (other / "config.json").write_text('{"model_type": "qwen3_MOE"}')  # same size, other bytes
    (other / "model-00001-of-00001.safetensors").write_bytes(os.urandom(4 << 20))
    (other / "sub").mkdir()
    (other / "sub" / "a.json").write_text("{}")
    rc, out = fetch(other, dest)
    assert (rc, out["changed"], out["files"]) == (0, True, 3)
    for rel in ("config.json", "model-00001-of-00001.safetensors", "sub/a.json"):
        assert (dest / rel).read_bytes() == (other / rel).read_bytes(), rel
    assert sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*")) == [
        MARKER, "config.json", "model-00001-of-00001.safetensors", "sub", "sub/a.json"
    ]  # fmt: skip
    rc, out = fetch(other, dest, "--allow-pattern", "*.safetensors")
    assert sorted(p.name for p in dest.iterdir()) == [MARKER, "model-00001-of-00001.safetensors"]


def test_convert_is_due_again_when_its_input_or_converter_changes(tmp_path: Path) -> None:
    """Before: the conversion's marker held the input path, input type and quant only: a model fetched again
    from another repo or revision into the same models/NAME, or another converter, kept the old output."""
    src, cpu = model(tmp_path), tmp_path / "cpu"
    cpu.mkdir()
    fetch(src, src)  # the fetch marker of models/NAME, here in place
    script = converter(tmp_path, 0)
    assert convert(tmp_path, script)[1]["changed"] is True
    assert convert(tmp_path, script)[1]["changed"] is False
    marker = json.loads((src / MARKER).read_text())
    (src / MARKER).write_text(json.dumps(marker | {"request": marker["request"] | {"revision": "v2"}}))
    assert convert(tmp_path, script)[1]["changed"] is True  # another revision fetched
    assert convert(tmp_path, script, "--converter-version", "v0.7.1")[1]["changed"] is True  # another tag
    assert convert(tmp_path, script, "--converter-version", "v0.7.1")[1]["changed"] is False
    script.write_text(script.read_text() + "# patched\n")
    assert convert(tmp_path, script, "--converter-version", "v0.7.1")[1]["changed"] is True  # another script


def test_a_conversion_marked_by_an_older_ktinfra_is_kept_unless_the_model_was_fetched_after_it(
    tmp_path: Path,
) -> None:
    """A marker from before the request held the source and the converter ({input, input_type, quant}) is
    taken, and rewritten in full, when it was written after the model's fetch completed; else converted."""
    src, cpu = model(tmp_path), tmp_path / "cpu"
    cpu.mkdir()
    fetch(src, src)
    script = converter(tmp_path, 0)
    convert(tmp_path, script)
    out_marker = cpu / "tiny-INT4" / MARKER
    legacy = {"input": str(src), "input_type": "bf16", "quant": "int4"}
    out_marker.write_text(json.dumps({"request": legacy, "seconds": 1}))
    assert convert(tmp_path, script)[1]["changed"] is False
    assert json.loads(out_marker.read_text())["request"]["source"]["request"]["repo"] == str(src)
    out_marker.write_text(json.dumps({"request": legacy, "seconds": 1}))
    later = json.loads((src / MARKER).read_text())["completed_at"] + 10
    os.utime(out_marker, (later - 20, later - 20))  # converted before the current fetch completed
    assert convert(tmp_path, script)[1]["changed"] is True


def test_convert_reports_a_missing_python_before_writing(tmp_path: Path) -> None:
    """Before: the converter's python was first run after the checks: FileNotFoundError, a traceback and no
    JSON line."""
    model(tmp_path)
    (tmp_path / "cpu").mkdir()
    argv = [sys.executable, str(CONVERT), "--python", str(tmp_path / "no-python"), "--script"]
    argv += [str(converter(tmp_path, 0)), "--input-path", str(tmp_path / "src"), "--quant-method", "int4"]
    argv += ["--output", str(tmp_path / "cpu" / "tiny-INT4")]
    proc = subprocess.run(argv, capture_output=True, text=True)
    out = json.loads(proc.stdout)
    assert proc.returncode == 1 and out["complete"] is False
    assert f"python {tmp_path / 'no-python'} not found or not executable" in out["problems"][0]
    assert list((tmp_path / "cpu").iterdir()) == []
