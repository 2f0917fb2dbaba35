"""`ktinfra doctor` reports a check's whole message: pytest >= 9 cuts the junit `message` attribute at 500
characters and adds "[+N more lines; full report in element text]", which doctor showed as the message."""

from __future__ import annotations

import subprocess
import sys

from test_doctor_envs import make_env, sft_pins_check

from ktinfra import doctor

SUITE = """
import pytest

def test_long_assert():
    bad = ["a" * 300, "b" * 300]
    assert not bad, "; ".join(bad)

def test_long_fail():
    pytest.fail("c" * 700 + "\\nsecond line", pytrace=False)

@pytest.fixture
def broken():
    pytest.fail("d" * 600, pytrace=False)

def test_long_error(broken):
    pass

def test_short_assert():
    assert not ["e" * 600], "short"

def test_long_chained():
    try:
        {}["k" * 600]
    except KeyError as exc:
        raise RuntimeError("outer " + "o" * 600) from exc
"""


def test_messages_over_500_characters_come_back_whole(tmp_path):
    (tmp_path / "test_long.py").write_text(SUITE)
    junit = tmp_path / "junit.xml"
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "junit_family=xunit1"]
    subprocess.run([*cmd, f"--junitxml={junit}", str(tmp_path / "test_long.py")], cwd=tmp_path, check=False)
    checks = {c.id: c for c in doctor.parse_junit(junit)}
    assert checks["long.long_assert"].message == "a" * 300 + "; " + "b" * 300
    assert checks["long.long_fail"].message == "c" * 700 + "\nsecond line"
    assert (checks["long.long_error"].status, checks["long.long_error"].message) == ("error", "d" * 600)
    assert checks["long.short_assert"].message == "short"
    assert checks["long.long_chained"].message == "RuntimeError: outer " + "o" * 600  # as pytest's own
    assert not any("full report in element text" in c.message for c in checks.values())


def test_a_pin_check_with_many_problems_lists_them_all(tmp_path):
    """kt-0.4-autodl's sft env with none of its pinned distributions: seven problems, 540 characters."""
    check = sft_pins_check(make_env(tmp_path / "sft", {}, ("llamafactory",)))
    assert check.status == "failed", check
    problems = check.message.split(": ", 1)[1].split("; ")
    assert [p.split()[0] for p in problems] == [
        "torch", "torchaudio", "transformers", "huggingface_hub", "ktransformers", "flash-attn",
    ]  # fmt: skip
    assert problems[-1] == "flash-attn missing (profile pins ==2.8.3)"
