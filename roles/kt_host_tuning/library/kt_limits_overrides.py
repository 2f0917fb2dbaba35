#!/usr/bin/python
"""Ansible module: the limits.d entries read after ours that set memlock or nofile to another value.

pam_limits reads /etc/security/limits.conf, then limits.d's *.conf in file-name order, and for the same domain
the last entry wins: a 95-vendor.conf `* hard nofile 4096` gave every login 4096 while 90-ktinfra.conf said
1048576 (a Debian 12 container, su with pam_limits). Only our own domains count, `*` and `root`: an entry for
one user or group is that admin's choice for them. Reads only.
"""

from __future__ import annotations

import os

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
module: kt_limits_overrides
short_description: Find limits.d entries read after a drop-in that set its memlock or nofile to other values
options:
  dropin:
    description: The limits.d drop-in whose limits should hold (its file name places it in the order).
    type: path
    required: true
  limits:
    description: item (memlock, nofile) -> the value the drop-in sets for soft and hard, for * and root.
    type: dict
    required: true
"""

RETURN = r"""
overrides:
  description: One entry per domain, type and item whose last assignment after the drop-in is another value.
  type: list
  elements: dict
  returned: always
  sample: [{file: /etc/security/limits.d/95-vendor.conf, line: 2, domain: "*", type: hard, item: nofile,
            value: "4096", wanted: "1048576"}]
"""

DOMAINS = ("*", "root")
UNLIMITED = ("unlimited", "infinity", "-1")


def normal(value: str) -> str:
    value = str(value).strip().lower()
    return "unlimited" if value in UNLIMITED else value


def entries(path: str) -> list[tuple[int, str, str, str, str]]:
    """(line number, domain, type, item, value) of each four-field line; an unreadable file has none."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            lines = handle.read().splitlines()
    except (OSError, ValueError):
        return []
    found = []
    for number, line in enumerate(lines, start=1):
        fields = line.split("#", 1)[0].split()
        if len(fields) == 4:
            found.append((number, *fields))
    return found


def overrides(dropin: str, limits: dict) -> list[dict]:
    folder, ours = os.path.dirname(dropin), os.path.basename(dropin)
    try:
        names = sorted(name for name in os.listdir(folder) if name.endswith(".conf") and name > ours)
    except OSError:
        names = []
    wanted = {item: normal(value) for item, value in limits.items()}
    last: dict[tuple[str, str, str], tuple[str, int, str]] = {}
    for name in names:
        path = os.path.join(folder, name)
        for number, domain, kind, item, value in entries(path):
            if domain not in DOMAINS or item not in wanted or kind not in ("soft", "hard", "-"):
                continue
            for each in ("soft", "hard") if kind == "-" else (kind,):
                last[(domain, each, item)] = (path, number, value)
    return [
        {"file": path, "line": number, "domain": domain, "type": kind, "item": item, "value": value,
         "wanted": wanted[item]}
        for (domain, kind, item), (path, number, value) in last.items()
        if normal(value) != wanted[item]
    ]  # fmt: skip


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "dropin": {"type": "path", "required": True},
            "limits": {"type": "dict", "required": True},
        },
        supports_check_mode=True,
    )
    module.exit_json(changed=False, overrides=overrides(module.params["dropin"], module.params["limits"]))


if __name__ == "__main__":
    main()
