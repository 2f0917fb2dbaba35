"""`ktinfra tune --ansible-vars FILE` run again on the same file (docs/readme/operate.md: tune.yml in
host_vars, re-run after the next deploy). The kt_serve role merges kt_serve_overrides over the plan, so the
file is the tuning state: an earlier run's overrides are what the server now runs with.

Before: every run replaced the file with its own recommendations only. A second run that found nothing to fix
wrote `kt_serve_overrides: {}`, and one that tuned another flag dropped the first fix: the next deploy put the
server back on the flags that had run out of memory. A host_vars file given as FILE lost every other var in
it, and a file that was no YAML at all was replaced without a word."""

from __future__ import annotations

from pathlib import Path

import yaml
from typer.testing import CliRunner

from ktinfra.cli import app

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"


def _tune(log: str, out: Path):
    return CliRunner().invoke(app, ["tune", "--log", str(LOGS / log), "--ansible-vars", str(out), "--json"])


def test_a_second_run_keeps_the_first_runs_overrides(tmp_path):
    out = tmp_path / "host_vars" / "gpu1" / "tune.yml"
    assert _tune("decode-oom.log", out).exit_code == 0
    first = yaml.safe_load(out.read_text())["kt_serve_overrides"]
    assert first == {"max_running_requests": 24}
    # the next deploy runs with them; its log has nothing to fix
    assert _tune("healthy.log", out).exit_code == 0
    assert yaml.safe_load(out.read_text())["kt_serve_overrides"] == first
    # a run that tunes another flag adds it
    assert _tune("prefill-oom.log", out).exit_code == 0
    assert yaml.safe_load(out.read_text())["kt_serve_overrides"] == {**first, "chunked_prefill_size": 4096}


def test_a_recommended_key_takes_the_new_value_and_other_vars_stay(tmp_path):
    out = tmp_path / "gpu1.yml"
    out.write_text(
        "ansible_host: 10.0.0.7\nkt_serve_overrides:\n  max_running_requests: 48\n  context_length: 8192\n"
    )
    assert _tune("decode-oom.log", out).exit_code == 0
    assert yaml.safe_load(out.read_text()) == {
        "ansible_host": "10.0.0.7",
        "kt_serve_overrides": {"max_running_requests": 24, "context_length": 8192},
    }


def test_a_file_that_holds_no_vars_is_refused_and_left_as_it_was(tmp_path):
    for text in ("key: [unclosed\n", "- a list\n", "kt_serve_overrides: 3\n", "a: \xff\n"):
        out = tmp_path / "tune.yml"
        out.write_bytes(text.encode("latin-1"))
        res = _tune("decode-oom.log", out)
        assert res.exit_code == 1, (text, res.output)
        assert res.output.startswith("error: --ansible-vars") and "give another file" in res.output
        assert "Traceback" not in res.output
        assert out.read_bytes() == text.encode("latin-1")
        assert sorted(p.name for p in tmp_path.iterdir()) == ["tune.yml"]
    out.write_text("")  # an empty file holds no vars yet: written
    assert _tune("decode-oom.log", out).exit_code == 0
    assert yaml.safe_load(out.read_text())["kt_serve_overrides"]["max_running_requests"] == 24


def test_the_log_itself_is_named_as_the_log_not_as_a_file_without_vars(tmp_path):
    log = tmp_path / "sglang.log"
    log.write_text((LOGS / "decode-oom.log").read_text())
    res = CliRunner().invoke(app, ["tune", "--log", str(log), "--ansible-vars", str(log)])
    assert res.exit_code == 1 and "writing it would replace the log" in res.output
    assert log.read_text() == (LOGS / "decode-oom.log").read_text()
