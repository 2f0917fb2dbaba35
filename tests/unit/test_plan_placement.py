"""Where the planner puts the work: which GPUs serve (identical ones only), how kt-kernel's NUMA thread
pools land on the usable cores, and GPUs whose compute capability the facts do not know."""

import shutil
from pathlib import Path

import pytest

from ktinfra import facts as facts_module
from ktinfra.planner import load_facts, plan
from ktinfra.render import RenderError, render_serve, sglang_argv
from ktinfra.render.train import render_train

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
RTX_3050 = {"index": 1, "name": "NVIDIA GeForce RTX 3050", "memory_mib": 8192, "compute_capability": "8.6"}


def h100(**memory) -> dict:
    host = load_facts(FIXTURES / "facts" / "h100-amx.json")
    host["disks"][0]["avail_bytes"] = 3 * 10**12
    host["memory"]["total_bytes"] = memory.get("ram", 600 * 10**9)
    return host


def gpu(index: int, name: str, mib: int, cc: str | None = "8.9") -> dict:
    return {"index": index, "name": name, "memory_mib": mib, "compute_capability": cc}


# --- #1 mixed GPUs: tensor parallel over identical GPUs only -------------------------------------------
def test_a_small_extra_gpu_does_not_shrink_the_plan_to_its_memory():
    alone = plan(h100(), "Qwen3-235B-A22B", "serve")
    host = h100()
    host["gpus"].append(dict(RTX_3050))
    mixed = plan(host, "Qwen3-235B-A22B", "serve")
    assert mixed["feasible"], mixed["problems"]
    serve = mixed["serve"]
    assert (serve["tensor_parallel_size"], serve["gpu_indices"]) == (1, [0])
    assert serve["kt_num_gpu_experts"] == alone["serve"]["kt_num_gpu_experts"] > 0
    why = mixed["reasons"]["gpu_indices"]
    assert why.startswith("0: 1 x NVIDIA H100 80GB HBM3") and "left out GPU 1 (NVIDIA GeForce RTX 3050" in why


def test_vram_problem_names_the_gpus_actually_used():
    host = h100()
    host["gpus"] = [gpu(0, "NVIDIA RTX A4000", 16376, "8.6"), dict(RTX_3050)]
    problems = plan(host, "Qwen3-235B-A22B", "serve")["problems"]
    vram = next(p for p in problems if "GPU memory" in p)
    assert vram.endswith("1 x NVIDIA RTX A4000 has 17.2 GB") and "3050" not in vram


@pytest.mark.parametrize(
    "gpus,used",
    [
        # two 24 GB ranks (48 GB) beat one 40 GB GPU
        ([gpu(0, "A100 40GB", 40960, "8.0"), gpu(1, "RTX 4090", 24564), gpu(2, "RTX 4090", 24564)], [1, 2]),
        # equal memory: the group with more GPUs
        ([gpu(0, "A100-80", 81920), gpu(1, "A100", 40960), gpu(2, "A100", 40960)], [1, 2]),
        # three identical GPUs: tensor parallel takes a power of two of them
        ([gpu(0, "L40S", 46068), gpu(1, "L40S", 46068), gpu(2, "L40S", 46068)], [0, 1]),
    ],
)  # fmt: skip
def test_the_identical_group_holding_the_most_memory_serves(gpus, used):
    host = h100()
    host["gpus"] = gpus
    serve = plan(host, "DeepSeek-V2-Lite", "serve")["serve"]
    assert (serve["gpu_indices"], serve["tensor_parallel_size"]) == (used, len(used))


def test_render_serve_exposes_only_the_planned_gpus_in_pci_order():
    host = h100()
    host["gpus"] = [dict(RTX_3050, index=0), gpu(1, "NVIDIA H100 80GB HBM3", 81559, "9.0")]
    result = plan(host, "Qwen3-30B-A3B", "serve")
    env = render_serve(result, name="q", model_path="/m", weight_path="/w").files["ktinfra-serve-q.env"][0]
    assert 'CUDA_VISIBLE_DEVICES="1"' in env.splitlines()
    assert 'CUDA_DEVICE_ORDER="PCI_BUS_ID"' in env.splitlines()  # nvidia-smi's numbering, not CUDA's
    result["serve"]["gpu_indices"] = ["1"]
    with pytest.raises(RenderError, match="gpu_indices"):
        render_serve(result, name="q", model_path="/m", weight_path="/w")


def test_gpus_below_compute_capability_8_are_left_out_not_a_problem():
    host = h100()
    host["gpus"] = [gpu(0, "Tesla V100-SXM2-32GB", 32768, "7.0"), gpu(1, "NVIDIA A100 80GB", 81920, "8.0")]
    result = plan(host, "Qwen3-30B-A3B", "serve")
    assert result["feasible"], result["problems"]
    assert result["serve"]["gpu_indices"] == [1]
    assert (
        "left out GPU 0 (Tesla V100-SXM2-32GB, 34.4 GB): compute capability below 8.0 (0)"
        in (result["reasons"]["gpu_indices"])
    )


