"""The planner on capture folders parsed by ktinfra.facts.from_capture: the four real hosts, and the facts
module's synthetic captures (marked SYNTHETIC in their READMEs)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ktinfra import catalog, facts, sizing
from ktinfra.planner import load_facts, plan

HOSTS = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"
FACTS = Path(__file__).resolve().parents[1] / "fixtures" / "facts"
DECISIONS = ("kt_method", "kt_cpuinfer", "kt_threadpool_count", "kt_num_gpu_experts",
             "mem_fraction_static", "chunked_prefill_size", "max_running_requests", "tensor_parallel_size",
             "host", "port")  # fmt: skip


def captured(name: str) -> dict:
    return facts.from_capture(HOSTS / name)


def test_h100_capture_plans_like_the_hand_written_facts():
    from_capture = plan(captured("h100-xeon-amx-16c"), "Qwen3-30B-A3B", "serve")
    by_hand = plan(load_facts(FACTS / "h100-amx.json"), "Qwen3-30B-A3B", "serve")
    assert from_capture["feasible"]
    assert {k: from_capture["serve"][k] for k in DECISIONS} == {k: by_hand["serve"][k] for k in DECISIONS}
    assert from_capture["requirements"] == by_hand["requirements"]


def test_h200_capture_sft_of_qwen3_30b_is_short_of_disk_only():
    result = plan(captured("h200-xeon-amx-16c"), "Qwen3-30B-A3B", "sft")
    assert result["sft"]["per_device_train_batch_size"] == 4  # 141 GB of HBM: no need for batch 1
    assert len(result["problems"]) == 1 and result["problems"][0].endswith("/ has 68.7 GB free")


def test_2xh200_capture_serves_qwen3_235b_over_two_gpus_but_needs_a_bigger_disk():
    result = plan(captured("2xh200-xeon-amx-32c"), "Qwen3-235B-A22B", "serve")
    serve = result["serve"]
    assert (serve["tensor_parallel_size"], serve["kt_cpuinfer"], serve["kt_threadpool_count"]) == (2, 29, 1)
    assert serve["mem_fraction_static"] == 0.94  # the 8 GB reserve cap on a 151 GB H200
    assert result["problems"] == [
        "needs 698 GB disk (470 GB download + 227 GB CPU weights + 1.0 GB outputs), / has 137 GB free"
    ]


def test_4xh200_capture_puts_126_of_128_qwen3_235b_experts_on_four_gpus():
    """The real 4x H200 (nvidia-h200-x4, 2026-11-29): tensor parallel over all four, 59 of 64 cores (the
    submitting thread and four rank schedulers keep 5 free); only
    the 252 GB disk is short. Qwen3-30B-A3B fits each GPU whole: BF16 in place, no conversion."""
    host = captured("4xh200-xeon-amx-64c")
    big = plan(host, "Qwen3-235B-A22B", "serve")
    serve = big["serve"]
    assert (serve["kt_method"], serve["tensor_parallel_size"], serve["gpu_indices"]) == (
        "AMXINT8",
        4,
        [0, 1, 2, 3],
    )
    assert (serve["kt_num_gpu_experts"], serve["kt_cpuinfer"], serve["max_running_requests"]) == (
        126,
        59,
        128,
    )
    assert big["problems"] == [
        "needs 698 GB disk (470 GB download + 227 GB CPU weights + 1.0 GB outputs), / has 252 GB free"
    ]
    small = plan(host, "Qwen3-30B-A3B", "serve")
    assert small["feasible"] and small["serve"]["kt_method"] == "BF16"
    assert (small["serve"]["tensor_parallel_size"], small["serve"]["kt_num_gpu_experts"]) == (4, 128)


def test_4xh200_235b_plan_keeps_amxint8_but_says_what_bf16_in_place_would_need():
    """kt-kernel runs 2 of 128 experts a layer there: the 227 GB conversion buys little CPU speed, so the
    plan names the in-place BF16 alternative (one expert fewer on the GPUs, no conversion)."""
    host = captured("4xh200-xeon-amx-64c")
    hint = (
        "kt-kernel runs only 2 of 128 experts per MoE layer on the CPU: --cpu-format BF16 reads the bf16 "
        "checkpoint in place (125 on the GPU, 457 GB RAM, 471 GB disk) instead of this AMXINT8 conversion "
        "of 227 GB (230 GB RAM, 698 GB disk)"
    )
    assert hint in plan(host, "Qwen3-235B-A22B", "serve")["warnings"]
    in_place = plan(host, "Qwen3-235B-A22B", "serve", cpu_format="BF16")
    assert in_place["serve"]["kt_num_gpu_experts"] == 125
    assert in_place["requirements"]["disk_bytes"] == pytest.approx(471e9, rel=0.01)
    assert not any("runs only" in w for w in in_place["warnings"])
    asked = plan(host, "Qwen3-235B-A22B", "serve", cpu_format="AMXINT8")
    assert not any("runs only" in w for w in asked["warnings"])  # the user chose the conversion
    host["memory"]["total_bytes"] = 400 * 10**9  # BF16's 457 GB no longer fits: nothing to suggest
    assert not any("runs only" in w for w in plan(host, "Qwen3-235B-A22B", "serve")["warnings"])


def test_a_cpu_running_many_experts_gets_no_in_place_hint():
    result = plan(captured("2xh200-xeon-amx-32c"), "Qwen3-235B-A22B", "serve")
    on_cpu = 128 - result["serve"]["kt_num_gpu_experts"]
    assert on_cpu > 128 / 16 and result["serve"]["kt_method"] == "AMXINT8"
    assert not any("runs only" in w for w in result["warnings"])


def test_development_machine_capture_has_no_gpu_and_no_amx():
    host = captured("epyc-2c-nogpu")
    serve = plan(host, "DeepSeek-V2-Lite", "serve")
    assert serve["serve"]["kt_method"] == "LLAMAFILE"  # AVX2 only
    assert any(p.startswith("no NVIDIA GPU found") for p in serve["problems"])
    sft = plan(host, "DeepSeek-V2-Lite", "sft")
    assert any("needs AMX" in p for p in sft["problems"])


@pytest.mark.parametrize("capture, effect", [
    ("h100-xeon-amx-16c", "= 12 would leave 2 more core(s) idle"),  # 14 workers, 2 vCPUs kept free
    ("epyc-2c-nogpu", "= 1 agrees"),  # 1 worker, 1 core kept free
    ("synthetic-autodl-6430-4090", "= 12 would oversubscribe the cores"),  # 16 vCPUs, 8 physical cores
])  # fmt: skip
def test_kt_cpuinfer_reason_compares_kt_runs_default_with_the_planned_workers(capture, effect):
    reason = plan(captured(capture), "Qwen3-30B-A3B", "serve")["reasons"]["kt_cpuinfer"]
    assert reason.endswith(f"`kt run`'s default 0.8 x logical {effect}")


def test_only_a_kernel_that_cannot_grant_amx_forces_a_kt_kernel_library():
    # AMX on kernels that grant it, and CPUs without AMX (8352V, EPYC): nothing forced; the forced case (AMX
    # flags on kernel 5.15) is test_amx_host_on_a_pre_5_16_kernel_serves_without_amx_and_cannot_fine_tune
    for capture in (
        "h100-xeon-amx-16c",
        "synthetic-autodl-6430-4090",
        "synthetic-autodl-8352v-4090",
        "epyc-2c-nogpu",
    ):
        result = plan(captured(capture), "Qwen3-30B-A3B", "serve")
        assert "kt_cpu_variant" not in result["serve"] and "kt_cpu_variant" not in result["reasons"]


def test_synthetic_autodl_6430_capture_reproduces_the_seed_002_decisions():
    result = plan(captured("synthetic-autodl-6430-4090"), "Qwen3-30B-A3B", "serve")
    serve = result["serve"]
    assert (serve["kt_method"], serve["kt_cpuinfer"], serve["kt_threadpool_count"]) == ("AMXINT8", 8, 2)
    assert serve["mem_fraction_static"] == 0.92 and serve["chunked_prefill_size"] == 4096
    assert serve["kt_num_gpu_experts"] == 31
    assert result["feasible"], result["problems"]


@pytest.mark.parametrize("capture, size, gpu", [
    ("h100-xeon-amx-16c", 8192, "85.5 GB"),  # 80 GiB of HBM: under the 100 GB tier
    ("h200-xeon-amx-16c", 16384, "151 GB"),  # 141 GiB of HBM: the 16384 tier
    ("2xh200-xeon-amx-32c", 16384, "151 GB"),
    ("4xh200-xeon-amx-64c", 16384, "151 GB"),
])  # fmt: skip
def test_chunked_prefill_size_tier_follows_the_gpu_memory_of_the_real_captures(capture, size, gpu):
    result = plan(captured(capture), "Qwen3-30B-A3B", "serve")
    assert result["feasible"], result["problems"]
    assert result["serve"]["chunked_prefill_size"] == size
    assert result["reasons"]["chunked_prefill_size"] == f"{size} tokens per prefill chunk on a {gpu} GPU"


def test_a_gqa_pool_is_capped_to_leave_the_layerwise_prefill_layer_free():
    """sglang-kt 0.7.2's KV pool takes all of mem_fraction_static after the weights (only MXFP4 reserves
    the layer), so the MoE layer held for layerwise prefill is kept out of it by --max-total-tokens."""
    arch = catalog.resolve("Qwen3-30B-A3B")
    result = plan(captured("synthetic-autodl-6430-4090"), "Qwen3-30B-A3B", "serve", cpu_format="BF16")
    serve, breakdown = result["serve"], result["requirements_breakdown"]
    assert serve["kt_gpu_prefill_token_threshold"] == 2048
    static = serve["mem_fraction_static"] * result["host"]["gpus"][0]["memory_mib"] * 2**20
    held = sizing.gpu_expert_bytes(arch, "bf16") * arch.num_experts  # 1.2 GB
    experts = serve["kt_num_gpu_experts"] * sizing.gpu_expert_bytes(arch, "bf16") * arch.num_moe_layers
    per_token = sizing.kv_bytes_per_token(arch)
    tokens = serve["max_total_tokens"]
    assert tokens == int((static - breakdown["gpu_weights"] - experts - held) // per_token) == 68393
    assert tokens >= serve["max_running_requests"] * 4096
    assert "1.2 GB MoE layer of layerwise prefill left out" in result["reasons"]["max_total_tokens"]
    assert "kept out of the KV pool by" in result["reasons"]["kt_gpu_prefill_token_threshold"]


def test_amx_host_on_a_pre_5_16_kernel_serves_without_amx_and_cannot_fine_tune():
    host = captured("synthetic-2s-8470q-amx")  # AMX flags, kernel 5.15: no ARCH_REQ_XCOMP_PERM
    served = plan(host, "Qwen3-30B-A3B", "serve")
    assert served["feasible"] and served["serve"]["kt_method"] == "BF16"
    assert "kernel 5.15.0-125-generic < 5.16" in served["reasons"]["kt_method"]
    assert (served["host"]["amx"], served["host"]["amx_usable"]) == (True, False)
    # kt-kernel 0.7.2 picks its library from /proc/cpuinfo flags alone: forced to the best non-AMX one
    assert served["serve"]["kt_cpu_variant"] == "avx512_bf16"
    assert "KT_KERNEL_CPU_VARIANT=avx512_bf16" in served["reasons"]["kt_cpu_variant"]
    host["cpu"]["isa"].update(avx512_bf16=False, avx512_vbmi=False)
    assert (
        plan(host, "Qwen3-30B-A3B", "serve", cpu_format="LLAMAFILE")["serve"]["kt_cpu_variant"]
        == "avx512_vnni"
    )
    tuned = plan(host, "Qwen3-30B-A3B", "sft")
    assert any(p.startswith("kernel 5.15.0-125-generic is older than 5.16") for p in tuned["problems"])


def test_small_data_disk_is_reported_with_numbers():
    host = captured("synthetic-autodl-6430-4090")
    data = next(d for d in host["disks"] if d["mount"] == "/root/autodl-tmp")
    data["avail_bytes"] = 50 * 10**9  # AutoDL's default data disk
    result = plan(host, "Qwen3-30B-A3B", "serve")
    assert any("/root/autodl-tmp has 50.0 GB free" in p for p in result["problems"])


def test_synthetic_autodl_8352v_capture_serves_llamafile_on_its_quota():
    result = plan(captured("synthetic-autodl-8352v-4090"), "Qwen3-30B-A3B", "serve")
    assert (result["serve"]["kt_method"], result["serve"]["kt_cpuinfer"]) == ("LLAMAFILE", 6)
    assert "glibc 2.31 is older than 2.35, which the kt-0.7 wheels (manylinux) need" in result["problems"]


def test_synthetic_4x5090_capture_splits_qwen3_235b_over_four_gpus():
    result = plan(captured("synthetic-4x5090-8470q"), "Qwen3-235B-A22B", "serve")
    assert result["feasible"] and result["serve"]["tensor_parallel_size"] == 4
    assert result["serve"]["kt_threadpool_count"] == 1  # the cpuset holds one NUMA node's cores


def test_no_layerwise_prefill_where_sglang_kt_would_pin_its_loader_outside_the_cpuset():
    """sglang-kt 0.7.2 pins rank r's loader thread to CPU os.cpu_count() - 1 - r (online CPUs) without
    catching the error: the cpuset 0-23,52-75 of 104 online CPUs holds none of 103..100."""
    host = captured("synthetic-4x5090-8470q")
    result = plan(host, "Qwen3-235B-A22B", "serve", cpu_format="BF16")
    serve, reasons = result["serve"], result["reasons"]
    assert result["feasible"] and serve["tensor_parallel_size"] == 4
    assert serve["kt_gpu_prefill_token_threshold"] is None
    reason = reasons["kt_gpu_prefill_token_threshold"]
    assert "CPU(s) 103, 102, 101, 100 lie outside the usable CPUs 0-23,52-75" in reason and "EINVAL" in reason
    assert "held for layerwise prefill" not in reasons["kt_num_gpu_experts"]
    # the same host without the cpuset: the last 4 online CPUs are usable, the threshold comes back
    host["cpu"]["usable_cpus"] = "0-103"
    serve = plan(host, "Qwen3-235B-A22B", "serve", cpu_format="BF16")["serve"]
    assert serve["kt_gpu_prefill_token_threshold"] == 2048
    host["cpu"]["usable_cpus"] = "0-102"  # rank 0's CPU 103 alone is outside
    serve = plan(host, "Qwen3-235B-A22B", "serve", cpu_format="BF16")["serve"]
    assert serve["kt_gpu_prefill_token_threshold"] is None


@pytest.mark.parametrize(
    "capture,model,mode,want",
    [("h100-xeon-amx-16c", "Qwen3-30B-A3B", "serve", 0), ("h100-xeon-amx-16c", "DeepSeek-V3", "serve", 2),
     ("epyc-2c-nogpu", "DeepSeek-V2-Lite", "sft", 2)],
)  # fmt: skip
def test_cli_plans_from_a_capture_folder(capture, model, mode, want):
    proc = subprocess.run(
        [sys.executable, "-m", "ktinfra", "plan", "--model", model, "--mode", mode,
         "--from", str(HOSTS / capture), "--json"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == want, proc.stderr
    assert json.loads(proc.stdout)["feasible"] is (want == 0)


def test_cli_from_a_missing_folder_is_bad_input(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "ktinfra",
            "plan",
            "--model",
            "Qwen3-30B-A3B",
            "--from",
            str(tmp_path / "nope"),
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1 and "not a directory" in proc.stderr


@pytest.mark.parametrize(("used_mib", "warned"), [(0, False), (5000, False), (60000, True)])
def test_gpu_memory_others_hold_is_named(tmp_path, used_mib, warned):
    """Before: memory.used was captured and ignored: with 60 GB of the H100 held by another process the plan
    kept mem_fraction_static 0.92 without a word, and SGLang fails at start. Synthetic: the H100 capture
    with that use (CSV and XML alike); 5 GB fits in what 0.92 leaves."""
    import shutil

    host = tmp_path / "busy"
    shutil.copytree(HOSTS / "h100-xeon-amx-16c", host)
    csv = (host / "nvidia-smi-query.csv").read_text().replace(" 0 MiB,", f" {used_mib} MiB,")
    (host / "nvidia-smi-query.csv").write_text(csv)
    xml = (host / "nvidia-smi-q.xml").read_text()
    fb = "<reserved>480 MiB</reserved>\n\t\t\t<used>0 MiB</used>"
    assert fb in xml
    busy = fb.replace("0 MiB</used>", f"{used_mib} MiB</used>")
    (host / "nvidia-smi-q.xml").write_text(xml.replace(fb, busy))
    doc = plan(facts.from_capture(host), "Qwen3-30B-A3B", "serve")
    named = [w for w in doc["warnings"] if "in use when the facts were taken" in w]
    assert bool(named) == warned, doc["warnings"]
    assert doc["serve"]["mem_fraction_static"] == 0.92


@pytest.mark.parametrize(
    ("visible", "kept"),
    [
        (None, [0, 1]),
        ("1", [1]),
        ("GPU-59fc4ea4", [1]),  # a UUID prefix, as CUDA takes it
        ("1,7,0", [1]),  # CUDA ends the list at the first entry that names no GPU
        ("0,1", [0, 1]),
        ("", []),
    ],
)
def test_cuda_visible_devices_of_the_capture_narrows_the_gpus(tmp_path, visible, kept):
    """Before: CUDA_VISIBLE_DEVICES was not captured: with =1 on the 2xH200 host (one GPU handed to this
    user) the plan took both GPUs (TP 2) and the rendered unit's CUDA_VISIBLE_DEVICES=0,1 took the other
    user's GPU. Synthetic: the 2xH200 capture plus cuda-visible-devices.txt, as `ktinfra facts --capture`
    writes it when the variable is set."""
    import shutil

    host = tmp_path / "shared"
    shutil.copytree(HOSTS / "2xh200-xeon-amx-32c", host)
    if visible is not None:
        (host / "cuda-visible-devices.txt").write_text(visible + "\n")
    found = facts.from_capture(host)
    assert [g["index"] for g in found["gpus"]] == kept
    doc = plan(found, "Qwen3-30B-A3B", "serve")
    named = [w for w in doc["warnings"] if "CUDA_VISIBLE_DEVICES" in w]
    if visible is None or kept == [0, 1]:
        assert not named
    else:
        assert named and f"CUDA_VISIBLE_DEVICES={visible!r}" in named[0]
    if kept:
        assert set(doc["serve"]["gpu_indices"]) <= set(kept)
    else:
        assert not doc["feasible"]


def test_a_real_capture_under_cuda_visible_devices_1_plans_only_gpu_1():
    """Real: `CUDA_VISIBLE_DEVICES=1 ktinfra facts --capture` on the 2xH200 host (nvidia-h200-x2 kind,
    2026-11-29; docs/results/2026-11-29-h200x2-visibility). nvidia-smi lists both GPUs; the plan takes the
    second alone, as the unit's CUDA_VISIBLE_DEVICES will."""
    found = facts.from_capture(HOSTS / "2xh200-cvd1-xeon-amx-32c")
    assert found["cuda_visible_devices"] == {"value": "1", "hidden_indices": [0]}
    assert [(g["index"], g["uuid"]) for g in found["gpus"]] == [
        (1, "GPU-6b528e68-6fa2-beb6-4582-a6b7d3ef5889")
    ]
    doc = plan(found, "Qwen3-30B-A3B", "serve")
    assert doc["feasible"], doc["problems"]
    assert (doc["serve"]["gpu_indices"], doc["serve"]["tensor_parallel_size"]) == ([1], 1)
    assert any("CUDA_VISIBLE_DEVICES='1'" in w for w in doc["warnings"])
    both = plan(facts.from_capture(HOSTS / "2xh200-xeon-amx-32c"), "Qwen3-30B-A3B", "serve")
    assert (both["serve"]["gpu_indices"], both["serve"]["tensor_parallel_size"]) == ([0, 1], 2)


