"""The tuning advisor on constructed real-format SGLang log excerpts (tests/fixtures/logs/README.md)."""

from __future__ import annotations

import io
import json
import os
import shutil
import stat
import threading
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from ktinfra import tune
from ktinfra.cli import app

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"


def oom_counts(**counts: int) -> dict:
    """summary.oom_errors with these counts, every other phase 0."""
    phases = ("prefill", "decode", "req_slots", "load", "cuda_graph", "unknown")
    return {phase: counts.get(phase, 0) for phase in phases}


def _advice(name: str, **kwargs) -> dict:
    return tune.advise(tune.parse_text((LOGS / name).read_text()), **kwargs)


def _by_param(result: dict) -> dict:
    return {r["parameter"]: r for r in result["recommendations"]}


def test_seed_lines_parse_into_fields():
    log = tune.parse_text((LOGS / "seed001.log").read_text())
    (decode,) = log.decodes
    assert (decode.running_req, decode.queue_req, decode.token_usage, decode.graph) == (229, 27, 1.0, True)
    assert decode.gen_throughput == pytest.approx(2498.69)
    assert log.config["chunked_prefill_size"] == 1024
    assert log.config["max_running_requests"] == 4096
    assert log.config["available_gpu_mem_gb"] == pytest.approx(4.64)
    assert len(log.retracts) == 1


def test_newer_decode_format_with_iteration_counter_parses():
    line = (
        "[2026-07-01 10:00:00 TP0] Decode batch [1234], #running-req: 18, #token: 16384, token usage: 0.71, "
        "cuda graph: False, gen throughput (token/s): 2520.18, #queue-req: 3"
    )
    (decode,) = tune.parse_text(line).decodes
    assert (decode.running_req, decode.queue_req, decode.token_usage, decode.graph) == (18, 3, 0.71, False)


def test_hybrid_swa_token_usage_is_the_larger_of_full_and_swa():
    """sglang-kt 0.7.2 logs a hybrid-SWA pool as `full token usage: …, swa token usage: …` and acts on
    max(full, swa): a full SWA pool with requests queued is no conservative scheduler."""
    log = tune.parse_text((LOGS / "swa-full.log").read_text())
    assert [b.token_usage for b in log.decodes][:2] == [0.93, 0.94]
    assert [b.token_usage for b in log.batches if b.kind == "prefill"] == [0.08]
    result = tune.advise(log)
    assert result["recommendations"] == [] and result["advice"] == []
    assert result["summary"]["token_usage"] == {"mean": 0.946, "max": 0.96}
    # a mamba (hybrid-SSM) line stays the full figure, as in SGLang; an unreadable swa figure is unknown
    mamba = (
        "[2025-11-11 13:02:00 TP0] Decode batch, #running-req: 8, #full token: 50000, "
        "full token usage: 0.10, mamba num: 30, mamba usage: 0.95, cuda graph: True, "
        "gen throughput (token/s): 96.00, #queue-req: 5"
    )
    swa_nan = log.decodes[0].line.replace("swa token usage: 0.93", "swa token usage: nan")
    assert [b.token_usage for b in tune.parse_lines([mamba, swa_nan]).decodes] == [0.10, None]


def test_low_free_memory_from_seed_lowers_mem_fraction():
    result = _advice("seed001.log")
    (rec,) = result["advice"]
    assert rec["parameter"] == "--mem-fraction-static"
    assert "4.64 GB" in rec["reason"]
    assert rec["evidence"][0].startswith("[2025-11-11 13:01:09 TP0] max_total_num_tokens=1522816")


