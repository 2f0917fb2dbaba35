#!/usr/bin/python
"""Ansible module: the sysctl.d entries read after ours at boot that set one of our sysctls to another value.

systemd-sysctl reads every *.conf of its directories in one order by file name (a name in an earlier
directory hides the same name in a later one), and the last assignment of a name wins; procps'
`sysctl --system` does the same and reads /etc/sysctl.conf last. Debian and Ubuntu link
/etc/sysctl.d/99-sysctl.conf to /etc/sysctl.conf, so a `vm.swappiness = 60` there undid our
90-ktinfra.conf at every boot while the run reported it applied. Glob names (net.ipv4.conf.*.rp_filter) are
not counted: systemd-sysctl never lets a glob override an explicit name. Reads only.

Where /proc/sys is mounted read-only (a docker container: the host's sysctls are in force there), nothing
applies sysctl.d at boot (systemd-sysctl's ConditionPathIsReadWrite=/proc/sys/): proc_sys_read_only says so.
"""

from __future__ import annotations

import os

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
module: kt_sysctl_overrides
short_description: Find sysctl.d entries read after a drop-in that set its sysctls to other values
options:
  dropin:
    description: The drop-in whose values should hold at boot (its file name places it in the order).
    type: path
    required: true
  sysctls:
    description: The sysctls the drop-in sets, name -> value.
    type: dict
    required: true
  search_dirs:
    description: systemd-sysctl's directories, the first hiding the same file name in the later ones (the
      role's vars/main.yml names them).
    type: list
    elements: path
    required: true
  sysctl_conf:
    description: The file procps' sysctl --system reads after them all; empty for none.
    type: str
    required: true
  proc_sys:
    description: Where sysctls are (/proc/sys); proc_sys_read_only tells whether it is mounted read-only.
    type: path
    required: true
"""

RETURN = r"""
overrides:
  description: One entry per later assignment of another value, in boot order.
  type: list
  elements: dict
  returned: always
  sample: [{file: /etc/sysctl.d/99-sysctl.conf, line: 28, name: vm.swappiness, value: "60", wanted: "10"}]
proc_sys_read_only:
  description: proc_sys is on a read-only mount, so no sysctl.d file is applied at this system's boot.
  type: bool
  returned: always
"""


def normalize(name: str) -> str:
    """sysctl.d's rule: a name whose first separator is a dot has dots and slashes swapped; the path form."""
    name = name.strip()
    for char in name:
        if char in "./":
            if char == ".":
                name = name.translate(str.maketrans("./", "/."))
            break
    return "/".join(part for part in name.split("/") if part)


def collapse(value: str) -> str:
    return " ".join(str(value).split())


def boot_order(search_dirs: list[str]) -> list[str]:
    """The files systemd-sysctl reads, in its order."""
    chosen: dict[str, str] = {}
    for folder in search_dirs:
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in names:
            if name.endswith(".conf") and name not in chosen:
                chosen[name] = os.path.join(folder, name)
    return [chosen[name] for name in sorted(chosen)]


def assignments(path: str) -> list[tuple[int, str, str]]:
    """(line number, normalized name, value) of each assignment; an unreadable file has none."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            lines = handle.read().splitlines()
    except (OSError, ValueError):  # a dangling link, a folder, a file we may not read
        return []
    found = []
    for number, line in enumerate(lines, start=1):
        line = line.strip()
        if not line or line[0] in "#;" or "=" not in line:
            continue
        name, value = line.split("=", 1)
        name = name.strip().lstrip("-")
        if any(char in name for char in "*?["):
            continue
        found.append((number, normalize(name), value.strip()))
    return found


def overrides(dropin: str, sysctls: dict, search_dirs: list[str], sysctl_conf: str) -> list[dict]:
    """The last assignment after the drop-in of each of its sysctls, where it is another value."""
    wanted = {normalize(str(name)): (str(name), collapse(value)) for name, value in sysctls.items()}
    ours = os.path.basename(dropin)
    later = [path for path in boot_order(search_dirs) if os.path.basename(path) > ours]
    last: dict[str, tuple[str, int, str]] = {}
    for path in later + ([sysctl_conf] if sysctl_conf else []):
        for number, name, value in assignments(path):
            if name in wanted:
                last[name] = (path, number, value)
    return [
        {"file": path, "line": number, "name": wanted[name][0], "value": value, "wanted": wanted[name][1]}
        for name, (path, number, value) in last.items()
        if collapse(value) != wanted[name][1]
    ]


def read_only(path: str) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "dropin": {"type": "path", "required": True},
            "sysctls": {"type": "dict", "required": True},
            "search_dirs": {"type": "list", "elements": "path", "required": True},
            "sysctl_conf": {"type": "str", "required": True},
            "proc_sys": {"type": "path", "required": True},
        },
        supports_check_mode=True,
    )
    params = module.params
    found = overrides(params["dropin"], params["sysctls"], params["search_dirs"], params["sysctl_conf"])
    module.exit_json(changed=False, overrides=found, proc_sys_read_only=read_only(params["proc_sys"]))


if __name__ == "__main__":
    main()
