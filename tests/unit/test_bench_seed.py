"""`ktinfra bench` draws a new prompt seed each run (recorded in the results), so a second run against the
same server does not find its prompts in SGLang's prefix (radix) cache; `--seed` repeats a run's prompts.
Before, every run sent the same prompts (seed = the level's user count), and a repeated run's TTFT and
throughput were those of cached prefixes. Run against a real loopback server."""

from __future__ import annotations

import json

from test_bench_http import DONE, USAGE, delta, sse
from typer.testing import CliRunner

from ktinfra.cli import app


def _run(server, *extra: str) -> tuple[dict, list[str]]:
    prompts: list[str] = []

    def reply(h, body):
        prompts.append(body["messages"][0]["content"])
        sse(h, [delta("a"), USAGE, DONE])

    server.reply = reply
    args = ["bench", "--url", server.url, "--model", "m", "--users", "2", "--requests", "2", "--json", *extra]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout), sorted(prompts)


def test_each_run_draws_new_prompts_and_records_its_seed(server):
    first, prompts_a = _run(server)
    second, prompts_b = _run(server)
    assert len(prompts_a) == len(set(prompts_a)) == 4
    assert not set(prompts_a) & set(prompts_b)
    seeds = first["scenario"]["seed"], second["scenario"]["seed"]
    assert all(isinstance(s, int) and s >= 0 for s in seeds) and seeds[0] != seeds[1]
    # the recorded seed repeats the first run's prompts
    again, prompts_c = _run(server, "--seed", str(seeds[0]))
    assert prompts_c == prompts_a and again["scenario"]["seed"] == seeds[0]


def test_a_negative_seed_is_refused_before_any_request(server):
    result = CliRunner().invoke(
        app, ["bench", "--url", server.url, "--model", "m", "--users", "1", "--seed", "-1"]
    )
    assert result.exit_code != 0 and server.requests == 0