def test_advice_without_a_value_is_not_counted_as_a_change(tmp_path):
    """seed001 has no server_args line: the current --mem-fraction-static is unknown, so is a new value."""
    result = _advice("seed001.log")
    assert result["recommendations"] == []
    assert (
        result["summary"]["message"]
        == "0 change(s) recommended; 1 note(s) without a value to suggest (see advice)"
    )
    assert "current value is unknown: lower it a little" in result["advice"][0]["reason"]
    out = tmp_path / "tune.yml"
    res = CliRunner().invoke(
        app, ["tune", "--log", str(LOGS / "seed001.log"), "--ansible-vars", str(out)], terminal_width=200
    )
    assert res.exit_code == 0, res.output
    assert "None -> None" not in res.output and "None" not in res.output
    assert "advice (no value to suggest)" in res.output and "--mem-fraction-static" in res.output
    assert yaml.safe_load(out.read_text()) == {"kt_serve_overrides": {}}


def test_only_the_last_server_start_counts():
    """A restart (Restart=on-failure) after the prefill OOM: the new run's 4096 chunks decode healthily, so
    the old run's OOM must not push 4096 down to 2048."""
    restarted = (LOGS / "healthy.log").read_text().replace("[2025-11-11 13:", "[2025-11-11 14:")
    text = (LOGS / "prefill-oom.log").read_text() + restarted
    result = tune.advise(tune.parse_text(text))
    assert result["recommendations"] == [] and result["advice"] == []
    summary = result["summary"]
    assert summary["earlier_runs_ignored"] == 1
    assert summary["oom_errors"] == oom_counts()
    assert summary["message"] == (
        "nothing to fix: no rule fired on this log "
        "(last server start only: 1 earlier run(s) in this log ignored)"
    )
    assert summary["server_args"]["chunked_prefill_size"] == 4096
    # the old run alone still gets its advice, and a single run reports no earlier one
    alone = _advice("prefill-oom.log")
    assert _by_param(alone)["--chunked-prefill-size"]["suggested"] == 4096
    assert alone["summary"]["earlier_runs_ignored"] == 0


def test_an_oom_after_a_restart_is_still_seen():
    restarted = (LOGS / "prefill-oom.log").read_text().replace("[2025-11-11 13:", "[2025-11-11 14:")
    text = (LOGS / "healthy.log").read_text() + restarted
    result = tune.advise(tune.parse_text(text))
    rec = _by_param(result)["--chunked-prefill-size"]
    assert (rec["current"], rec["suggested"]) == (8192, 4096)
    assert result["summary"]["earlier_runs_ignored"] == 1


def test_a_restart_with_the_same_args_keeps_the_oom_that_caused_it():
    """ktinfra-serve@.service (Restart=on-failure) restarts with the same flags after the decode OOM killed
    the scheduler (only random_seed, drawn at each start, differs): the OOM and the busy decode batches
    before it still describe these flags, so `tune --unit` must halve --max-running-requests."""
    result = _advice("oom-restart.log")
    summary = result["summary"]
    assert summary["oom_errors"] == oom_counts(decode=1)
    assert (summary["earlier_runs_carried"], summary["earlier_runs_ignored"]) == (1, 0)
    assert summary["decode_batches"] == 10 and summary["running_req_max"] == 32
    recs = _by_param(result)
    running = recs["--max-running-requests"]
    assert (running["current"], running["suggested"]) == (32, 16)
    assert "peak #running-req 32" in running["reason"]
    assert "--kt-num-gpu-experts" not in recs  # no --max-total-tokens: the pool would take what they free
    assert summary["message"] == (
        "1 change(s) recommended (last server start and 1 earlier run(s) with the same server args counted, "
        "as restarts of one configuration)"
    )


def test_a_run_with_other_args_before_the_restarts_is_still_ignored():
    text = (LOGS / "prefill-oom.log").read_text() + (LOGS / "oom-restart.log").read_text()
    result = tune.advise(tune.parse_text(text))
    summary = result["summary"]
    assert summary["oom_errors"] == oom_counts(decode=1)  # not prefill-oom's
    assert (summary["earlier_runs_carried"], summary["earlier_runs_ignored"]) == (1, 1)
    assert summary["message"].endswith(
        "(last server start and 1 earlier run(s) with the same server args counted, as restarts of one "
        "configuration; 1 earlier run(s) with other args ignored)"
    )
    # a change of flags after the restarts drops all three earlier runs, none carried
    changed = text + (LOGS / "healthy.log").read_text().replace("[2025-11-11 13:", "[2025-11-11 14:")
    summary = tune.advise(tune.parse_text(changed))["summary"]
    assert (summary["earlier_runs_carried"], summary["earlier_runs_ignored"]) == (0, 3)
    assert summary["oom_errors"] == oom_counts()