def test_only_old_gpus_is_still_a_problem():
    host = h100()
    host["gpus"] = [gpu(0, "Tesla V100-SXM2-32GB", 32768, "7.0")]
    problems = plan(host, "Qwen3-30B-A3B", "serve")["problems"]
    assert any("has compute capability 7.0; KT needs >= 8.0" in p for p in problems)


def test_sft_warns_about_an_unknown_compute_capability():
    host = h100(ram=2 * 10**12)
    host["gpus"][0]["compute_capability"] = None
    warnings = plan(host, "Qwen3-30B-A3B", "sft")["warnings"]
    assert any(w.startswith("compute capability of GPU 0 (NVIDIA H100 80GB HBM3) unknown") for w in warnings)


def test_sft_runs_on_the_identical_gpus_holding_the_most_memory():
    """FSDP sizes every rank like the smallest: an A4000 beside a 3050 trains alone, not at 8.6 GB a rank."""
    host = h100()
    host["gpus"] = [gpu(0, "NVIDIA RTX A4000", 16376, "8.6"), dict(RTX_3050)]
    result = plan(host, "Qwen3-235B-A22B", "sft")
    assert result["sft"]["gpu_indices"] == [0]
    assert result["sft"]["launcher"]["num_processes"] == 1
    assert result["reasons"]["gpu_indices"] == (
        "0: 1 x NVIDIA RTX A4000; left out GPU 1 (NVIDIA GeForce RTX 3050, 8.6 GB): data-parallel ranks "
        "must be identical GPUs (same name, memory within 10 %); the ones used hold the most memory"
    )
    vram = next(p for p in result["problems"] if "GPU memory per GPU" in p)
    assert vram.endswith("1 x NVIDIA RTX A4000 has 17.2 GB")


def test_sft_leaves_a_gpu_below_8_out_instead_of_refusing_the_host():
    """A display GPU (GTX 1080 Ti, cc 6.1) beside a 4090 made every fine-tuning plan infeasible."""
    host = h100(ram=2 * 10**12)
    host["gpus"] = [
        gpu(0, "NVIDIA GeForce RTX 4090", 24564),
        gpu(1, "NVIDIA GeForce GTX 1080 Ti", 11264, "6.1"),
    ]
    result = plan(host, "Qwen3-30B-A3B", "sft")
    assert result["feasible"], result["problems"]
    assert (result["sft"]["gpu_indices"], result["sft"]["per_device_train_batch_size"]) == ([0], 2)
    assert result["reasons"]["gpu_indices"].endswith("compute capability below 8.0 (1)")


def test_sft_takes_every_gpu_of_the_biggest_identical_group():
    host = h100(ram=2 * 10**12)
    host["gpus"] = [gpu(0, "NVIDIA L40S", 46068), dict(RTX_3050, index=1), gpu(2, "NVIDIA L40S", 46068)]
    sft = plan(host, "Qwen3-30B-A3B", "sft")["sft"]
    assert (sft["gpu_indices"], sft["launcher"]["num_processes"]) == ([0, 2], 2)


def test_sft_with_only_old_gpus_is_still_a_problem():
    host = h100()
    host["gpus"] = [gpu(0, "Tesla V100-SXM2-32GB", 32768, "7.0")]
    result = plan(host, "Qwen3-30B-A3B", "sft")
    assert result["sft"]["gpu_indices"] == [0]
    assert any("has compute capability 7.0; KT needs >= 8.0" in p for p in result["problems"])


def test_render_train_exposes_only_the_planned_gpus_in_pci_order():
    host = h100(ram=2 * 10**12)
    host["gpus"] = [
        gpu(0, "NVIDIA GeForce RTX 4090", 24564),
        gpu(1, "NVIDIA GeForce GTX 1080 Ti", 11264, "6.1"),
    ]
    rendered = render_train(
        plan(host, "Qwen3-30B-A3B", "sft"),
        name="r", model_path="/m", dataset="d", dataset_dir="/d", output_dir="/o",
    )  # fmt: skip
    env = rendered.files["ktinfra-train-r.env"][0]
    assert 'CUDA_VISIBLE_DEVICES="0"' in env and 'CUDA_DEVICE_ORDER="PCI_BUS_ID"' in env
    assert "num_processes: 1" in rendered.files["r.accelerate.yaml"][0]


