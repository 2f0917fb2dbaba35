"""The plot's slowest-user line used user_tps.min, rounded down to 2 decimals: against --min-tps 0.001 a
level that passed with a slowest user at 0.008 tok/s was drawn at 0.0, below the target line it met. The
line now follows the unrounded minimum the search compared (user_tps.min_exact). Drawn by the real
matplotlib; the figure is read before it is closed."""

from __future__ import annotations

import matplotlib.pyplot as plt

from ktinfra.bench.plot import plot_levels


def test_the_slowest_user_line_is_the_compared_value(tmp_path, monkeypatch):
    figures = []
    close = plt.close
    monkeypatch.setattr(plt, "close", lambda fig: (figures.append(fig), close(fig)))
    level = {
        "concurrency": 1,
        "user_tps": {"min": 0.0, "min_exact": 0.008, "median": 0.01},
        "ttft_ms": {"median": 100.0, "p99": 200.0},
        "pass": True,
    }
    plot_levels([level], tmp_path / "plot.png", min_tps=0.001)
    slowest, _median, target = figures[0].axes[0].lines
    assert list(slowest.get_ydata()) == [0.008]
    assert list(target.get_ydata()) == [0.001, 0.001]
