"""Probe: what a python environment holds. argv[1]: JSON list of distribution names.

Prints one JSON line: interpreter, version and {dist: installed version or null}; torch's CUDA view when torch
is there. Stdlib only, so it runs in any env before anything is known about it.
"""

import importlib.metadata as md
import importlib.util
import json
import os
import platform
import sys
import uuid

MODULES = ("kt_kernel", "sglang", "torch", "llamafactory", "ktransformers")


def dist_version(name: str):
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return None


def dist_copies(name: str) -> dict:
    """{site dir: [versions]} where one directory of sys.path holds the distribution more than once (two
    NAME-VERSION.dist-info left by an interrupted or mixed pip/conda install): the version importlib reports
    is then whichever it finds first, and the files on disk are a mix of both."""
    found: dict = {}
    try:
        dists = list(md.distributions(name=name))
    except Exception:  # a path entry importlib cannot read: md.version() above reports what it can
        return {}
    for dist in dists:
        try:
            where = os.path.realpath(str(dist.locate_file("")))
            version = dist.version or "?"  # a dist-info left without its METADATA
        except Exception:
            continue
        if version not in found.setdefault(where, []):
            found[where].append(version)
    return {where: sorted(versions) for where, versions in found.items() if len(versions) > 1}


def device_uuid(properties):
    """The device's UUID as nvidia-smi prints it without "GPU-"; None where torch does not say. torch 2.11
    gives a _CUuuid whose str() is its repr, with the 16 bytes in .bytes."""
    raw = getattr(properties, "uuid", None)
    data = getattr(raw, "bytes", None)
    if data is not None and len(bytes(data)) == 16:
        return str(uuid.UUID(bytes=bytes(data)))
    text = str(raw) if raw is not None else ""
    text = text[4:] if text.startswith("GPU-") else text  # not str.removeprefix: python 3.8 envs run this
    try:
        return str(uuid.UUID(text))
    except ValueError:
        return None


def torch_cuda():
    if importlib.util.find_spec("torch") is None:
        return None
    # every GPU of the host, in nvidia-smi's order: the caller's CUDA_VISIBLE_DEVICES would hide some, and
    # CUDA's default order (fastest first) differs from nvidia-smi's on mixed GPUs
    os.environ.pop("CUDA_VISIBLE_DEVICES", None)
    os.environ["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    import torch

    info = {"torch": torch.__version__, "cuda_build": torch.version.cuda}
    info["available"] = torch.cuda.is_available()
    if info["available"]:
        info["devices"] = []
        for i in range(torch.cuda.device_count()):
            info["devices"].append(
                {
                    "name": torch.cuda.get_device_name(i),
                    "capability": list(torch.cuda.get_device_capability(i)),
                    "uuid": device_uuid(torch.cuda.get_device_properties(i)),
                }
            )
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
                "copies": {n: copies for n in names if (copies := dist_copies(n))},
                "modules": {m: importlib.util.find_spec(m) is not None for m in MODULES},
                "torch_cuda": torch_cuda() if want_torch else None,
            }
        )
    )


if __name__ == "__main__":
    main()