def test_healthy_log_has_nothing_to_fix():
    result = _advice("healthy.log")
    assert result["recommendations"] == []
    assert result["summary"]["message"].startswith("nothing to fix")
    assert result["summary"]["decode_batches"] == 20
    assert result["summary"]["prefill_batches"] == 1


def test_conservative_scheduler_and_spare_memory():
    recs = _by_param(_advice("conservative.log", gpu_memory_gb=80.0))
    sc = recs["--schedule-conservativeness"]
    assert (sc["current"], sc["suggested"]) == (1.0, 0.3)
    assert all("token usage: 0.4" in line or "token usage: 0.5" in line for line in sc["evidence"])
    mfs = recs["--mem-fraction-static"]
    # 14.1 GB free, keep 6.5 GB: +7.6/80 of the GPU
    assert mfs["current"] == 0.85
    assert mfs["suggested"] == pytest.approx(0.85 + 7.6 / 80, abs=0.01)
    # on a small GPU the same headroom is a large fraction: capped at 0.95
    small = _by_param(_advice("conservative.log", gpu_memory_gb=24.0))["--mem-fraction-static"]
    assert small["suggested"] == 0.95


def test_spare_memory_of_a_layerwise_prefill_server_is_not_given_to_the_pool():
    """Before: only a pool capped by --max-total-tokens kept the held MoE layer in mind; a layerwise-prefill
    server sized by --mem-fraction-static was told to raise it into the memory its first long prompt needs."""
    text = (LOGS / "conservative.log").read_text()
    layerwise = text.replace(
        "mem_fraction_static=0.85", "mem_fraction_static=0.85, kt_gpu_prefill_token_threshold=1024"
    )
    result = tune.advise(tune.parse_text(layerwise), gpu_memory_gb=80.0)
    assert "--mem-fraction-static" not in _by_param(result)
    advice = {a["parameter"]: a for a in result["advice"]}["--mem-fraction-static"]
    assert advice["current"] == 0.85 and advice["suggested"] is None
    assert "layerwise GPU prefill (--kt-gpu-prefill-token-threshold 1024)" in advice["reason"]
    off = text.replace(
        "mem_fraction_static=0.85", "mem_fraction_static=0.85, kt_gpu_prefill_token_threshold=None"
    )
    rec = _by_param(tune.advise(tune.parse_text(off), gpu_memory_gb=80.0))["--mem-fraction-static"]
    assert rec["suggested"] == pytest.approx(0.85 + 7.6 / 80, abs=0.01) and "layerwise" not in rec["reason"]


def test_without_server_args_spare_memory_advice_says_the_held_layer_is_unknown():
    """A log whose start rotated away (no server_args line): the pool advice says that a layerwise prefill,
    if the server runs one, still needs memory that is free now."""
    text = "\n".join(
        line for line in (LOGS / "conservative.log").read_text().splitlines() if "server_args=" not in line
    )
    result = tune.advise(tune.parse_text(text), gpu_memory_gb=80.0)
    advice = {a["parameter"]: a for a in result["advice"]}["--mem-fraction-static"]
    assert advice["suggested"] is None and "raise it a little" in advice["reason"]
    assert (
        "whether this server runs layerwise GPU prefill (--kt-gpu-prefill-token-threshold) is unknown"
        in (advice["reason"])
    )
    short = text.replace("available_gpu_mem=14.10 GB", "available_gpu_mem=3.10 GB")
    low = {a["parameter"]: a for a in tune.advise(tune.parse_text(short))["advice"]}["--mem-fraction-static"]
    assert "layerwise" not in low["reason"]  # shrinking the pool is right whatever the prefill does