def test_the_capture_keeps_cuda_visible_devices_only_when_set(monkeypatch):
    from ktinfra.facts.capture import SOURCES

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert SOURCES["cuda-visible-devices.txt"]() is None
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert SOURCES["cuda-visible-devices.txt"]() == "\n"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert SOURCES["cuda-visible-devices.txt"]() == "1\n"


@pytest.mark.parametrize(
    ("kernel", "permission", "usable", "problem"),
    [
        ("6.8.0-60-generic", None, True, None),
        ("5.14.0-427.13.1.el9_4.x86_64", None, False, "older than 5.16"),  # no probe: the release decides
        ("5.14.0-427.13.1.el9_4.x86_64", "granted", True, None),  # RHEL 9's backport, seen by the probe
        ("6.8.0-60-generic", "refused: Invalid argument", False, "refused ARCH_REQ_XCOMP_PERM"),
    ],
)
def test_the_captures_amx_permission_answer_wins_over_the_kernel_release(
    tmp_path, kernel, permission, usable, problem
):
    """Before: AMX was judged by the release alone: a RHEL 9 kernel (5.14 with the XTILEDATA backport) got a
    forced non-AMX kt-kernel and an infeasible SFT plan. Synthetic: the H100 capture with another uname and
    the amx-permission.txt `ktinfra facts --capture` writes on AMX CPUs."""
    import shutil

    host = tmp_path / "amx"
    shutil.copytree(HOSTS / "h100-xeon-amx-16c", host)
    uname = (host / "uname.txt").read_text().split()
    uname[2] = kernel
    (host / "uname.txt").write_text(" ".join(uname) + "\n")
    if permission:
        (host / "amx-permission.txt").write_text(permission + "\n")
    found = facts.from_capture(host)
    assert found["cpu"]["amx_permission"] == permission
    doc = plan(found, "Qwen3-30B-A3B", "sft")
    assert doc["host"]["amx_usable"] is usable
    kernel_problems = [p for p in doc["problems"] if "kernel" in p]
    if problem:
        assert kernel_problems and problem in kernel_problems[0], doc["problems"]
    else:
        assert not kernel_problems, doc["problems"]


