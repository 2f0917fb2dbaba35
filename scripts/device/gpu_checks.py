"""On the GPU host: the host suite's GPU helpers (tests/infra/kthost.py) against real nvidia-smi and torch.

Runs the nvidia-smi query test_gpu.py runs, parses it, then the pyenv probe (--torch) three ways: as the
suite runs it, with CUDA_VISIBLE_DEVICES="" in the caller's environment (the probe must still see every GPU),
and with CUDA_VISIBLE_DEVICES=0 plus CUDA_DEVICE_ORDER=FASTEST_FIRST. Prints one JSON document.
usage: python3 scripts/device/gpu_checks.py
"""

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "infra"))
from kthost import GPU_QUERY, parse_gpu_rows, probe_command, torch_gpu_problems  # noqa: E402


def probe(extra_env: dict) -> dict:
    env = dict(os.environ, **extra_env)
    out = subprocess.run(
        ["bash", "-c", probe_command(sys.executable, "pyenv", "[]", "--torch")],
        capture_output=True, text=True, env=env, check=True,
    )  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])["torch_cuda"]


query = subprocess.run(
    ["nvidia-smi", f"--query-gpu={','.join(GPU_QUERY)}", "--format=csv,noheader,nounits"],
    capture_output=True, text=True, check=True,
)  # fmt: skip
gpus, other = parse_gpu_rows(query.stdout)
report = {"nvidia_smi_stdout": query.stdout, "gpus": gpus, "other_lines": other, "cases": {}}
for name, extra in {
    "as-suite": {},
    "cvd-empty": {"CUDA_VISIBLE_DEVICES": ""},
    "cvd-0-fastest-first": {"CUDA_VISIBLE_DEVICES": "0", "CUDA_DEVICE_ORDER": "FASTEST_FIRST"},
}.items():
    view = probe(extra)
    report["cases"][name] = {"torch": view, "problems": torch_gpu_problems(view.get("devices", []), gpus)}
print(json.dumps(report, indent=1))
ok = gpus and all(not case["problems"] for case in report["cases"].values())
sys.exit(0 if ok else 1)
