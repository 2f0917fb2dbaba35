"""The suite's probes run with the target's python (an env's, 3.8 to 3.12): nothing newer than 3.8 in them.

pyenv.py's device_uuid took "GPU-" off with str.removeprefix (3.9): on a python 3.8 env with a torch
whose device properties give no UUID bytes (torch 2.0), the GPU check's probe died with AttributeError.
No python 3.8 is on this machine, so the probes are read for it: their syntax as 3.8 parses it, and no
call of a method python 3.8 lacks. The torch branch itself runs for real below with a stand-in torch.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

PROBES = Path(__file__).parents[1] / "infra" / "probes"
# methods and keywords python 3.9+ added that a probe could reach for (str, bytes, pathlib, zip)
NEWER_METHODS = {"removeprefix", "removesuffix", "is_relative_to", "with_stem", "bit_count"}
NEWER_KEYWORDS = {("zip", "strict")}


@pytest.mark.parametrize("probe", sorted(p.name for p in PROBES.glob("*.py")))
def test_probe_uses_nothing_newer_than_python_3_8(probe):
    source = (PROBES / probe).read_text()
    tree = ast.parse(source, feature_version=(3, 8))  # a SyntaxError names the construct
    newer = [
        f"line {node.lineno}: .{node.attr}()"
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and node.attr in NEWER_METHODS
    ]
    newer += [
        f"line {node.lineno}: {node.func.id}({kw.arg}=)"
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        for kw in node.keywords
        if (node.func.id, kw.arg) in NEWER_KEYWORDS
    ]
    assert not newer, f"{probe} runs on python 3.8 targets but uses " + "; ".join(newer)


TORCH = """\
__version__ = "2.0.1"
class version:
    cuda = "11.8"
class _Props:
    pass  # torch 2.0: no .uuid
class cuda:
    @staticmethod
    def is_available(): return True
    @staticmethod
    def device_count(): return 2
    @staticmethod
    def get_device_name(i): return "NVIDIA H200"
    @staticmethod
    def get_device_capability(i): return (9, 0)
    @staticmethod
    def get_device_properties(i):
        p = _Props()
        if i == 1:
            p.uuid = "GPU-5b1e9b4d-7d1c-4c0e-9f9f-2a7c0c1d2e3f"
        return p
"""


def test_pyenv_probe_reports_torch_devices_with_and_without_a_uuid(tmp_path):
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text(TORCH)
    sys.path.insert(0, str(PROBES.parent))
    try:
        import kthost
    finally:
        sys.path.remove(str(PROBES.parent))
    command = kthost.probe_command(sys.executable, "pyenv", "[]", "--torch")
    done = subprocess.run(command, shell=True, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(tmp_path)})  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    devices = json.loads(done.stdout.splitlines()[-1])["torch_cuda"]["devices"]
    assert [d["uuid"] for d in devices] == [None, "5b1e9b4d-7d1c-4c0e-9f9f-2a7c0c1d2e3f"]