def test_the_live_capture_asks_the_kernel_only_on_amx_cpus():
    from ktinfra.facts.capture import SOURCES

    answer = SOURCES["amx-permission.txt"]()
    has_amx = " amx_tile" in Path("/proc/cpuinfo").read_text()
    assert (answer is None) is not has_amx  # this machine (EPYC, no AMX): not asked


@pytest.mark.parametrize(
    ("driver", "problem", "warning"),
    # 550: seed 002's driver, which ran the cu128 builds (minor-version compatibility): no warning either
    [("580.159.04", False, False), ("550.107.02", False, False), ("470.256.02", True, False)],
)
def test_the_nvidia_driver_is_checked_against_the_profiles_cuda_builds(tmp_path, driver, problem, warning):
    """Before: the plan read no driver version: a 470 driver (CUDA 11.4) got a feasible kt-0.7 plan, whose
    torch 2.9.1 CUDA 12.8 build cannot start there. Synthetic: the H100 capture with another driver."""
    import shutil

    host = tmp_path / "driver"
    shutil.copytree(HOSTS / "h100-xeon-amx-16c", host)
    for name in ("nvidia-smi-q.xml", "nvidia-smi-query.csv"):
        (host / name).write_text((host / name).read_text().replace("580.159.04", driver))
    doc = plan(facts.from_capture(host), "Qwen3-30B-A3B", "serve")
    problems = [p for p in doc["problems"] if "NVIDIA driver" in p]
    warnings = [w for w in doc["warnings"] if "NVIDIA driver" in w]
    assert bool(problems) == problem and bool(warnings) == warning, (doc["problems"], doc["warnings"])
    if problem:
        assert "older than 525.60.13" in problems[0] and not doc["feasible"]


