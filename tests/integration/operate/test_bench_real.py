"""`ktinfra bench` against a real OpenAI-compatible server (transformers serve, tiny Qwen3-MoE, CPU)."""

from __future__ import annotations

import json
import subprocess
import sys

from ktinfra import bench

GEN = 16


def scenario(server, model, **kw) -> bench.Scenario:
    return bench.Scenario(
        url=server.url, model=str(model), prompt_tokens=32, gen_tokens=GEN, timeout_s=120, **kw
    )


def test_streaming_level_measures_every_token(tiny_server, tiny_model):
    level = bench.run_level(scenario(tiny_server, tiny_model), users=2, requests_per_user=2)
    assert (level["completed"], level["failed"]) == (4, 0), level["errors"]
    assert level["total_output_tokens"] == 4 * GEN  # usage reported by the server
    assert level["total_input_tokens"] >= 4 * 32  # prompt + chat template, counted by the server
    assert level["ttft_ms"]["median"] < level["e2e_latency_ms"]["median"]
    assert level["tpot_ms"]["mean"] > 0 and level["itl_ms"]["p99"] >= level["itl_ms"]["median"]
    assert level["output_throughput"] > 0 and level["user_tps"]["min"] > 0


def test_non_streaming_level(tiny_server, tiny_model):
    level = bench.run_level(scenario(tiny_server, tiny_model, stream=False), users=1, requests_per_user=2)
    assert (level["completed"], level["total_output_tokens"]) == (2, 2 * GEN)
    assert level["itl_ms"] is None  # no per-token timing without streaming


def test_duration_bounds_a_level(tiny_server, tiny_model):
    level = bench.run_level(
        scenario(tiny_server, tiny_model), users=1, requests_per_user=None, duration_s=1.0
    )
    assert level["completed"] >= 1
    assert level["duration_s"] < 1.0 + 60  # stops starting requests at the deadline


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ktinfra", "bench", *args], capture_output=True, text=True, timeout=300
    )


def test_capacity_search_and_plot(tiny_server, tiny_model, tmp_path):
    single = bench.run_level(scenario(tiny_server, tiny_model), users=1, requests_per_user=1)
    # well below one user's speed: the box is shared (CI's lanes run at once), and 1/4 failed once at level 1
    # while another pytest ran beside CI
    min_tps = round(single["user_tps"]["min"] / 10, 2)
    png = tmp_path / "capacity.png"
    proc = run_cli(
        "--url", tiny_server.url, "--model", str(tiny_model), "--capacity", "--min-tps", str(min_tps),
        "--max-users", "6", "--prompt-tokens", "32", "--gen-tokens", str(GEN), "--requests", "1",
        "--plot", str(png), "--json", "--no-ignore-eos",  # transformers serve refuses SGLang's ignore_eos
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    levels = {lv["concurrency"]: lv for lv in result["levels"]}
    assert result["capacity"] >= 1
    assert all(levels[n]["user_tps"]["min"] >= min_tps for n in levels if n <= result["capacity"])
    if result["first_failing"] is not None:
        assert result["first_failing"] == result["capacity"] + 1
        assert not levels[result["first_failing"]]["pass"]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_server_rejection_is_reported(tiny_server):
    proc = run_cli(
        "--url", tiny_server.url, "--model", "not-the-pinned-model", "--users", "1", "--requests", "1"
    )
    assert proc.returncode == 1
    assert "HTTP 400" in proc.stdout


def test_a_server_refusing_ignore_eos_gets_the_way_out_named(tiny_server, tiny_model):
    """--capacity asks for fixed-length replies (SGLang's ignore_eos) by default; a server that refuses the
    field fails every request: the error says which flag turns it off."""
    proc = run_cli(
        "--url", tiny_server.url, "--model", str(tiny_model), "--capacity", "--min-tps", "0.01",
        "--max-users", "1", "--prompt-tokens", "8", "--gen-tokens", "4", "--requests", "1",
    )  # fmt: skip
    assert proc.returncode == 1
    assert "--no-ignore-eos" in proc.stderr, proc.stderr
