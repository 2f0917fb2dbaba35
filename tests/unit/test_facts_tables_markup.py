"""`ktinfra facts --from` tables print a capture's text as text: brackets in it are not rich markup."""

from __future__ import annotations

import shutil
from pathlib import Path

from typer.testing import CliRunner

from ktinfra.cli import app

H200X2 = Path(__file__).resolve().parents[1] / "fixtures" / "hosts" / "2xh200-xeon-amx-32c"


def test_a_topo_link_with_brackets_is_printed_not_parsed(tmp_path):
    """A damaged `nvidia-smi topo -m` cell "[/x]" raised rich's MarkupError (a traceback) in the GPU table."""
    capture = tmp_path / "cap"
    shutil.copytree(H200X2, capture)
    topo = capture / "nvidia-smi-topo.txt"
    lines = topo.read_text().splitlines(keepends=True)
    lines[1] = lines[1].replace("NV18", "[/x]")
    topo.write_text("".join(lines))
    result = CliRunner().invoke(app, ["facts", "--from", str(capture)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert result.exception is None
    assert "GPU1:[/x]" in result.output


def test_a_capture_folder_named_with_brackets_is_shown_as_named(tmp_path):
    """The table title names the folder: "[/x]" raised MarkupError, "[gpu-box]" vanished from the title."""
    for name in ("[gpu-box]", "[/x]"):
        capture = tmp_path / name / "cap"
        shutil.copytree(H200X2, capture)
        result = CliRunner().invoke(app, ["facts", "--from", str(capture)], env={"COLUMNS": "300"})
        assert result.exit_code == 0, result.output
        assert result.exception is None
        assert f"Host facts ({capture})" in result.output
