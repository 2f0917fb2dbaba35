#!/usr/bin/python
"""Ansible module: the processes whose command line names one of the given files (a training run's recipe).

Where systemd is not PID 1 a run is started by hand (`llamafactory-cli train /etc/ktinfra/train/RUN.yaml`,
or accelerate launch ... RUN.yaml, whose workers keep that argument), so "is RUN still training" is "does a
process name RUN.yaml": an argument equal to the path, or a relative one that is the path from the process's
working directory. Reads /proc only.
"""

from __future__ import annotations

import os

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
module: kt_train_processes
short_description: Find the processes whose arguments name given files
options:
  paths:
    description: Absolute paths of the files to look for (each run's recipe).
    type: list
    elements: path
    required: true
  proc:
    description: The proc file system to read.
    type: path
    default: /proc
"""

RETURN = r"""
processes:
  description: path -> the ids of the processes naming it (empty list for none), ascending.
  type: dict
  returned: always
  sample: {/etc/ktinfra/train/run.yaml: [4242, 4250]}
"""


def _arguments(proc: str, pid: str) -> tuple[list[str], str | None]:
    """The process's arguments and working directory; ([], None) for one gone or not readable."""
    try:
        with open(os.path.join(proc, pid, "cmdline"), "rb") as handle:
            raw = handle.read()
    except OSError:
        return [], None
    args = [part.decode("utf-8", "surrogateescape") for part in raw.split(b"\0") if part]
    try:
        cwd = os.readlink(os.path.join(proc, pid, "cwd"))
    except OSError:  # another user's process when not root: absolute arguments still count
        cwd = None
    return args, cwd


def find(paths: list[str], proc: str = "/proc", own: int | None = None) -> dict[str, list[int]]:
    wanted = {os.path.normpath(p): p for p in paths}
    found: dict[str, list[int]] = {p: [] for p in paths}
    for pid in sorted((e for e in os.listdir(proc) if e.isdigit()), key=int):
        if own is not None and int(pid) == own:
            continue
        args, cwd = _arguments(proc, pid)
        named = set()
        for arg in args:
            if os.path.isabs(arg):
                named.add(os.path.normpath(arg))
            elif cwd is not None:
                named.add(os.path.normpath(os.path.join(cwd, arg)))
        for path in named & wanted.keys():
            found[wanted[path]].append(int(pid))
    return found


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "paths": {"type": "list", "elements": "path", "required": True},
            "proc": {"type": "path", "default": "/proc"},
        },
        supports_check_mode=True,
    )
    relative = [p for p in module.params["paths"] if not os.path.isabs(p)]
    if relative:
        module.fail_json(msg=f"paths must be absolute: {', '.join(relative)}")
    module.exit_json(
        changed=False, processes=find(module.params["paths"], module.params["proc"], os.getpid())
    )


if __name__ == "__main__":
    main()
