"""`ktinfra tune` on odd logs: server_args values that are None, junk or non-finite, nan/inf numbers in the
scheduler lines, and a bad --gpu-memory-gb. Each log is a fixture (tests/fixtures/logs) with one value
changed, written to tmp_path; the advisor must answer (strict JSON) instead of raising."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ktinfra import tune
from ktinfra.cli import app
from ktinfra.tune.parse import TRACKED_ARGS

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"
FIXTURES = sorted(p.name for p in LOGS.glob("*.log"))
ODD_VALUES = ("None", "abc", "'auto'", "nan", "inf", "-inf", "1e400", "True", "-1", "0", "0.5", "[1, 2]",
              "9" * 400, "9" * 5000)  # fmt: skip
# the counts the parser reads from other lines than server_args
COUNT_FIELDS = (
    r"(#tokens: )\d+",
    r"(#retracted_reqs: )\d+",
    r"(max_total_num_tokens=)\d+",
    r"(context_len=)\d+",
    r"(#running-req: )\d+",
    r"(#queue-req: )\d+",
    r"(graph bs \[)\d+",
)


def _with_arg(name: str, key: str, value: str) -> str:
    """Fixture NAME with server_args KEY set to VALUE (replaced, or added at the end of the dump)."""
    text = (LOGS / name).read_text()
    line = next(x for x in text.splitlines() if "server_args=ServerArgs(" in x)
    if re.search(rf"\b{key}=", line):
        new = re.sub(rf"\b{key}=('[^']*'|\[[^\]]*\]|[^,()]+)", f"{key}={value}", line, count=1)
    else:
        new = line[: line.rindex(")")] + f", {key}={value})"
    return text.replace(line, new)


def _strict(result: dict) -> dict:
    """The result as strict JSON (no NaN/Infinity), read back."""
    return json.loads(json.dumps(result, allow_nan=False))


def _cli_json(path: Path, *extra: str) -> dict:
    res = CliRunner().invoke(app, ["tune", "--log", str(path), "--json", *extra])
    assert res.exit_code == 0, res.output
    assert res.exception is None
    return json.loads(res.stdout, parse_constant=lambda c: pytest.fail(f"non-strict JSON constant {c}"))


def _by_param(result: dict) -> dict:
    return {r["parameter"]: r for r in result["recommendations"] + result["advice"]}


@pytest.mark.parametrize("name", [n for n in FIXTURES if n != "seed001.log"])
@pytest.mark.parametrize("key", TRACKED_ARGS)
def test_every_odd_server_arg_value_gives_advice_not_a_traceback(name, key):
    for value in ODD_VALUES:
        result = tune.advise(tune.parse_text(_with_arg(name, key, value)), gpu_memory_gb=80.0)
        _strict(result)
        for rec in result["recommendations"]:
            assert isinstance(rec["suggested"], (int, float, str)) and not isinstance(rec["suggested"], bool)


def test_schedule_conservativeness_none_is_sglang_default(tmp_path):
    """The audit's sc_none.log: the retraction rule compared None with 1.3 (TypeError, exit 1, no JSON)."""
    for name, suggested in (("retract.log", 1.3), ("conservative.log", 0.3)):
        log = tmp_path / name
        log.write_text(_with_arg(name, "schedule_conservativeness", "None"))
        rec = _by_param(_cli_json(log))["--schedule-conservativeness"]
        assert (rec["current"], rec["suggested"]) == (1.0, suggested)
        assert "schedule_conservativeness=None in the log is not a number > 0: 1.0 assumed" in rec["reason"]


