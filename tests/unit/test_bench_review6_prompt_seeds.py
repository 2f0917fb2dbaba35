"""Every prompt of a level is its own. The seed of a user's n-th prompt was a sum (level_seed * 1_000_003 +
user * 10_007 + n): user 0's request 10007 drew user 1's first prompt, the same text, which the server's
prefix cache then answered at once (a long --duration level of short replies gets there). The requests are
answered by a stand-in for send (no server needed: only the prompts they carry are looked at)."""

from __future__ import annotations

from ktinfra import bench
from ktinfra.bench import runner
from ktinfra.bench.client import RequestResult


def test_no_two_requests_of_a_level_share_a_prompt(monkeypatch):
    prompts: list[str] = []

    def answered(_session, _sc, prompt, cut_at=None):
        prompts.append(prompt)
        return RequestResult(ok=True, start=0.0, latency_s=1.0, output_tokens=1, answered=True, status=200)

    monkeypatch.setattr(runner, "send", answered)
    sc = bench.Scenario(url="http://127.0.0.1:9", model="m", prompt_tokens=20, gen_tokens=1)
    level = bench.run_level(sc, users=2, requests_per_user=10_008, seed=3)
    assert level["completed"] == len(prompts) == 20_016
    assert len(set(prompts)) == len(prompts)