@pytest.mark.parametrize(
    ("mems", "pools", "warned"), [("0-1", 2, False), ("0", 1, True), ("1", 1, True), ("2", 2, True)]
)
def test_thread_pools_go_only_to_nodes_whose_memory_the_process_may_use(tmp_path, mems, pools, warned):
    """Before: Mems_allowed_list was captured and ignored: with the cpuset's mems 0 on the 2-socket host the
    plan bound pool 1 to node 1, where this process may not allocate, so its expert weights could not go
    where kt-kernel puts them. Synthetic: the 2-socket capture with another Mems_allowed_list."""
    import shutil

    host = tmp_path / "mems"
    shutil.copytree(HOSTS / "synthetic-2s-8470q-amx", host)
    status = (
        (host / "proc-self-status.txt")
        .read_text()
        .replace("Mems_allowed_list:\t0-1", f"Mems_allowed_list:\t{mems}")
    )
    (host / "proc-self-status.txt").write_text(status)
    found = facts.from_capture(host)
    assert found["cpu"]["memory_nodes_allowed"] == mems
    doc = plan(found, "Qwen3-30B-A3B", "serve")
    assert doc["serve"]["kt_threadpool_count"] == pools
    named = [w for w in doc["warnings"] if "Mems_allowed_list" in w]
    assert bool(named) == warned, doc["warnings"]
    if pools == 1 and doc["serve"].get("kt_numa_nodes") is not None:
        assert doc["serve"]["kt_numa_nodes"] == [int(mems)]


