import subprocess
import sys

from ktinfra import __version__


def test_console_entry_point_prints_version():
    out = subprocess.run(
        [sys.executable, "-m", "ktinfra", "--version"], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == f"ktinfra {__version__}"


def test_no_arguments_shows_help_and_fails():
    proc = subprocess.run([sys.executable, "-m", "ktinfra"], capture_output=True, text=True)
    assert proc.returncode != 0
    assert "Usage" in proc.stdout + proc.stderr