# --- #2 kt-kernel thread pools: pool i on NUMA node i, threads split evenly -----------------------------
def two_nodes(node_cores: dict[int, int], threads_per_core: int = 1) -> dict:
    host = h100()
    cores = sum(node_cores.values())
    host["cpu"].update(
        physical_cores=cores,
        logical_cpus=cores * threads_per_core,
        threads_per_core=threads_per_core,
        numa_node_physical_cores={str(node): count for node, count in node_cores.items()},
        numa_nodes=len(node_cores),
    )
    return host


def test_cores_on_node_1_only_name_node_1_for_the_pool(tmp_path):
    """A container pinned to the second socket: kt-kernel would bind its one pool to node 0."""
    capture = tmp_path / "n1"
    shutil.copytree(FIXTURES / "hosts" / "synthetic-2s-8470q-amx", capture)
    (capture / "cgroup.txt").write_text("/sys/fs/cgroup/cpuset.cpus.effective: 52-103\n")
    result = plan(facts_module.from_capture(capture), "Qwen3-30B-A3B", "serve")
    serve = result["serve"]
    # 52 cores without free siblings, TP 2: the submitting thread and two rank schedulers keep 3 free
    assert (serve["kt_threadpool_count"], serve["kt_numa_nodes"], serve["kt_cpuinfer"]) == (1, [1], 49)
    assert result["reasons"]["kt_numa_nodes"].startswith("1: the pools' nodes, passed as --kt-numa-nodes")
    # only the id past the pool count (test_plan_numa_ids_past_pools.py): no placement warning
    assert all("WorkerPool::init" in w for w in result["warnings"] if "kt-kernel" in w)
    argv = sglang_argv(result, model_path="/m", weight_path="/w")
    assert argv[argv.index("--kt-threadpool-count") :][:4] == [
        "--kt-threadpool-count",
        "1",
        "--kt-numa-nodes",
        "1",
    ]


def test_pools_on_nodes_0_to_n_leave_kt_numa_nodes_unset():
    result = plan(two_nodes({0: 52, 1: 52}, threads_per_core=2), "Qwen3-30B-A3B", "serve")
    assert result["serve"]["kt_numa_nodes"] is None
    assert "--kt-numa-nodes" not in sglang_argv(result, model_path="/m", weight_path="/w")


def test_the_two_biggest_of_three_nodes_get_the_pools():
    result = plan(two_nodes({0: 4, 1: 40, 2: 40}), "Qwen3-30B-A3B", "serve")
    serve = result["serve"]
    assert (serve["kt_threadpool_count"], serve["kt_numa_nodes"]) == (2, [1, 2])
    assert any("node(s) 0 idle" in w for w in result["warnings"])


@pytest.mark.parametrize("nodes", [[0], [0, -1], ["0", "1"], "0 1"])
def test_render_refuses_kt_numa_nodes_that_do_not_match_the_pools(nodes):
    result = plan(two_nodes({0: 52, 1: 52}, threads_per_core=2), "Qwen3-30B-A3B", "serve")
    result["serve"]["kt_numa_nodes"] = nodes
    with pytest.raises(RenderError, match="one NUMA node id per thread pool"):
        sglang_argv(result, model_path="/m", weight_path="/w")


def test_a_node_with_too_few_cores_for_its_share_gets_no_pool():
    # cpuset 0-50,52: 51 cores on node 0, 1 on node 1; two pools would put 25 threads on that 1 core
    result = plan(two_nodes({0: 51, 1: 1}), "Qwen3-30B-A3B", "serve")
    assert (result["serve"]["kt_threadpool_count"], result["serve"]["kt_cpuinfer"]) == (1, 50)
    assert any("node(s) 1 idle" in w for w in result["warnings"])


def test_uneven_nodes_cap_the_threads_at_an_even_split():
    result = plan(two_nodes({0: 52, 1: 40}, threads_per_core=2), "Qwen3-30B-A3B", "serve")
    assert (result["serve"]["kt_threadpool_count"], result["serve"]["kt_cpuinfer"]) == (2, 80)
    assert any("12 of 92 worker threads unused" in w for w in result["warnings"])
    assert "92 cut to 80" in result["reasons"]["kt_cpuinfer"]


def test_even_nodes_get_one_pool_each_and_no_warning():
    result = plan(two_nodes({0: 52, 1: 52}, threads_per_core=2), "Qwen3-30B-A3B", "serve")
    assert (result["serve"]["kt_threadpool_count"], result["serve"]["kt_cpuinfer"]) == (2, 104)
    assert result["warnings"] == []
    assert result["serve"]["numa_cpus"] is None and "cpuset" in result["reasons"]["numa_cpus"]


# kt-kernel's fine-tuning path has no node list (kt_kernel/sft/base.py): its pools are nodes 0..n-1
def sft_pools(result: dict) -> tuple[int, int]:
    kt = result["sft"]["kt"]["kt_config"]
    return kt["kt_threadpool_count"], kt["kt_num_threads"]


