"""`ktinfra doctor` keeps a check's message and output to 2000 characters each (the junit file they come from
goes with the suite's temp dir). The cut was silent: a pin check listing 2600 characters of problems showed
the first 2000 as if that were all of them, and an output cut at its start read as if the check had printed
only that."""

from __future__ import annotations

import subprocess
import sys

from ktinfra import doctor

SUITE = """
import pytest

def test_many_problems():
    pytest.fail("; ".join(f"problem-{i:03d} " + "x" * 16 for i in range(100)), pytrace=False)

def test_chatty():
    for i in range(300):
        print(f"line {i:03d}")

def test_short():
    print("one line")
    pytest.fail("short", pytrace=False)
"""


def _checks(tmp_path):
    (tmp_path / "test_cut.py").write_text(SUITE)
    junit = tmp_path / "junit.xml"
    options = ["-o", "junit_family=xunit1", "-o", "junit_logging=system-out", f"--junitxml={junit}"]
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *options, "test_cut.py"]
    subprocess.run(cmd, cwd=tmp_path, check=False, capture_output=True)
    return {c.id: c for c in doctor.parse_junit(junit)}


def test_a_cut_message_says_how_much_was_not_kept(tmp_path):
    whole = "; ".join(f"problem-{i:03d} " + "x" * 16 for i in range(100))  # 3098 characters
    message = _checks(tmp_path)["cut.many_problems"].message
    assert message == whole[:2000] + f"\n[... {len(whole) - 2000} more characters not kept]"


def test_a_cut_output_says_how_much_went_before_it(tmp_path):
    output = _checks(tmp_path)["cut.chatty"].output
    first, rest = output.split("\n", 1)
    whole = "\n".join(f"line {i:03d}" for i in range(300))
    assert first == f"[{len(whole) - 2000} earlier characters not kept ...]"
    assert rest == whole[-2000:]


def test_short_texts_are_kept_as_they_are(tmp_path):
    check = _checks(tmp_path)["cut.short"]
    assert (check.message, check.output) == ("short", "one line")