def test_requests_queued_at_the_running_cap_are_not_a_conservativeness_problem():
    """A busy ktinfra server: 8 of 9 decode lines at its planned cap of 16 running requests, 9 queued, KV
    a third full. SGLang admits nothing at the cap whatever its conservativeness, so lowering it to 0.3 is
    no fix; the output says the cap is the limit, as an observation, not a change. The pool the cap cannot
    fill is memory for GPU experts (SGLang sizes it after the weights), the one change."""
    result = _advice("capped-queue.log")
    assert [(r["parameter"], r["current"], r["suggested"]) for r in result["recommendations"]] == [
        ("--kt-num-gpu-experts", 4, 8)
    ]
    assert "cap of 16 and the KV pool never went above" in result["recommendations"][0]["reason"]
    assert result["advice"] == []
    (seen,) = result["summary"]["observations"]
    assert seen["observation"].startswith(
        "8 of 9 decode batches ran at the --max-running-requests cap of 16 with token usage < 0.9 while "
        "requests were queued: the cap, not the scheduler's conservativeness"
    )
    assert len(seen["evidence"]) == 5 and all("#running-req: 16," in line for line in seen["evidence"])
    assert result["summary"]["message"] == (
        "1 change(s) recommended; 1 observation(s), no change (see observations)"
    )
    assert tune.ansible_vars(result) == {"kt_serve_overrides": {"kt_num_gpu_experts": 8}}
    res = CliRunner().invoke(app, ["tune", "--log", str(LOGS / "capped-queue.log")], terminal_width=200)
    assert res.exit_code == 0 and "observations (no change)" in res.output


def test_the_same_queue_below_a_higher_cap_still_lowers_conservativeness():
    text = (
        (LOGS / "capped-queue.log").read_text().replace("max_running_requests=16", "max_running_requests=64")
    )
    result = tune.advise(tune.parse_text(text))
    sc = _by_param(result)["--schedule-conservativeness"]
    assert (sc["current"], sc["suggested"]) == (1.0, 0.3)
    assert sc["reason"].startswith("8 of 9 decode batches had token usage < 0.9 while requests were queued")
    assert result["summary"]["observations"] == []
    # lines at the cap are left out of the share: 3 of 4 below it still fire, and the reason says so
    lines = (LOGS / "capped-queue.log").read_text().splitlines()
    below = [line.replace("#running-req: 16,", "#running-req: 15,") for line in lines[-3:]]
    sc = _by_param(tune.advise(tune.parse_lines(lines + below)))["--schedule-conservativeness"]
    assert sc["reason"].startswith(
        "3 of 4 decode batches below the --max-running-requests cap of 16 had token usage < 0.9"
    )


def test_mem_fraction_without_gpu_size_moves_in_small_step():
    mfs = _by_param(_advice("conservative.log"))["--mem-fraction-static"]
    assert mfs["suggested"] == pytest.approx(0.87)


def test_frequent_retraction_raises_conservativeness():
    sc = _by_param(_advice("retract.log"))["--schedule-conservativeness"]
    assert sc["suggested"] == 1.3
    assert all("KV cache pool is full" in line for line in sc["evidence"])


def test_prefill_oom_shrinks_chunked_prefill():
    result = _advice("prefill-oom.log")
    rec = _by_param(result)["--chunked-prefill-size"]
    assert (rec["current"], rec["suggested"]) == (8192, 4096)
    assert any("Prefill out of memory" in line for line in rec["evidence"])
    assert result["summary"]["oom_errors"]["prefill"] == 1  # allocator error + its traceback: one event
    assert result["summary"]["oom_errors"]["decode"] == 0


