"""Bench maths and the capacity search algorithm; the HTTP path runs against a real server in
tests/integration/operate."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from ktinfra import bench
from ktinfra.bench.client import _payload
from ktinfra.bench.reply import Stream, _usage
from ktinfra.cli import app


def test_percentile_matches_linear_interpolation():
    values = [10.0, 20.0, 30.0, 40.0]
    assert bench.percentile(values, 50) == pytest.approx(25.0)
    assert bench.percentile(values, 99) == pytest.approx(39.7)
    assert bench.percentile([5.0], 95) == 5.0


def _result(ok=True, latency=2.0, ttft=0.5, out=20, prompt=100, itl=(0.05, 0.1)):
    return bench.RequestResult(
        ok=ok,
        start=0.0,
        latency_s=latency,
        ttft_s=ttft,
        output_tokens=out,
        prompt_tokens=prompt,
        itl_s=list(itl),
    )


def test_summarize_throughput_latency_and_user_speed():
    results = [_result(latency=2.0, out=20), _result(latency=4.0, out=20), _result(ok=False, out=0)]
    results[2].error = "HTTP 500: boom"
    m = bench.summarize(results, concurrency=3, wall_s=4.0)
    assert (m["completed"], m["failed"], m["errors"]) == (2, 1, ["HTTP 500: boom"])
    assert m["request_throughput"] == pytest.approx(0.5)
    assert m["output_throughput"] == pytest.approx(10.0)
    assert m["input_throughput"] == pytest.approx(50.0)
    assert m["user_tps"] == {"min": 5.0, "min_exact": 5.0, "median": 7.5, "mean": 7.5}
    # TPOT excludes the first token: (2.0 - 0.5) / 19 s and (4.0 - 0.5) / 19 s
    assert m["tpot_ms"]["mean"] == pytest.approx(1000 * (1.5 / 19 + 3.5 / 19) / 2, abs=0.01)
    assert m["ttft_ms"]["p99"] == pytest.approx(500.0)
    assert m["itl_ms"]["median"] == pytest.approx(75.0)


def _synthetic_level(users: int, single_user_tps: float = 100.0) -> dict:
    """A server whose per-user speed is shared evenly among users (pure function of the level)."""
    tps = single_user_tps / users
    return {"concurrency": users, "completed": users, "failed": 0, "user_tps": {"min": tps, "median": tps}}


@pytest.mark.parametrize(("min_tps", "capacity"), [(20.0, 5), (12.5, 8), (40.0, 2), (101.0, 0)])
def test_capacity_search_finds_largest_passing_level(min_tps, capacity):
    probed = []

    def run(users):
        probed.append(users)
        return _synthetic_level(users)

    result = bench.search(run, min_tps=min_tps, max_users=64)
    assert result["capacity"] == capacity
    assert result["first_failing"] == capacity + 1
    assert probed == sorted(set(probed), key=probed.index)  # no level measured twice
    assert len(probed) <= 2 * 7  # doubling + bisection, not a linear scan


def test_capacity_search_stops_at_max_users():
    result = bench.search(_synthetic_level, min_tps=1.0, max_users=6)
    assert (result["capacity"], result["first_failing"], result["limited_by_max_users"]) == (6, None, True)
    assert [lv["concurrency"] for lv in result["levels"]] == [1, 2, 4, 6]


def test_failed_requests_fail_a_level():
    level = _synthetic_level(1)
    level["failed"] = 1
    assert not bench.level_passes(level, 1.0)


def test_sglang_native_payload_and_cumulative_stream_text():
    sc = bench.Scenario(url="http://127.0.0.1:30000", model="m", api="sglang", gen_tokens=7, ignore_eos=True)
    path, body = _payload(sc, "hi")
    assert path == "/generate"
    assert body["sampling_params"] == {"max_new_tokens": 7, "temperature": 0.0, "ignore_eos": True}
    lines = [b'data: {"text": "Hello"}', b'data: {"text": "Hello wor"}', b"data: [DONE]"]
    assert len(list(Stream(sc).outputs(iter(lines)))) == 2
    assert _usage(sc, {"meta_info": {"prompt_tokens": 3, "completion_tokens": 2}}) == (3, 2)


def test_openai_payload_leaves_out_sglang_fields_unless_asked():
    sc = bench.Scenario(url="http://127.0.0.1:8000", model="m", gen_tokens=5)
    path, body = _payload(sc, "hi")
    assert path == "/v1/chat/completions"
    assert "ignore_eos" not in body and body["max_tokens"] == 5
    assert body["stream_options"] == {"include_usage": True}


def test_prompt_has_requested_word_count_and_is_reproducible():
    assert len(bench.make_prompt(50, seed=1).split()) == 50
    assert bench.make_prompt(50, seed=1) == bench.make_prompt(50, seed=1)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--users", "2", "--capacity", "--min-tps", "1"], "exactly one of --users N or --capacity"),
        (["--capacity"], "--capacity needs --min-tps"),
        (["--users", "1", "--requests", "1", "--duration", "1"], "at most one of --requests or --duration"),
        (["--users", "1", "--api", "grpc"], "api must be one of"),
    ],
)
def test_cli_rejects_bad_arguments_before_sending(args, message):
    res = CliRunner().invoke(app, ["bench", "--url", "http://127.0.0.1:9", "--model", "m", *args])
    assert res.exit_code == 1
    assert message in " ".join(res.output.split())


@pytest.mark.parametrize("model", ["", " "])
def test_an_empty_model_is_refused_before_sending(model, monkeypatch):
    """Before: --model '' was sent in every request (lora check --model '' was refused)."""
    monkeypatch.setattr(bench, "run_level", lambda *a, **k: pytest.fail("no request may be sent"))
    for extra in ([], ["--json"]):
        res = CliRunner().invoke(app, ["bench", "--url", "http://127.0.0.1:9", "--model", model, *extra])
        assert res.exit_code == 1 and res.stdout == "" and res.stderr == "error: --model is empty\n"
