"""--model spellings that reached the user as a traceback: a ~user path of no such user (pathlib's
expanduser raises RuntimeError, which nothing caught)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ktinfra import catalog

FACTS = Path(__file__).parents[1] / "fixtures" / "facts" / "h100-amx.json"
NO_USER = "~ktinfra-no-such-user-38"


@pytest.mark.parametrize("model", [f"{NO_USER}/models/Qwen3-30B-A3B", NO_USER])
def test_a_home_of_no_user_is_an_unknown_model(model):
    with pytest.raises(catalog.UnknownModelError) as err:
        catalog.resolve(model)
    assert str(err.value) == f"--model {model!r}: {NO_USER!r} is no user's home directory"


def test_the_cli_says_so_and_exits_1_without_a_traceback():
    args = ["plan", "--model", f"{NO_USER}/m", "--facts", str(FACTS)]
    proc = subprocess.run(
        [sys.executable, "-m", "ktinfra", *args], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    assert f"{NO_USER!r} is no user's home directory" in proc.stdout + proc.stderr


def test_the_own_home_still_expands(tmp_path, monkeypatch):
    model = tmp_path / "models" / "MyQwen"
    model.mkdir(parents=True)
    (model / "config.json").write_text(json.dumps(catalog.entry_config("Qwen3-30B-A3B")))
    monkeypatch.setenv("HOME", str(tmp_path))
    assert catalog.resolve("~/models/MyQwen").path == str(model.resolve())
