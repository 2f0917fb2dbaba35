"""Plot of a capacity search: per-user tok/s and TTFT against concurrency (needs matplotlib)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from ktinfra.bench.metrics import slowest_user_tps
from ktinfra.links import LinkLoop, written_file

# The format follows the suffix; these three need nothing beyond matplotlib itself.
SUFFIXES = (".png", ".svg", ".pdf")


class PlotUnavailable(RuntimeError):
    pass


def check_plot_path(path: Path) -> None:
    """Refuse a plot file that could not be written, before minutes of load are spent (ValueError)."""
    if path.suffix.lower() not in SUFFIXES:
        raise ValueError(f"--plot {path}: the file name must end in {', '.join(SUFFIXES)}")
    try:
        target = written_file(path)
    except LinkLoop as loop:
        raise ValueError(f"--plot {loop}") from None
    shown = f"{path}" if target == path else f"{path} (a link to {target})"
    if target.is_dir():
        raise ValueError(f"--plot {shown} is a directory")
    if target.exists() and not target.is_file():
        raise ValueError(f"--plot {shown} is not a regular file")
    parent = target.parent
    if not parent.is_dir():
        raise ValueError(f"--plot {shown}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK) or (target.exists() and not os.access(target, os.W_OK)):
        raise ValueError(f"--plot {shown}: not writable")


def plot_levels(levels: list[dict], path: Path, min_tps: float | None = None, title: str = "") -> Path:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise PlotUnavailable("--plot needs matplotlib: pip install 'ktinfra[plot]'") from exc
    rows = [lv for lv in levels if lv.get("user_tps") and (lv.get("ttft_ms") or lv.get("e2e_latency_ms"))]
    if not rows:
        raise ValueError("no completed level to plot")
    users = [lv["concurrency"] for lv in rows]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    # unrounded, as compared with --min-tps: rounded down, 0.008 was drawn at 0.0, below a target of 0.001
    slowest = [slowest_user_tps(lv["user_tps"]) for lv in rows]
    left.plot(users, slowest, "o-", label="slowest user")
    left.plot(users, [lv["user_tps"]["median"] for lv in rows], "s--", label="median user")
    if min_tps is not None:
        left.axhline(min_tps, color="red", linestyle=":", label=f"target {min_tps:g} tok/s")
    left.set_xlabel("concurrent users")
    left.set_ylabel("output tok/s per user")
    left.legend()
    left.grid(alpha=0.3)
    # --no-stream measures no first token: the right panel then shows whole-reply latency, and says so
    key, label = (
        ("ttft_ms", "TTFT (ms)")
        if all(lv.get("ttft_ms") for lv in rows)
        else ("e2e_latency_ms", "whole-reply latency (ms)")
    )
    right.plot(users, [lv[key]["median"] for lv in rows], "o-", label="median")
    right.plot(users, [lv[key]["p99"] for lv in rows], "s--", label="p99")
    right.set_xlabel("concurrent users")
    right.set_ylabel(label)
    right.legend()
    right.grid(alpha=0.3)
    if title:
        # a pair of `$` (in a model name or URL) is a math formula to matplotlib: escaped, each is drawn as is
        fig.suptitle(title.replace("$", r"\$"))
    fig.tight_layout()
    try:
        _save(fig, path)
    finally:
        plt.close(fig)
    return path


def _save(fig, path: Path) -> None:
    """Draw into a temporary file beside the plot, then rename it over the plot: a write that fails part way
    (disk full, a file size limit) leaves no cut-off image, and a plot already there untouched."""
    target = written_file(path)  # through a link the link stays, and what it leads to is replaced
    if target.is_file():
        mode = target.stat().st_mode & 0o7777  # a replaced plot keeps its mode
    else:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask  # as a plain open() would have made it (mkstemp makes 0600)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=target.suffix)
    try:
        with os.fdopen(fd, "wb") as handle:
            fig.savefig(handle, dpi=110, format=target.suffix[1:].lower())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