def test_decode_oom_halves_running_requests_not_gpu_experts_of_an_uncapped_pool():
    """Without --max-total-tokens SGLang sizes the KV pool into whatever fewer experts free, so halving them
    gives activations nothing (model_runner_kv_cache_mixin.profile_max_num_token)."""
    recs = _by_param(_advice("decode-oom.log"))
    mrr = recs["--max-running-requests"]
    assert (mrr["current"], mrr["suggested"]) == (48, 24)
    assert "CUDA out of memory" in mrr["evidence"][0]
    assert "--kt-num-gpu-experts" not in recs
    assert "--chunked-prefill-size" not in recs


def test_idle_client_and_missing_cuda_graphs():
    recs = _by_param(_advice("idle-client.log"))
    rate = recs["request rate (client)"]
    message = _advice("idle-client.log")["summary"]["message"]  # an idle client: no expert change
    assert message.startswith("1 change(s) recommended; 1 for the client (request rate)"), message
    assert "stayed 0 on 14 of 14" in rate["reason"]
    graph = recs["--cuda-graph-max-bs"]
    assert (graph["current"], graph["suggested"]) == (160, 256)
    assert graph["evidence"][0].endswith("152, 160]")


def test_log_without_scheduler_lines_says_so():
    result = tune.advise(tune.parse_text("hello\nworld\n"))
    assert result["recommendations"] == []
    assert "no SGLang scheduler lines" in result["summary"]["message"]


def test_cli_json_shape_and_ansible_vars(tmp_path):
    out = tmp_path / "vars" / "tune.yml"
    res = CliRunner().invoke(
        app, ["tune", "--log", str(LOGS / "decode-oom.log"), "--json", "--ansible-vars", str(out)]
    )
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert set(data) == {"recommendations", "advice", "summary"}
    for rec in data["recommendations"]:
        assert set(rec) == {"parameter", "current", "suggested", "reason", "evidence"}
    written = yaml.safe_load(out.read_text())
    assert written == {"kt_serve_overrides": {"max_running_requests": 24}}


def test_cli_rejects_missing_log_and_writes_nothing(tmp_path):
    out = tmp_path / "tune.yml"
    res = CliRunner().invoke(app, ["tune", "--log", str(tmp_path / "nope.log"), "--ansible-vars", str(out)])
    assert res.exit_code == 1
    assert "log file not found" in res.output
    assert not out.exists()


def test_cli_needs_exactly_one_source():
    res = CliRunner().invoke(app, ["tune"])
    assert res.exit_code == 1
    assert "exactly one of --log FILE or --unit NAME" in res.output


def test_separate_oom_events_are_counted_separately():
    oom = "[2025-11-11 13:05:00 TP0] Decode out of memory. Try to lower your batch size."
    filler = ['[2025-11-11 13:05:01] INFO:     127.0.0.1:1 - "POST /generate HTTP/1.1" 200 OK'] * 40
    log = tune.parse_lines([oom, *filler, oom])
    assert [o.phase for o in log.ooms] == ["decode", "decode"]


def test_an_oom_with_its_radix_tree_dump_is_one_event():
    """sglang-kt 0.7.2 logs `Prefill out of memory`, prints the radix tree (one line a node, here 41), then
    the scheduler's traceback ends in `RuntimeError: Prefill out of memory`: one OOM, not two."""
    result = _advice("prefill-oom-radix.log")
    assert result["summary"]["oom_errors"] == oom_counts(prefill=1)
    rec = _by_param(result)["--chunked-prefill-size"]
    assert (rec["current"], rec["suggested"]) == (4096, 2048)
    assert rec["reason"].startswith("1 out-of-memory error(s) during prefill")
    assert rec["evidence"] == [
        "[2025-11-11 13:01:42 TP0] Prefill out of memory. Try to lower your batch size."
    ]