def test_fine_tuning_pools_split_the_threads_as_serving_does():
    even = plan(two_nodes({0: 52, 1: 52}, threads_per_core=2), "Qwen3-30B-A3B", "sft")
    assert sft_pools(even) == (2, 104) and even["warnings"] == []
    uneven = plan(two_nodes({0: 52, 1: 40}, threads_per_core=2), "Qwen3-30B-A3B", "sft")
    assert sft_pools(uneven) == (2, 80)  # not 46 threads bound to node 1's 40 cores
    assert any("12 of 92 worker threads unused" in w for w in uneven["warnings"])
    assert "92 usable cores cut to 80" in uneven["reasons"]["kt"]


def test_fine_tuning_pools_can_only_start_at_node_0():
    # serving names nodes 1 and 2 (--kt-numa-nodes); fine-tuning binds pool i to node i, so the small
    # node 0 caps every pool: 3 pools x 4 threads beat 1 pool of 4 (or 82 threads crowding 4 cores)
    result = plan(two_nodes({0: 4, 1: 40, 2: 40}), "Qwen3-30B-A3B", "sft")
    assert sft_pools(result) == (3, 12)
    warning = next(w for w in result["warnings"] if "70 of 82 worker threads unused" in w)
    assert warning.endswith("fine-tuning binds pool i to node i (kt_kernel/sft/base.py names no nodes)")


def test_fine_tuning_in_a_container_on_socket_1_is_warned_about(tmp_path):
    capture = tmp_path / "n1"
    shutil.copytree(FIXTURES / "hosts" / "synthetic-2s-8470q-amx", capture)
    (capture / "cgroup.txt").write_text("/sys/fs/cgroup/cpuset.cpus.effective: 52-103\n")
    result = plan(facts_module.from_capture(capture), "Qwen3-30B-A3B", "sft")
    assert result["sft"]["launcher"]["num_processes"] == 2
    assert sft_pools(result) == (1, 49)  # 52 cores: the submitting thread and one per data-parallel rank
    warning = next(w for w in result["warnings"] if w.startswith("kt-kernel binds fine-tuning thread pool 0"))
    assert "workers are usable on node(s) 1 only" in warning


# --- #3 unknown compute capability ---------------------------------------------------------------------
def test_unknown_compute_capability_is_unknown_not_below_8_9():
    host = h100(ram=2 * 10**12)
    host["gpus"][0]["compute_capability"] = None  # e.g. GPUs read from nvidia-smi -q -x
    warnings = plan(host, "DeepSeek-V3", "serve")["warnings"]
    assert not any("< 8.9" in w for w in warnings)
    assert any(w.startswith("compute capability of GPU 0 (NVIDIA H100 80GB HBM3) unknown") for w in warnings)
    assert any("8.0" in w and "8.9" in w for w in warnings)


def test_a_legacy_stack_plan_keeps_its_pools_on_nodes_0_to_n_minus_1(tmp_path):
    """The legacy sglang fork has no --kt-numa-nodes and kt-kernel v0.4.4 binds pool i to node i. Before:
    the planner named node 1 for a container on the second socket, and render (7925e57) refused the plan
    it had called feasible."""
    capture = tmp_path / "n1"
    shutil.copytree(FIXTURES / "hosts" / "synthetic-2s-8470q-amx", capture)
    (capture / "cgroup.txt").write_text("/sys/fs/cgroup/cpuset.cpus.effective: 52-103\n")
    result = plan(facts_module.from_capture(capture), "Qwen3-30B-A3B", "serve", stack="kt-0.4-autodl")
    serve = result["serve"]
    assert (serve["kt_threadpool_count"], serve["kt_numa_nodes"], serve["kt_cpuinfer"]) == (1, None, 49)
    assert "legacy stack's sglang fork has no --kt-numa-nodes" in result["reasons"]["kt_numa_nodes"]
    warning = next(
        w for w in result["warnings"] if w.startswith("kt-kernel binds the legacy stack's serving")
    )
    assert "workers are usable on node(s) 1 only" in warning and warning.endswith("are this process's")
    argv = sglang_argv(result, model_path="/m", weight_path="/w")  # render takes it now
    assert "--kt-numa-nodes" not in argv
    uneven = plan(
        two_nodes({0: 40, 1: 52}, threads_per_core=2), "Qwen3-30B-A3B", "serve", stack="kt-0.4-autodl"
    )
    assert (uneven["serve"]["kt_threadpool_count"], uneven["serve"]["kt_cpuinfer"]) == (2, 80)
    assert uneven["serve"]["kt_numa_nodes"] is None