def test_a_mig_uuid_in_cuda_visible_devices_keeps_that_instance_alone(tmp_path):
    """Before: a MIG UUID kept its whole GPU with every instance, and the plan chose the first/largest one
    (someone else's). Synthetic: the 2x3g MIG capture with the second instance handed to this user."""
    import shutil

    host = tmp_path / "mig"
    shutil.copytree(HOSTS / "synthetic-h100-mig-2x3g", host)
    (host / "cuda-visible-devices.txt").write_text("MIG-d9d7d000\n")
    found = facts.from_capture(host)
    (gpu,) = found["gpus"]
    assert [d["uuid"] for d in gpu["mig_devices"]] == ["MIG-d9d7d000-7324-555b-9b15-aa9d35017479"]
    doc = plan(found, "Qwen3-30B-A3B", "serve")
    assert doc["serve"]["mig_uuids"] == ["MIG-d9d7d000-7324-555b-9b15-aa9d35017479"]
    whole = plan(facts.from_capture(HOSTS / "synthetic-h100-mig-2x3g"), "Qwen3-30B-A3B", "serve")
    assert whole["serve"]["mig_uuids"] == ["MIG-978553c0-9f55-5ab9-b2cd-da525c211123"]


@pytest.mark.parametrize(("order", "noted"), [(None, True), ("FASTEST_FIRST", True), ("PCI_BUS_ID", False)])
def test_numbers_in_cuda_visible_devices_on_mixed_gpus_are_noted_unless_in_pci_order(tmp_path, order, noted):
    """CUDA numbers GPUs fastest first unless CUDA_DEVICE_ORDER=PCI_BUS_ID; facts read the numbers in
    nvidia-smi's order. Synthetic: the 4x5090 capture with GPU 3 a 24 GB RTX 4090."""
    import shutil

    host = tmp_path / "mixed"
    shutil.copytree(HOSTS / "synthetic-4x5090-8470q", host)
    csv = (host / "nvidia-smi-query.csv").read_text()
    uuid = "GPU-9d3a1b2c-3d4e-5f60-7182-93a4b5c6d7e3"
    csv = csv.replace(
        f"3, NVIDIA GeForce RTX 5090, {uuid}, 32607 MiB", f"3, NVIDIA GeForce RTX 4090, {uuid}, 24564 MiB"
    )
    (host / "nvidia-smi-query.csv").write_text(csv)
    (host / "cuda-visible-devices.txt").write_text("1\n" + (f"CUDA_DEVICE_ORDER={order}\n" if order else ""))
    found = facts.from_capture(host)
    assert [g["index"] for g in found["gpus"]] == [1]
    assert ("note" in found["cuda_visible_devices"]) is noted
    warned = [w for w in plan(found, "Qwen3-30B-A3B", "serve")["warnings"] if "give GPU UUIDs" in w]
    assert bool(warned) is noted