def test_a_runtime_error_after_another_event_or_of_another_phase_is_a_new_oom():
    error = "[2025-11-11 13:05:00 TP0] Decode out of memory. Try to lower your batch size."
    decode = (
        "[2025-11-11 13:05:01 TP0] Decode batch, #running-req: 8, #token: 9000, token usage: 0.97, "
        "cuda graph: True, gen throughput (token/s): 90.00, #queue-req: 0"
    )
    raised = "RuntimeError: Decode out of memory. Try to lower your batch size."
    tree = ["   64 [1, 2, 3] r=0"] * 40
    assert len(tune.parse_lines([error, *tree, raised]).ooms) == 1
    assert len(tune.parse_lines([error, *tree, decode, raised]).ooms) == 2
    assert len(tune.parse_lines([error, decode, error]).ooms) == 2  # the decode line ended the first
    other = tune.parse_lines([error, *tree, raised.replace("Decode", "Prefill")])
    assert [o.phase for o in other.ooms] == ["decode", "prefill"]


@pytest.mark.parametrize(
    ("journal", "load_state", "expected"),
    [
        ("", "not-found", "unit nosuch.service not found: systemd does not know it"),
        ("-- No entries --\n", None, "unit nosuch.service not found: the journal has no lines for it"),
        ("", "loaded", None),  # a real unit that logged nothing yet: read as an empty log
        ("[2025-11-11 13:00:40] hello\n", "not-found", None),  # a transient unit that already exited
    ],
)
def test_missing_unit_decision(journal, load_state, expected):
    problem = tune.missing_unit("nosuch.service", journal, load_state)
    assert problem == expected if expected is None else problem.startswith(expected)


@pytest.mark.skipif(not shutil.which("journalctl"), reason="reads the journal with the real journalctl")
def test_cli_unit_that_does_not_exist_fails(tmp_path):
    # the real journalctl (and systemctl where it is asked): no unit of this name has any journal lines,
    # whether systemd runs here or not ("-- No entries --", or no journal files at all)
    out = tmp_path / "tune.yml"
    res = CliRunner().invoke(app, ["tune", "--unit", "nosuch.service", "--ansible-vars", str(out)])
    assert res.exit_code == 1
    assert res.output.startswith("error: unit nosuch.service not found: "), res.output
    assert len(res.output.splitlines()) == 1 and not out.exists()


@pytest.mark.parametrize("case", ["directory", "under a file"])
def test_cli_ansible_vars_path_that_cannot_be_a_file(tmp_path, case):
    afile = tmp_path / "afile"
    afile.write_text("keep\n")
    target = tmp_path if case == "directory" else afile / "x.yml"
    res = CliRunner().invoke(
        app, ["tune", "--log", str(LOGS / "decode-oom.log"), "--ansible-vars", str(target)]
    )
    assert res.exit_code == 1, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit)
    message = "is a directory" if case == "directory" else f"{afile} is not a directory"
    assert res.output.startswith("error: --ansible-vars") and message in res.output
    assert afile.read_text() == "keep\n" and sorted(p.name for p in tmp_path.iterdir()) == ["afile"]


def test_cli_ansible_vars_writes_through_a_link_keeps_the_mode_and_refuses_a_pipe(tmp_path):
    """Before: a link and a FIFO were replaced by regular 0600 files (as root: /dev/full too), and a 0644
    file became 0600."""
    real, link, plain, pipe = (tmp_path / n for n in ("real.yml", "link.yml", "plain.yml", "pipe"))
    real.write_text("keep: 1\n")
    link.symlink_to("real.yml")
    plain.write_text("old: 1\n")
    plain.chmod(0o644)
    os.mkfifo(pipe)
    tune_vars = ["tune", "--log", str(LOGS / "decode-oom.log"), "--ansible-vars"]
    for target in (link, plain):
        res = CliRunner().invoke(app, [*tune_vars, str(target)])
        assert res.exit_code == 0, res.output
    assert link.is_symlink() and "kt_serve_overrides" in real.read_text()
    assert (plain.stat().st_mode & 0o777) == 0o644 and "kt_serve_overrides" in plain.read_text()
    res = CliRunner().invoke(app, [*tune_vars, str(pipe)])
    assert res.exit_code == 1 and "is not a regular file" in res.output and stat.S_ISFIFO(pipe.stat().st_mode)
    (tmp_path / "loop.yml").symlink_to("loop.yml")
    res = CliRunner().invoke(app, [*tune_vars, str(tmp_path / "loop.yml")])
    assert res.exit_code == 1 and "leads back to itself" in res.output
    res = CliRunner().invoke(app, [*tune_vars, str(tmp_path / ("x" * 300 + ".yml"))])
    assert res.exit_code == 1 and "File name too long" in res.output and "Traceback" not in res.output


