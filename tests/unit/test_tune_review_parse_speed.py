"""The faster log parsing (datetime() from the stamp's numbers in place of strptime; a substring check before
the OOM, CUDA-graph-off and weight-loading searches) reads the same events: the same stamps and the same
refused stamps, and every line those patterns found is still searched. benchmarks/tune_parse.py times it."""

from __future__ import annotations

import re
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest

from ktinfra.tune import parse
from ktinfra.tune.parse import parse_text

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "stamp",
    [
        "2025-11-11 13:05:00",
        "2024-02-29 23:59:59",  # a leap day
        "2025-02-29 10:00:00",  # no such day
        "2025-13-01 10:00:00",  # month 13
        "2025-00-10 10:00:00",
        "2025-01-32 10:00:00",
        "2025-01-01 24:00:00",
        "2025-01-01 10:60:00",
        "2025-01-01 10:00:60",  # strptime reads a leap second 60, and datetime() then refuses it
        "0000-01-01 00:00:00",
    ],
)
def test_a_stamp_reads_as_strptime_read_it(stamp):
    try:
        expected = datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S")
    except ValueError:
        expected = None
    for line in (f"[{stamp} TP0] Decode batch. #running-req: 1", f"[{stamp}.123 DP0 TP1] x"):
        assert parse._timestamp(line) == expected


def _alternatives(pattern: re.Pattern) -> list[str]:
    """The top-level alternatives of a pattern, as literal texts (groups of alternatives expanded)."""
    out = []
    for text in re.split(r"\|(?![^(]*\))", pattern.pattern):
        if group := re.search(r"\(([^)]*)\)", text):
            out += [
                text[: group.start()] + choice + text[group.end() :] for choice in group.group(1).split("|")
            ]
        else:
            out.append(text)
    return [re.sub(r"\\(.)", r"\1", re.sub(r"\\b", "", text)) for text in out]


@pytest.mark.parametrize(
    ("pattern", "needle"),
    [
        (parse._OOM_TEXT, parse._OOM_NEEDLE),
        (parse._GRAPH_OFF, parse._GRAPH_OFF_NEEDLE),
        (parse._LOAD, parse._LOAD_NEEDLE),
    ],
)
def test_every_match_holds_the_text_checked_first(pattern, needle):
    # a line without the needle is never searched: every alternative of the pattern must contain it
    texts = _alternatives(pattern)
    assert len(texts) >= 2, texts
    for text in texts:
        assert pattern.search(f"[2025-11-11 13:05:00 TP0] {text} tail"), text
        assert needle in text, text


def test_each_oom_text_is_still_an_oom_event():
    lines = [
        "[2025-11-11 13:05:00 TP0] " + text
        for text in _alternatives(parse._OOM_TEXT)
        + ["Load weight begin. avail mem=10 GB", "Load weight end. type=X", "Cuda graph is disabled"]
    ]
    log = parse_text("\n".join("\n".join([line] + ["filler"] * 40) for line in lines))
    assert len(log.ooms) == len(_alternatives(parse._OOM_TEXT)) == 7
    assert log.graph_off_line == lines[-1]


def test_the_benchmark_script_runs(tmp_path):
    run = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "tune_parse.py"), "--mib", "0.05", "--reps", "1"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert re.fullmatch(r"0\.\d MiB, \d+ lines: parsed in \d+\.\d\d s CPU \(best of 1\)\n", run.stdout)