def test_the_legacy_sft_reason_states_the_threads_it_chose():
    """Before: "cpu_infer = 30 physical cores" on a host of 32 (2 are kept free, as for serving)."""
    doc = plan(
        facts.from_capture(HOSTS / "2xh200-xeon-amx-32c"), "Qwen3-30B-A3B", "sft", stack="kt-0.4-autodl"
    )
    assert doc["sft"]["kt"]["cpu_infer"] == 30
    assert (
        "cpu_infer = 30 worker threads of 32 usable physical cores: 2 core(s) kept free"
        in doc["reasons"]["kt"]
    )


def test_current_sft_keeps_one_more_cpu_free_per_data_parallel_rank():
    """accelerate starts one process per GPU and rank 0 owns the KT backend (kt_kernel/sft/autograd.py): the
    other rank waits on its GPU as busy as a serving tensor-parallel scheduler. Before: 30 threads on the
    2 x H200's 32 CPUs beside 2 ranks, which collapsed in 4 of 4 samples when measured beside 2 CUDA processes
    (docs/results/2026-11-30-h200x2-tp-reserve). The legacy launcher is one process and keeps 30."""
    host = facts.from_capture(HOSTS / "2xh200-xeon-amx-32c")
    current = plan(host, "Qwen3-30B-A3B", "sft")
    assert current["sft"]["launcher"]["num_processes"] == 2
    assert current["sft"]["kt"]["kt_config"]["kt_num_threads"] == 29
    assert "29 threads in 1 NUMA thread pool(s)" in current["reasons"]["kt"]
    one = plan(facts.from_capture(HOSTS / "h200-xeon-amx-16c"), "Qwen3-30B-A3B", "sft")
    assert one["sft"]["kt"]["kt_config"]["kt_num_threads"] == 14  # one GPU: 2 kept free, as before
    legacy = plan(host, "Qwen3-30B-A3B", "sft", stack="kt-0.4-autodl")
    assert legacy["sft"]["kt"]["cpu_infer"] == 30