def test_mem_fraction_that_is_not_a_number_is_unknown(tmp_path):
    """The audit's badargs.log: mem_fraction_static=abc + 0.02 raised TypeError."""
    log = tmp_path / "badargs.log"
    log.write_text(_with_arg("conservative.log", "mem_fraction_static", "abc"))
    result = _cli_json(log, "--gpu-memory-gb", "80")
    assert "--mem-fraction-static" not in {r["parameter"] for r in result["recommendations"]}
    (note,) = [r for r in result["advice"] if r["parameter"] == "--mem-fraction-static"]
    assert (note["current"], note["suggested"]) == (None, None)
    assert "mem_fraction_static='abc', so the current value is unknown: raise it a little" in note["reason"]
    assert (
        "server_args value(s) not usable, taken as unknown: mem_fraction_static='abc'"
        in (result["summary"]["message"])
    )
    # the other rule still fires
    assert _by_param(result)["--schedule-conservativeness"]["suggested"] == 0.3


@pytest.mark.parametrize("value", ["nan", "inf", "None", "'auto'", "1.5", "0"])
def test_mem_fraction_unknown_on_an_unplaced_oom_gives_a_note(value):
    """An OOM outside prefill/decode lowers --mem-fraction-static by 0.05 only when the current is known."""
    text = _with_arg("healthy.log", "mem_fraction_static", value)
    text += '[2025-11-11 13:05:00] INFO:     127.0.0.1:5000 - "POST /generate HTTP/1.1" 200 OK\n' * 31
    text += "[2025-11-11 13:05:01 TP0] torch.OutOfMemoryError: CUDA out of memory.\n"
    result = _strict(tune.advise(tune.parse_text(text)))
    rec = _by_param(result)["--mem-fraction-static"]
    assert (rec["current"], rec["suggested"]) == (None, None)
    assert "the current value is unknown: lower it by about 0.05" in rec["reason"]
    if value in ("nan", "inf"):  # non-finite: unknown, never NaN/Infinity in the JSON
        assert result["summary"]["server_args"]["mem_fraction_static"] is None


