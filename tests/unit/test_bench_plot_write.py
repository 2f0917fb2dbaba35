"""`ktinfra bench --plot` writes its image whole or not at all: a real ktinfra process whose writes hit a file
size limit part way (RLIMIT_FSIZE; Python ignores SIGXFSZ, so the write fails with EFBIG as on a full
disk), against a real local HTTP server (tests/unit/test_bench_http.Server)."""

from __future__ import annotations

import os
import resource
import stat
import subprocess
import sys

import pytest
from test_bench_http import DONE, USAGE, delta, sse
from typer.testing import CliRunner

from ktinfra.cli import app

CHILD = "import sys; from ktinfra.cli import app; sys.argv = ['ktinfra', *sys.argv[1:]]; app()"


def answer(server) -> None:
    server.reply = lambda h, body: sse(h, [delta("a"), delta("b"), USAGE, DONE])


@pytest.mark.parametrize("name", ["cap.png", "cap.svg", "cap.pdf"])
def test_a_plot_cut_off_by_a_failed_write_leaves_the_old_plot(server, tmp_path, name):
    # savefig wrote straight into the plot: the old plot was emptied, then 8 KiB of the new one were left
    # behind, a broken image, while the error said "no plot written"
    answer(server)
    plot = tmp_path / name
    plot.write_bytes(b"OLD")

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (8192, 8192))

    run = subprocess.run(
        [sys.executable, "-c", CHILD, "bench", "--model", "m", "--url", server.url, "--users", "1"]
        + ["--requests", "1", "--plot", str(plot)],
        preexec_fn=small_files,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "NO_PROXY": "*", "no_proxy": "*"},
        cwd="/",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 1, run.stderr
    assert f"error: no plot written to {plot}:" in run.stderr and "File too large" in run.stderr
    assert "│     1 │" in run.stdout  # the results were printed all the same
    assert plot.read_bytes() == b"OLD"
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]  # no temporary file left


def test_a_written_plot_has_the_mode_of_a_plain_file_or_keeps_its_own(server, tmp_path):
    answer(server)
    umask = os.umask(0o022)
    try:
        new, old = tmp_path / "new.svg", tmp_path / "old.svg"
        old.write_bytes(b"OLD")
        old.chmod(0o640)
        for plot in (new, old):
            args = ["--url", server.url, "--users", "1", "--requests", "1", "--plot", str(plot)]
            res = CliRunner().invoke(app, ["bench", "--model", "m", *args])
            assert res.exit_code == 0, res.output
    finally:
        os.umask(umask)
    assert stat.S_IMODE(new.stat().st_mode) == 0o644  # not mkstemp's 0600
    assert stat.S_IMODE(old.stat().st_mode) == 0o640
    assert old.read_bytes().startswith(b"<?xml")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.svg", "old.svg"]
