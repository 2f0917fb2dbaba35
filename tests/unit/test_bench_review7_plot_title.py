"""The plot's title is `MODEL @ URL`, and matplotlib draws text between a pair of `$` as a math formula: a
model or URL with two `$` lost them and had the text between set in italics (`m$x$ @ http://h/$y$` drawn
as `m𝑥 @ http://h/𝑦`), and one that is not a formula (`a$\\bad{$b`) failed the plot after the load ("no plot
written": Unknown symbol: \\bad). The title's `$` are now escaped and drawn as they are. Rendered by the real
matplotlib into an SVG with its text kept as text."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib
import pytest
from test_bench_http import DONE, USAGE, delta, sse
from typer.testing import CliRunner

from ktinfra.bench.plot import plot_levels
from ktinfra.cli import app

LEVEL = {
    "concurrency": 1,
    "user_tps": {"min": 5.0, "median": 6.0},
    "ttft_ms": {"median": 100.0, "p99": 200.0},
}


def _drawn_svg(tmp_path: Path, title: str) -> str:
    path = tmp_path / "plot.svg"
    with matplotlib.rc_context({"svg.fonttype": "none"}):  # text as <text>, not glyph outlines
        plot_levels([LEVEL], path, title=title)
    return path.read_text()


@pytest.mark.parametrize(
    "title",
    ["m$x$ @ http://h/$y$", "a$\\bad{$b @ http://h/", "one $ only @ http://h/", "a\\$b$c$ @ http://h/"],
)
def test_the_title_is_drawn_as_given(tmp_path, title):
    assert f">{title}</text>" in _drawn_svg(tmp_path, title)


def test_a_model_name_with_dollars_is_plotted_by_the_command(server, tmp_path):
    server.reply = lambda h, body: sse(h, [delta("a"), delta("b"), USAGE, DONE])
    plot = tmp_path / "cap.svg"
    args = ["bench", "--model", "a$\\bad{$b", "--url", server.url, "--users", "1", "--requests", "1"]
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        res = CliRunner().invoke(app, [*args, "--plot", str(plot), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["plot"] == str(plot)
    assert f">a$\\bad{{$b @ {server.url}</text>" in plot.read_text()
