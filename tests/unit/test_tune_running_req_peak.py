"""The peak #running-req came from decode lines alone, which SGLang prints only every --decode-log-interval
(40) iterations; its prefill lines, printed for every prefill batch, carry #running-req too
(scheduler_metrics_mixin.py log_prefill_stats). A decode OOM whose busiest logged moment was a prefill line
halved a peak it had not seen, and nothing said the peak is a sample."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from ktinfra import tune
from ktinfra.cli import app

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"
PREFILL = (
    "[2025-11-11 13:01:58 TP0] Prefill batch, #new-seq: 2, #new-token: 900, #cached-token: 0, token usage: "
    "0.98, #running-req: 56, #queue-req: 10, input throughput (token/s): 1800.00, cuda graph: False\n"
)


def _decode_oom_with_a_busier_prefill(interval: int | None = None) -> str:
    """decode-oom.log (decode lines up to 48 running, SGLang's own cap 4096) with a prefill line at 56."""
    text = (
        (LOGS / "decode-oom.log")
        .read_text()
        .replace("max_running_requests=48,", "max_running_requests=4096,")
    )
    if interval is not None:
        text = text.replace(
            "server_args=ServerArgs(", f"server_args=ServerArgs(decode_log_interval={interval}, "
        )
    mark = "[2025-11-11 13:02:02 TP0] Scheduler hit an exception"
    assert mark in text
    return text.replace(mark, PREFILL.rstrip("\n") + "\n" + mark)


def test_the_peak_counts_prefill_lines_too():
    result = tune.advise(tune.parse_text(_decode_oom_with_a_busier_prefill()))
    assert result["summary"]["running_req_max"] == 56  # was 48, the decode lines' peak
    rec = {r["parameter"]: r for r in result["recommendations"]}["--max-running-requests"]
    assert (rec["current"], rec["suggested"]) == (4096, 28)  # was 24
    assert "(peak #running-req 56, below the cap of 4096)" in rec["reason"]


def test_the_peak_is_said_to_be_sampled_at_the_server_s_interval():
    default = tune.advise(tune.parse_text(_decode_oom_with_a_busier_prefill()))["summary"]
    assert "only every 40 iterations" in default["running_req_max_note"]
    result = tune.advise(tune.parse_text(_decode_oom_with_a_busier_prefill(interval=10)))
    assert "only every 10 iterations" in result["summary"]["running_req_max_note"]
    rec = {r["parameter"]: r for r in result["recommendations"]}["--max-running-requests"]
    assert "the peak is sampled" in rec["reason"] and "only every 10 iterations" in rec["reason"]


def test_a_log_with_only_prefill_lines_has_a_peak():
    assert tune.advise(tune.parse_text(PREFILL))["summary"]["running_req_max"] == 56  # was None


def test_the_text_output_says_the_peak_is_sampled(tmp_path):
    log = tmp_path / "server.log"
    log.write_text(_decode_oom_with_a_busier_prefill())
    out = CliRunner().invoke(app, ["tune", "--log", str(log)], terminal_width=400)
    assert out.exit_code == 0, out.output
    assert "peak #running-req 56 (the peak is sampled: SGLang logs every prefill batch" in out.output
