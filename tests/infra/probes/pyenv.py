"""Probe: what a python environment holds. argv[1]: JSON list of distribution names.

Prints one JSON line: interpreter, version and {dist: installed version or null}; torch's CUDA view when torch
is there. Stdlib only, so it runs in any env before anything is known about it.
"""

import importlib.metadata as md
import importlib.util
import json
import platform
import sys

MODULES = ("kt_kernel", "sglang", "torch", "llamafactory", "ktransformers")


def dist_version(name: str):
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return None


def torch_cuda():
    if importlib.util.find_spec("torch") is None:
        return None
    import torch

    info = {"torch": torch.__version__, "cuda_build": torch.version.cuda}
    info["available"] = torch.cuda.is_available()
    if info["available"]:
        info["devices"] = [
            {"name": torch.cuda.get_device_name(i), "capability": list(torch.cuda.get_device_capability(i))}
            for i in range(torch.cuda.device_count())
        ]
    return info


def main() -> None:
    names = json.loads(sys.argv[1]) if len(sys.argv) > 1 else []
    want_torch = "--torch" in sys.argv[2:]
    print(
        json.dumps(
            {
                "executable": sys.executable,
                "python": platform.python_version(),
                "dists": {n: dist_version(n) for n in names},
                "modules": {m: importlib.util.find_spec(m) is not None for m in MODULES},
                "torch_cuda": torch_cuda() if want_torch else None,
            }
        )
    )


if __name__ == "__main__":
    main()
