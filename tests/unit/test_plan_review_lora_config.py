"""`ktinfra plan --lora` checks a plain PEFT adapter readable here as `ktinfra lora plan` does (2eff7bf):
before, it put an adapter whose adapter_config.json sglang-kt cannot start with (modules_to_save, a
target_modules string, a key missing) on the plan, and `render serve` wrote a unit whose server stopped."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from test_lora import H100, peft_dir

REPO = Path(__file__).resolve().parents[2]


def _plan(*args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "ktinfra", "plan", "--model", "Qwen3-30B-A3B", "--from", str(H100)]
    return subprocess.run([*command, *args], capture_output=True, text=True, cwd=REPO, timeout=120)


def _edit(adapter: Path, **fields) -> Path:
    path = adapter / "adapter_config.json"
    path.write_text(json.dumps(json.loads(path.read_text()) | fields))
    return adapter


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({"modules_to_save": ["lm_head"]}, "modules_to_save"),
        ({"target_modules": "all-linear"}, "target_modules is the string 'all-linear'"),
    ],
)
def test_an_adapter_sglang_cannot_serve_as_is_is_refused(tmp_path, fields, said):
    adapter = _edit(peft_dir(tmp_path / "a"), **fields)
    proc = _plan("--lora", f"mine={adapter}", "--json")
    assert proc.returncode == 1, proc.stdout[-2000:]
    assert proc.stdout == "" and "error: --lora mine:" in proc.stderr and said in proc.stderr, proc.stderr


def test_a_good_adapter_and_one_not_on_this_host_are_planned(tmp_path):
    adapter = peft_dir(tmp_path / "a")
    proc = _plan("--lora", f"mine={adapter}", "--lora", "elsewhere=/srv/not/here", "--json")
    assert proc.returncode == 0, proc.stderr
    paths = json.loads(proc.stdout)["serve"]["lora"]["paths"]
    assert paths == {"mine": str(adapter), "elsewhere": "/srv/not/here"}


def test_the_legacy_stack_checks_the_adapter_it_will_load_too(tmp_path):
    """The legacy stack loads the directory the plan names (render converts nothing, and convert_lora.py only
    strips key prefixes: 66229ca), and its sglang fork reads modules_to_save as sglang-kt does: refused too.
    Before 66229ca this test pinned the skip."""
    adapter = _edit(peft_dir(tmp_path / "a"), modules_to_save=["lm_head"])
    proc = _plan("--lora", f"mine={adapter}", "--stack", "kt-0.4-autodl", "--json")
    assert proc.returncode == 1, proc.stdout[-2000:]
    assert proc.stdout == "" and "error: --lora mine:" in proc.stderr, proc.stderr
    assert "modules_to_save" in proc.stderr, proc.stderr
