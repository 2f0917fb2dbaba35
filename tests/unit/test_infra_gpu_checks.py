"""The host suite's GPU checks (tests/infra/test_gpu.py, run by `ktinfra doctor`): nvidia-smi rows read with
warnings among them, and torch's devices matched to nvidia-smi's GPUs. The GPU parts run on a real GPU host
(docs/results); here the two helpers get real nvidia-smi output of the captures and synthetic shapes."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "infra"))
from kthost import parse_gpu_rows, torch_gpu_problems  # noqa: E402

# rows as `nvidia-smi --query-gpu=index,name,memory.total,compute_cap,driver_version,uuid,mig.mode.current`
# prints them on the 2xH200 host (values from its capture, tests/fixtures/hosts/2xh200-xeon-amx-32c)
H200 = (
    "0, NVIDIA H200, 143771, 9.0, 580.159.04, GPU-eba1675f-80ed-12b2-82e6-e05e0cb93f6f, Disabled\n"
    "1, NVIDIA H200, 143771, 9.0, 580.159.04, GPU-59fc4ea4-fb9d-8328-bbc3-2a0c069a1545, Disabled\n"
)


def test_warning_lines_of_nvidia_smi_are_kept_apart_from_the_gpu_rows():
    """Before: dict(zip(..., strict=True)) on every line: a 'WARNING: infoROM is corrupted' line raised
    ValueError and all four GPU checks errored with a traceback."""
    rows, other = parse_gpu_rows("WARNING: infoROM is corrupted at gpu 0000:00:06.0\n" + H200 + "\n")
    assert [r["index"] for r in rows] == ["0", "1"] and rows[1]["compute_cap"] == "9.0"
    assert other == ["WARNING: infoROM is corrupted at gpu 0000:00:06.0"]


def _device(name: str, capability: list[int], uuid: str | None) -> dict:
    return {"name": name, "capability": capability, "uuid": uuid}


def test_torch_devices_are_matched_by_uuid_not_position():
    """Mixed GPUs: CUDA lists the fastest first unless CUDA_DEVICE_ORDER=PCI_BUS_ID; matched by UUID, a
    reordered view is no problem, a wrong capability still is."""
    gpus, _ = parse_gpu_rows(
        "0, NVIDIA GeForce RTX 3090, 24576, 8.6, 570.1, GPU-aaaa, [N/A]\n"
        "1, NVIDIA GeForce RTX 4090, 24564, 8.9, 570.1, GPU-bbbb, [N/A]\n"
    )
    swapped = [
        _device("NVIDIA GeForce RTX 4090", [8, 9], "bbbb"),
        _device("NVIDIA GeForce RTX 3090", [8, 6], "aaaa"),
    ]
    assert torch_gpu_problems(swapped, gpus) == []
    wrong = [
        _device("NVIDIA GeForce RTX 4090", [8, 6], "bbbb"),
        _device("NVIDIA GeForce RTX 3090", [8, 6], "aaaa"),
    ]
    assert len(torch_gpu_problems(wrong, gpus)) == 1
    stranger = [_device("X", [8, 9], "cccc"), _device("Y", [8, 6], "aaaa")]
    assert "is no GPU nvidia-smi lists" in torch_gpu_problems(stranger, gpus)[0]


def test_counts_and_positions_without_uuid():
    gpus, _ = parse_gpu_rows(H200)
    one = [_device("NVIDIA H200", [9, 0], None)]
    assert "torch sees 1 GPUs" in torch_gpu_problems(one, gpus)[0]
    both = [_device("NVIDIA H200", [9, 0], None)] * 2
    assert torch_gpu_problems(both, gpus) == []


def test_mig_enabled_gpus_are_not_counted_as_whole_devices():
    """A GPU in MIG mode shows in CUDA as its MIG instances: before, the count check failed such hosts."""
    gpus, _ = parse_gpu_rows(H200.replace("Disabled", "Enabled"))
    mig = [_device("NVIDIA H200 MIG 3g.71gb", [9, 0], "MIG-1111")]
    assert torch_gpu_problems(mig, gpus) == []
    assert torch_gpu_problems([], gpus) == ["torch sees no CUDA device, nvidia-smi lists MIG-enabled GPUs"]


def test_an_unreadable_compute_capability_is_a_failed_check_naming_the_value():
    """Before: int('[N/A]') raised ValueError inside the check; the report showed only the traceback's
    'invalid literal for int()', not which GPU or what nvidia-smi gave."""
    import pytest
    from kthost import Expect
    from test_gpu import test_gpu_compute_capability

    rows, _ = parse_gpu_rows(H200.replace("9.0", "[N/A]", 1))
    with pytest.raises(
        AssertionError, match=r"GPU 0 NVIDIA H200: compute capability unreadable: .*'\[N/A\]'"
    ):
        test_gpu_compute_capability({"gpus": rows, "why": ""}, Expect(role="serve"))
    old, _ = parse_gpu_rows(H200.replace("9.0", "7.5"))
    with pytest.raises(AssertionError, match=r"GPU 0 NVIDIA H200: compute capability \(7, 5\)"):
        test_gpu_compute_capability({"gpus": old, "why": ""}, Expect(role="serve"))
    good, _ = parse_gpu_rows(H200)
    test_gpu_compute_capability({"gpus": good, "why": ""}, Expect(role="serve"))
