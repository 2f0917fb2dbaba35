import os
import subprocess
import sys

import pytest

from ktinfra import profiles


def test_both_generations_ship():
    names = profiles.list_profiles()
    assert "kt-0.7" in names and "kt-0.4-autodl" in names
    assert profiles.load_profile("kt-0.7")["generation"] == "current"
    assert profiles.load_profile("kt-0.4-autodl")["generation"] == "legacy"


def test_unknown_profile_is_refused_with_the_known_names():
    with pytest.raises(profiles.UnknownProfileError, match="kt-0.7"):
        profiles.load_profile("kt-9.9")


def test_profile_show_prints_wheel_file_names_whole_on_an_80_column_terminal():
    command = [sys.executable, "-m", "ktinfra", "profile", "show", "kt-0.4-autodl"]
    proc = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "COLUMNS": "80"})
    assert proc.returncode == 0, proc.stderr
    assert "…" not in proc.stdout
    rows = [line.split("│") for line in proc.stdout.splitlines() if line.count("│") == 4]
    third_column = "".join(cells[3].strip() for cells in rows)
    wheels = profiles.env_spec(profiles.load_profile("kt-0.4-autodl"), "sft")["wheels"]
    assert wheels and all(wheel["file"] in third_column for wheel in wheels)