def test_a_legacy_stack_plan_never_picks_a_native_backend_its_kt_kernel_lacks():
    """kt-kernel v0.4.4 (the kt-0.4-autodl stack) raises "Unsupported method" for BF16/FP8. Before: where
    every expert fits on the GPU the legacy plan switched to BF16 in place, feasible, and render refused
    it (or the unit failed three times at load); --cpu-format BF16 passed too."""
    host = facts.from_capture(HOSTS / "2xh200-xeon-amx-32c")
    current = plan(host, "Qwen3-30B-A3B", "serve")
    assert current["serve"]["kt_method"] == "BF16"
    legacy = plan(host, "Qwen3-30B-A3B", "serve", stack="kt-0.4-autodl")
    assert legacy["feasible"] and legacy["serve"]["kt_method"] == "AMXINT8"
    [unread] = [w for w in legacy["warnings"] if w.startswith("every expert fits on the GPU")]
    assert "legacy stack's kt-kernel v0.4.4 loads them all the same" in unread
    asked = plan(host, "Qwen3-30B-A3B", "serve", stack="kt-0.4-autodl", cpu_format="BF16")
    assert not asked["feasible"]
    assert "--cpu-format BF16: the legacy stack's kt-kernel v0.4.4 has no BF16 method" in asked["problems"][0]
