"""Live facts through a real `nvidia-smi` stand-in (a shell script on PATH serving a real capture's output):
non-zero exit statuses with good output, warnings around the XML, a driver refusing a field, a hung driver."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from ktinfra import facts as host_facts
from ktinfra.facts import capture as capture_module

H200X2 = Path(__file__).resolve().parents[1] / "fixtures" / "hosts" / "2xh200-xeon-amx-32c"

SCRIPT = r"""#!/bin/sh
echo "$*" >> "$SMI_LOG"
[ -n "$SMI_HANG" ] && exec sleep 20
case "$1" in
  --query-gpu=*mig.mode.current*)
    if [ -n "$SMI_REFUSE_MIG" ]; then
      echo 'Field "mig.mode.current" is not a valid field to query.'; exit 2
    fi
    printf "$SMI_WARN"; cat "$SMI_DIR/query.csv";;
  --query-gpu=*) printf "$SMI_WARN"; cat "$SMI_DIR/query.csv";;
  -q) printf "$SMI_WARN"; cat "$SMI_DIR/q.xml";;
  topo) cat "$SMI_DIR/topo.txt";;
  -L) printf "$SMI_WARN"; cat "$SMI_DIR/L.txt";;
esac
exit "${SMI_STATUS:-0}"
"""

LISTING = (
    "GPU 0: NVIDIA H200 (UUID: GPU-eba1675f-80ed-12b2-82e6-e05e0cb93f6f)\n"
    "GPU 1: NVIDIA H200 (UUID: GPU-59fc4ea4-fb9d-8328-bbc3-2a0c069a1545)\n"
)


@pytest.fixture
def smi(tmp_path, monkeypatch):
    """A `nvidia-smi` first on PATH answering with the 2xH200 capture's files; returns its folder."""
    bindir, data = tmp_path / "bin", tmp_path / "smi"
    bindir.mkdir()
    data.mkdir()
    (bindir / "nvidia-smi").write_text(SCRIPT)
    (bindir / "nvidia-smi").chmod(0o755)
    for source, name in (
        ("nvidia-smi-query.csv", "query.csv"),
        ("nvidia-smi-q.xml", "q.xml"),
        ("nvidia-smi-topo.txt", "topo.txt"),
    ):
        (data / name).write_text((H200X2 / source).read_text())
    (data / "L.txt").write_text(LISTING)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    monkeypatch.setenv("SMI_DIR", str(data))
    monkeypatch.setenv("SMI_LOG", str(tmp_path / "calls.log"))
    monkeypatch.setenv("SMI_WARN", "")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return data


def _calls(smi: Path) -> list[str]:
    log = smi.parent / "calls.log"
    return log.read_text().splitlines() if log.exists() else []


def test_a_corrupt_inforom_exit_14_keeps_the_gpus(smi, monkeypatch):
    """nvidia-smi prints the warning and every GPU, then exits 14: the output is the GPUs' (was: no GPU)."""
    monkeypatch.setenv("SMI_WARN", r"WARNING: infoROM is corrupted at gpu 0000:00:06.0\n")
    monkeypatch.setenv("SMI_STATUS", "14")
    files = capture_module.collect_live()
    nvidia_files = {"nvidia-smi-query.csv", "nvidia-smi-q.xml", "nvidia-smi-topo.txt", "nvidia-smi-L.txt"}
    assert nvidia_files <= set(files)
    facts = host_facts.gather_live()
    assert [(g["index"], g["name"], g["compute_capability"], g["memory_mib"]) for g in facts["gpus"]] == [
        (0, "NVIDIA H200", "9.0", 143771),
        (1, "NVIDIA H200", "9.0", 143771),
    ]
    assert facts["gpus"][0]["links"] == {"GPU1": "NV18"}
    assert facts["nvidia"] == {"driver_version": "580.159.04", "cuda_version": "13.0"}


def test_a_warning_before_the_xml_does_not_lose_it(smi, monkeypatch):
    """Exit 0 with a warning line before `<?xml`: the document is still read (cuda_version is XML-only)."""
    monkeypatch.setenv("SMI_WARN", r"WARNING: infoROM is corrupted at gpu 0000:00:06.0\n")
    (smi / "query.csv").write_text("junk\n")  # the GPUs can come only from the XML
    facts = host_facts.gather_live()
    assert [g["index"] for g in facts["gpus"]] == [0, 1]
    assert facts["nvidia"] == {"driver_version": "580.159.04", "cuda_version": "13.0"}


def test_a_gpu_that_fell_off_the_bus_leaves_the_others(smi, monkeypatch):
    """Exit 15: the healthy GPU's row is printed, the lost one is a sentence; -q -x printed nothing usable."""
    rows = (H200X2 / "nvidia-smi-query.csv").read_text().splitlines()
    lost = "Unable to determine the device handle for GPU0000:00:07.0: Unknown Error"
    (smi / "query.csv").write_text("\n".join([*rows[:2], lost]) + "\n")
    (smi / "q.xml").write_text(lost + "\n")
    (smi / "topo.txt").write_text(lost + "\n")
    (smi / "L.txt").write_text(LISTING.splitlines()[0] + "\n" + lost + "\n")
    monkeypatch.setenv("SMI_STATUS", "15")
    files = capture_module.collect_live()
    assert "nvidia-smi-q.xml" not in files and "nvidia-smi-topo.txt" not in files  # nothing of a GPU in them
    gpus = host_facts.gather_live()["gpus"]
    assert [(g["index"], g["uuid"], g["compute_capability"]) for g in gpus] == [
        (0, "GPU-eba1675f-80ed-12b2-82e6-e05e0cb93f6f", "9.0")
    ]


def test_a_driver_refusing_the_mig_field_is_asked_again_without_it(smi, monkeypatch):
    """The refusal (exit 2) holds no GPU, so the second query runs and its CSV is the file, after a line
    saying what was left out."""
    monkeypatch.setenv("SMI_REFUSE_MIG", "1")
    files = capture_module.collect_live()
    assert files["nvidia-smi-query.csv"] == (
        "# ktinfra facts: this driver refused --query-gpu with mig.mode.current; asked again without it\n"
        + (H200X2 / "nvidia-smi-query.csv").read_text()
    )
    queries = [call for call in _calls(smi) if call.startswith("--query-gpu")]
    assert len(queries) == 2 and "mig.mode.current" in queries[0] and "mig.mode.current" not in queries[1]


def test_a_hung_nvidia_smi_is_waited_for_once(smi, monkeypatch):
    """The first nvidia-smi call times out: the other four are not started (each waited the timeout)."""
    monkeypatch.setenv("SMI_HANG", "1")
    monkeypatch.setattr(capture_module, "COMMAND_TIMEOUT_S", 1.0)
    started = time.monotonic()
    files = capture_module.collect_live()
    elapsed = time.monotonic() - started
    assert not any(name.startswith("nvidia-smi") for name in files)
    assert len(_calls(smi)) == 1
    assert elapsed < 4.5, elapsed
    assert "lscpu.txt" in files and "meminfo.txt" in files  # the other commands still ran
    # the next capture asks nvidia-smi again (a driver that recovered is read)
    monkeypatch.delenv("SMI_HANG")
    assert "nvidia-smi-query.csv" in capture_module.collect_live()
