"""A decode OOM under SGLang's own --max-running-requests cap (derived from the KV pool: 4096 in the tuning
guide's start-up line) at far fewer running requests: halving the cap (4096 -> 2048) changed nothing for a
server that ran out of memory at 48. The advisor halves what ran."""

from __future__ import annotations

from pathlib import Path

from ktinfra import tune

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"


def _decode_oom(cap: int) -> dict:
    text = (LOGS / "decode-oom.log").read_text()
    text = text.replace("max_running_requests=48,", f"max_running_requests={cap},")
    result = tune.advise(tune.parse_text(text))
    return {r["parameter"]: r for r in result["recommendations"]}["--max-running-requests"]


def test_a_decode_oom_far_below_sglangs_own_cap_halves_the_peak():
    rec = _decode_oom(4096)
    assert (rec["current"], rec["suggested"]) == (4096, 24)  # was 2048: no change for a peak of 48
    assert "(peak #running-req 48, below the cap of 4096)" in rec["reason"]


def test_a_decode_oom_at_the_cap_still_halves_the_cap():
    rec = _decode_oom(48)
    assert (rec["current"], rec["suggested"]) == (48, 24)
    assert "below the cap" not in rec["reason"]
