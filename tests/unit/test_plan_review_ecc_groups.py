"""Fresh-eyes review of the GPU grouping: ranks span identical GPUs only, and "identical" was the same name
and the same memory.total. ECC on a GDDR card keeps 1/16 of its memory for check bits (an RTX A6000 shows
49140 MiB with ECC off, 46068 MiB with it on), so one card of four with ECC set differently split the host:
serve ran tensor parallel over 2 of the 4 GPUs, SFT over 3. The same name within 10 % of memory is now one
model, sized by its smallest rank; two different cards of one name family (40 GB and 80 GB) stay apart."""

from pathlib import Path

from ktinfra.planner import load_facts, plan

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
A6000, ECC_OFF, ECC_ON = "NVIDIA RTX A6000", 49140, 46068


def host(memories: list[int], name: str = A6000) -> dict:
    facts = load_facts(FIXTURES / "facts" / "h100-amx.json")
    facts["disks"][0]["avail_bytes"] = 3 * 10**12
    facts["memory"]["total_bytes"] = 600 * 10**9
    facts["gpus"] = [
        {"index": n, "name": name, "memory_mib": mib, "compute_capability": "8.6"}
        for n, mib in enumerate(memories)
    ]
    return facts


def test_serve_spans_all_four_gpus_when_one_has_ecc_on():
    serve = plan(host([ECC_OFF, ECC_OFF, ECC_ON, ECC_OFF]), "Qwen3-30B-A3B", "serve")
    assert serve["serve"]["tensor_parallel_size"] == 4
    assert serve["serve"]["gpu_indices"] == [0, 1, 2, 3]
    assert serve["reasons"]["gpu_indices"].endswith("every GPU on the host")


def test_ranks_are_sized_by_the_gpu_with_ecc_on():
    mixed = plan(host([ECC_OFF, ECC_OFF, ECC_ON, ECC_OFF]), "Qwen3-30B-A3B", "serve")["serve"]
    all_on = plan(host([ECC_ON] * 4), "Qwen3-30B-A3B", "serve")["serve"]
    assert mixed["kt_num_gpu_experts"] == all_on["kt_num_gpu_experts"]
    assert mixed["max_total_tokens"] == all_on["max_total_tokens"]


def test_tensor_parallel_below_the_group_size_takes_the_gpus_with_ecc_off():
    # 3 GPUs: tensor parallel 2, on the two holding the most memory
    serve = plan(host([ECC_ON, ECC_OFF, ECC_OFF]), "Qwen3-30B-A3B", "serve")["serve"]
    assert (serve["tensor_parallel_size"], serve["gpu_indices"]) == (2, [1, 2])


def test_sft_data_parallel_spans_all_four():
    sft = plan(host([ECC_ON, ECC_OFF, ECC_OFF, ECC_OFF]), "Qwen3-30B-A3B", "sft")
    assert sft["sft"]["gpu_indices"] == [0, 1, 2, 3], sft["reasons"]["gpu_indices"]


def test_same_name_with_far_apart_memory_is_not_one_model():
    facts = host([81920, 40960, 40960], name="NVIDIA A100-SXM4")
    serve = plan(facts, "Qwen3-30B-A3B", "serve")
    assert serve["serve"]["gpu_indices"] == [1, 2]
    assert "must be identical GPUs" in serve["reasons"]["gpu_indices"]
