#!/usr/bin/python
"""Ansible module: ansible.builtin.stat of several paths in one module run.

A stat loop runs the module once per path: on a 2-core host about a second each (worker fork, module
transfer, python start), and kt_train looked for 13 files per run that way. The answer has a loop's
shape, `results[i].stat`, so the tasks that read a loop's results read this one unchanged. Like stat with
follow: false: a symlink is itself (lstat), a checksum only of a regular file.
"""

from __future__ import annotations

import hashlib
import os
import stat

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
module: kt_stat_paths
short_description: Stat several paths in one module run, answered as a stat loop's results
options:
  paths:
    description: The paths, in the order of the results; relative ones are taken in I(base).
    type: list
    elements: str
    required: true
  base:
    description: The folder of relative I(paths). Each result's item is the entry as given.
    type: path
  checksum:
    description: The entries of I(paths) whose checksum to take (regular files only, as stat's).
    type: list
    elements: str
    default: []
  checksum_algorithm:
    description: The checksum's algorithm.
    type: str
    choices: [sha1, sha256]
    default: sha1
"""

RETURN = r"""
results:
  description: One per path, in order; stat has ansible.builtin.stat's keys exists, path, mtime, size, isdir,
    isreg, islnk and, where asked for a regular file, checksum.
  type: list
  returned: always
  sample: [{item: /opt/kt/envs/a/x.txt, stat: {exists: false, path: /opt/kt/envs/a/x.txt}}]
"""

CHUNK = 1 << 20


def _checksum(path: str, algorithm: str) -> str:
    digest = hashlib.new(algorithm)
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def stat_of(path: str, checksum: bool, algorithm: str) -> dict:
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return {"exists": False, "path": path}
    answer = {
        "exists": True,
        "path": path,
        "mtime": info.st_mtime,
        "size": info.st_size,
        "isdir": stat.S_ISDIR(info.st_mode),
        "isreg": stat.S_ISREG(info.st_mode),
        "islnk": stat.S_ISLNK(info.st_mode),
    }
    if checksum and answer["isreg"]:
        answer["checksum"] = _checksum(path, algorithm)
    return answer


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "paths": {"type": "list", "elements": "str", "required": True},
            "base": {"type": "path"},
            "checksum": {"type": "list", "elements": "str", "default": []},
            "checksum_algorithm": {"type": "str", "choices": ["sha1", "sha256"], "default": "sha1"},
        },
        supports_check_mode=True,
    )
    wanted = set(module.params["checksum"])
    algorithm = module.params["checksum_algorithm"]
    base = module.params["base"]
    results = []
    for entry in module.params["paths"]:
        path = os.path.join(base, entry) if base else os.path.expanduser(entry)
        try:
            results.append({"item": entry, "stat": stat_of(path, entry in wanted, algorithm)})
        except OSError as err:  # as stat: a file where a folder should be (ENOTDIR), EACCES ... fail
            module.fail_json(msg=f"cannot stat {path}: {err.strerror}", path=path)
    module.exit_json(changed=False, results=results)


if __name__ == "__main__":
    main()