# --- an MLA pool capped by --max-total-tokens (ktinfra's DeepSeek/Kimi plans) ---------------------------
def test_kv_pool_allocation_line_parses():
    log = tune.parse_text((LOGS / "mla-capped.log").read_text())
    assert log.kv_pool == {"tokens": 158784, "gib": 10.39}
    assert (log.server_args["max_total_tokens"], log.server_args["page_size"]) == (158829, 64)
    mha = "[2026-11-20 09:00:00 TP0] KV Cache is allocated. #tokens: 1000, K size: 0.25 GB, V size: 0.25 GB"
    assert tune.parse_text(mha).kv_pool == {"tokens": 1000, "gib": 0.5}


def test_a_capped_pool_grows_by_its_tokens_not_by_mem_fraction(tmp_path):
    result = _advice("mla-capped.log", gpu_memory_gb=80.0)
    recs = _by_param(result)
    assert "--mem-fraction-static" not in recs  # it cannot move a pool --max-total-tokens sizes
    rec = recs["--max-total-tokens"]
    per_token = 10.39 / 158784  # GiB per token, from the allocation line
    expected = int((158829 + (14.20 - 6.5) / per_token) // 64 * 64)
    assert (rec["current"], rec["suggested"]) == (158829, expected)
    assert rec["suggested"] % 64 == 0 and 270_000 < rec["suggested"] < 280_000
    assert "give 7.70 GB to the pool" in rec["reason"]
    assert any("KV Cache is allocated" in line for line in rec["evidence"])
    assert result["summary"]["kv_pool"] == {"tokens": 158784, "gib": 10.39}
    assert _advice("healthy.log")["summary"]["kv_pool"] is None  # no allocation line in that excerpt
    out = tmp_path / "tune.yml"
    tune.write_vars(result, out)
    assert yaml.safe_load(out.read_text())["kt_serve_overrides"]["max_total_tokens"] == expected


def test_a_capped_pool_with_layerwise_prefill_is_not_grown_into_the_held_layer():
    """Before: the memory still free at start (where the first long prompt loads one MoE layer, which the plan
    keeps out of the pool) was advised into --max-total-tokens."""
    text = (
        (LOGS / "mla-capped.log")
        .read_text()
        .replace("max_total_tokens=158829", "max_total_tokens=158829, kt_gpu_prefill_token_threshold=2048")
    )
    result = tune.advise(tune.parse_text(text), gpu_memory_gb=80.0)
    assert "--max-total-tokens" not in _by_param(result)
    advice = {a["parameter"]: a for a in result["advice"]}["--max-total-tokens"]
    assert advice["suggested"] is None and "--kt-gpu-prefill-token-threshold 2048" in advice["reason"]
    short = text.replace("available_gpu_mem=14.20 GB", "available_gpu_mem=3.10 GB")
    assert _by_param(tune.advise(tune.parse_text(short)))["--max-total-tokens"]["suggested"] < 158829


def test_a_capped_pool_short_of_activation_memory_shrinks():
    text = (
        (LOGS / "mla-capped.log")
        .read_text()
        .replace("available_gpu_mem=14.20 GB", "available_gpu_mem=3.10 GB")
    )
    rec = _by_param(tune.advise(tune.parse_text(text)))["--max-total-tokens"]
    assert rec["suggested"] < 158829 and "take 3.40 GB from the pool" in rec["reason"]


def test_a_pool_the_profile_sized_still_moves_mem_fraction():
    """--max-total-tokens above what the profile found: the pool is the profile's, so is the advice."""
    text = (LOGS / "mla-capped.log").read_text().replace("max_total_tokens=158829", "max_total_tokens=400000")
    recs = _by_param(tune.advise(tune.parse_text(text), gpu_memory_gb=80.0))
    assert "--max-total-tokens" not in recs and "--mem-fraction-static" in recs


def test_a_log_past_the_read_limit_is_read_from_its_tail(tmp_path, monkeypatch):
    """Before: the whole file was read (an 8 GB log took 2.5x its size in memory)."""
    monkeypatch.setattr(tune, "MAX_LOG_BYTES", 64 << 10)
    text = (LOGS / "decode-oom.log").read_text()
    big = tmp_path / "big.log"
    big.write_text("x" * (1 << 20) + "\n" + text)
    assert len(text.encode()) < 64 << 10
    assert tune.read_log_file(big) == text
    assert tune.advise(tune.parse_text(tune.read_log_file(big)), gpu_memory_gb=80.0) == tune.advise(
        tune.parse_text(text), gpu_memory_gb=80.0
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--unit=--help"], "error: --unit '--help' is not a unit name"),  # systemctl printed its help: "ok"
        (["--log", "/dev/zero"], "error: log file /dev/zero is not a regular file or a pipe"),
        (
            ["--log", "x" * 300 + ".log"],
            "error: cannot read log file " + "x" * 300 + ".log: File name too long",
        ),
    ],
)
def test_log_sources_that_are_no_log_are_one_error_line(args, message):
    res = CliRunner().invoke(app, ["tune", *args])
    assert res.exit_code == 1 and res.output.replace("\n", "") == message