def test_decode_oom_with_junk_limits_falls_back_to_the_peak():
    text = _with_arg("decode-oom.log", "kt_num_gpu_experts", "True")
    text = text.replace("max_running_requests=48, context_len", "context_len")  # startup line: unknown
    text = text.replace("max_running_requests=None", "max_running_requests='many'")
    result = _strict(tune.advise(tune.parse_text(text)))
    recs = _by_param(result)
    peak = result["summary"]["running_req_max"]
    assert recs["--max-running-requests"]["current"] is None
    assert recs["--max-running-requests"]["suggested"] == max(1, peak // 2)
    assert "--kt-num-gpu-experts" not in recs  # True is no expert count


def test_prefill_oom_with_chunking_off_or_unknown_suggests_4096():
    for value in ("-1", "'auto'", "nan"):
        text = _with_arg("prefill-oom.log", "chunked_prefill_size", value)
        text = text.replace("=1522816, chunked_prefill_size=8192, ", "=1522816, ")  # startup line
        rec = _by_param(tune.advise(tune.parse_text(text)))["--chunked-prefill-size"]
        assert rec["suggested"] == 4096
        assert rec["current"] == (-1 if value == "-1" else None)


def test_cuda_graph_max_bs_junk_falls_back_to_the_captured_sizes():
    text = _with_arg("idle-client.log", "cuda_graph_max_bs", "'big'")
    rec = _by_param(_strict(tune.advise(tune.parse_text(text))))["--cuda-graph-max-bs"]
    assert (rec["current"], rec["suggested"]) == (160, 256)


@pytest.mark.parametrize("key,value", [("page_size", "'x'"), ("page_size", "0"), ("max_total_tokens", "inf")])
def test_capped_pool_with_junk_page_or_cap(key, value):
    result = _strict(tune.advise(tune.parse_text(_with_arg("mla-capped.log", key, value))))
    assert result["recommendations"]


def test_nan_token_usage_is_unknown_and_json_is_strict(tmp_path):
    """The audit's nan.log: `token usage: nan` reached the summary as NaN (not JSON)."""
    log = tmp_path / "nan.log"
    text = (LOGS / "conservative.log").read_text()
    text = re.sub(r"token usage: [\d.]+", "token usage: nan", text)
    text = re.sub(r"gen throughput \(token/s\): [\d.]+", "gen throughput (token/s): inf", text)
    log.write_text(text)
    summary = _cli_json(log)["summary"]
    assert summary["token_usage"] is None and summary["gen_throughput_tok_s"] is None
    assert summary["decode_batches"] > 0


def test_non_finite_server_arg_is_unknown_not_nan():
    log = tune.parse_text(_with_arg("conservative.log", "mem_fraction_static", "nan"))
    assert log.server_args["mem_fraction_static"] is None
    log = tune.parse_text(_with_arg("conservative.log", "max_total_tokens", "1e400"))
    assert log.server_args["max_total_tokens"] is None
    # an integer beyond 2^53 is no real count (it would overflow the advisor's float arithmetic): unknown
    for value, read in (
        ("123456789012345678901234567890", None),
        (str(2**53), 2**53),
        (str(2**53 + 1), None),
    ):
        args = tune.parse_text(_with_arg("conservative.log", "max_total_tokens", value)).server_args
        assert args["max_total_tokens"] == read


@pytest.mark.parametrize(
    "line",
    [
        "[2025-11-11 13:01:09 TP0] max_total_num_tokens=10, available_gpu_mem=1.2.3 GB",
        "[2025-11-11 13:01:09 TP0] max_total_num_tokens=10, available_gpu_mem=" + "9" * 400 + " GB",
        "[2025-11-11 13:01:09 TP0] KV Cache is allocated. #tokens: 5, KV size: 1..2 GB",
        "[2025-13-45 25:61:61 TP0] Decode batch, #running-req: 1, token usage: 0.5, #queue-req: 3",
    ],
)
def test_garbled_scheduler_lines_are_skipped(line):
    result = _strict(tune.advise(tune.parse_text(line)))
    assert "available_gpu_mem_gb" not in (result["summary"]["startup"] or {})
    assert result["summary"]["kv_pool"] is None


def test_a_capped_pool_of_zero_gb_does_not_divide_by_zero():
    text = re.sub(r"KV size: [\d.]+ GB", "KV size: 0.00 GB", (LOGS / "mla-capped.log").read_text())
    rec = _by_param(_strict(tune.advise(tune.parse_text(text))))["--max-total-tokens"]
    assert rec["suggested"] is None


@pytest.mark.parametrize("value", [float("inf"), float("nan"), 0, -8.0, float("-inf")])
def test_advise_refuses_a_bad_gpu_size(value):
    with pytest.raises(ValueError, match="--gpu-memory-gb must be a finite number above 0"):
        tune.advise(tune.parse_text((LOGS / "conservative.log").read_text()), gpu_memory_gb=value)


@pytest.mark.parametrize("value", ["inf", "Infinity", "1e400", "nan", "0", "-1"])
def test_cli_refuses_a_bad_gpu_size(tmp_path, value):
    out = tmp_path / "tune.yml"
    args = ["--log", str(LOGS / "conservative.log"), f"--gpu-memory-gb={value}", "--ansible-vars", str(out)]
    res = CliRunner().invoke(app, ["tune", *args])
    assert res.exit_code == 1, res.output
    assert isinstance(res.exception, SystemExit) and "Traceback" not in res.output
    assert "--gpu-memory-gb" in res.output
    assert not out.exists()


@pytest.mark.parametrize("digits", [400, 5000])
@pytest.mark.parametrize("name", FIXTURES)
def test_a_count_of_hundreds_of_digits_is_unknown_not_a_traceback(name, digits):
    """Before: a 400-digit #tokens ended in OverflowError, a 5000-digit #retracted_reqs in a ValueError."""
    text = (LOGS / name).read_text()
    for field in COUNT_FIELDS:
        if re.search(field, text):
            odd = re.sub(field, lambda m: m.group(1) + "9" * digits, text)
            result = _strict(tune.advise(tune.parse_text(odd), gpu_memory_gb=80.0))
            assert all(abs(n) < 2**53 for n in _numbers(result)), field  # quoted log lines may hold it


def _numbers(value):
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list):
        return [n for item in value for n in _numbers(item)]
    return [value] if isinstance(value, (int, float)) and not isinstance(value, bool) else []