def test_a_gpu_smaller_than_what_the_log_says_was_free_is_refused():
    """Before: --gpu-memory-gb 1 with 14.10 GB free after loading still suggested mem fraction 0.95."""
    res = CliRunner().invoke(app, ["tune", "--log", str(LOGS / "conservative.log"), "--gpu-memory-gb", "1"])
    assert res.exit_code == 1
    assert res.output.startswith(
        "error: --gpu-memory-gb 1 is less than the 14.1 GB the log says were still free"
    )
    ok = CliRunner().invoke(app, ["tune", "--log", str(LOGS / "conservative.log"), "--gpu-memory-gb", "24"])
    assert ok.exit_code == 0, ok.output


def test_a_log_from_a_pipe_or_standard_input_is_read(tmp_path):
    """Before: `--log <(docker logs sglang 2>&1)` and `--log -` were refused ("not a regular file"), so a log
    held by docker, kubectl or a remote journal had to be saved to a file first."""
    text = (LOGS / "decode-oom.log").read_text()
    expected = CliRunner().invoke(app, ["tune", "--log", str(LOGS / "decode-oom.log"), "--json"])
    assert expected.exit_code == 0, expected.output
    res = CliRunner().invoke(app, ["tune", "--log", "-", "--json"], input=text)
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout) == json.loads(expected.stdout)
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    writer = threading.Thread(target=pipe.write_text, args=(text,))
    writer.start()
    res = CliRunner().invoke(app, ["tune", "--log", str(pipe), "--json"])
    writer.join(timeout=30)
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout) == json.loads(expected.stdout)


def test_a_piped_log_keeps_only_its_tail(monkeypatch):
    monkeypatch.setattr(tune, "MAX_LOG_BYTES", 1000)
    monkeypatch.setattr(tune, "READ_CHUNK", 64)
    lines = [f"line {i:04d}" for i in range(500)]
    data = ("\n".join(lines) + "\n").encode()
    text = tune._read_stream(io.BytesIO(data), "test")
    kept = text.splitlines()
    assert kept[-1] == "line 0499" and len(text.encode()) <= 1000
    assert kept == lines[-len(kept) :]  # whole lines only: the cut first one is dropped
    assert tune._read_stream(io.BytesIO(b"a\nb\n"), "test") == "a\nb\n"
