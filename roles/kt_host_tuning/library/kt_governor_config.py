#!/usr/bin/python
"""Ansible module: whether TLP's and cpupower's configs set a CPU governor, and TLP's udev rule.

TLP writes CPU_SCALING_GOVERNOR_ON_AC/BAT (tlp-pd also _ON_SAV) only where its config sets them: it reads
defaults.conf, /etc/tlp.d/*.conf in name order, then /etc/tlp.conf, the last assignment winning (tlp-
readconfs), an empty value or TLP_ENABLE=0 setting nothing. cpupower.service applies `governor=` of
/etc/default/cpupower (Arch; GOVERNOR= in cpupower-service.conf) or `-g` in CPUPOWER_START_OPTS of
/etc/sysconfig/cpupower (Fedora), sourced as shell: the last assignment wins. TLP's udev rule (85-tlp.rules)
runs `tlp auto` on every power_supply change whether tlp.service runs, is disabled or masked; a file of the
same name in the first of the rules directories (/etc/udev/rules.d) replaces it. TLP's sleep hooks
(/usr/lib/systemd/system-sleep/tlp, elogind's 49-tlp-sleep) run `tlp resume` after each resume, masked or not:
systemd-sleep runs every executable of /usr/lib/systemd/system-sleep and has no directory that replaces one by
name (systemd-suspend.service(8), systemd 252). Rules and hooks are found by what they run, whatever their
name: a renamed copy runs the same command. Reads only.
"""

from __future__ import annotations

import glob
import os
import re

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
module: kt_governor_config
short_description: Find the governor lines of TLP's and cpupower's configs and TLP's live udev rules
options:
  tlp_files:
    description: TLP's config files (globs allowed) in the order TLP reads them.
    type: list
    elements: str
    required: true
  cpupower_files:
    description: cpupower.service's config files (shell variables), each read on its own.
    type: list
    elements: str
    required: true
  udev_rule_dirs:
    description: udev's rules directories, the one that overrides the others first (/etc/udev/rules.d).
    type: list
    elements: path
    required: true
  sleep_hook_dirs:
    description: The system-sleep directories of systemd and elogind, whose executables run at each resume.
    type: list
    elements: path
    default: []
"""

RETURN = r"""
tlp:
  description: "file line N: KEY=value" of each TLP governor setting in force (empty where none is set).
  type: list
  returned: always
cpupower:
  description: The same for cpupower's config files.
  type: list
  returned: always
tlp_udev_rules:
  description: Rules in force that run `tlp auto` (outside a comment), whatever their name; override is the
    file that would replace one, overridable false where the rule itself is in the first directory.
  type: list
  returned: always
  sample: [{name: 85-tlp.rules, file: /usr/lib/udev/rules.d/85-tlp.rules,
            override: /etc/udev/rules.d/85-tlp.rules, overridable: true}]
tlp_sleep_hooks:
  description: Executable sleep hooks that run `tlp resume` (outside a comment), one per real file.
  type: list
  returned: always
  sample: [{name: tlp, file: /usr/lib/systemd/system-sleep/tlp}]
"""

TLP_GOVERNOR_KEYS = (
    "CPU_SCALING_GOVERNOR_ON_AC",
    "CPU_SCALING_GOVERNOR_ON_BAT",
    "CPU_SCALING_GOVERNOR_ON_SAV",
)
# tlp-readconfs' line syntax: NAME=value or NAME+=value, the value optionally in double quotes
TLP_LINE = re.compile(r'^(?P<name>[A-Z_]+[0-9]*)(?P<op>=|\+=)"?(?P<value>[][0-9a-zA-Z _.:-]*)"?\s*$')
SHELL_LINE = re.compile(r"^\s*(?:export\s+)?(?P<name>[A-Za-z_][A-Za-z0-9_]*)=(?P<value>.*)$")
GOVERNOR_OPTION = re.compile(r"(^|\s)(-g|--governor)(\s|=|$)")
RUNS_TLP_AUTO = re.compile(r"RUN\+?=.*\btlp auto\b")
RUNS_TLP_RESUME = re.compile(r"\btlp\s+resume\b")


def read_lines(path: str) -> list[str]:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read().splitlines()
    except (OSError, ValueError):
        return []


def tlp_settings(patterns: list[str]) -> list[str]:
    last: dict[str, tuple[str, str]] = {}  # name -> (value, where)
    for pattern in patterns:
        for path in sorted(glob.glob(pattern)) if glob.has_magic(pattern) else [pattern]:
            for number, line in enumerate(read_lines(path), start=1):
                line = re.sub(r'(?:"[^"]*")|#.*$', lambda m: m.group(0) if m.group(0)[0] == '"' else "", line)
                match = TLP_LINE.match(line.rstrip())
                if not match:
                    continue
                name, value = match["name"], match["value"]
                if match["op"] == "+=" and name in last:
                    value = f"{last[name][0]} {value}"
                last[name] = (value, f"{path} line {number}")
    if last.get("TLP_ENABLE", ("1", ""))[0].strip() == "0":
        return []
    return [
        f"{last[k][1]}: {k}={last[k][0].strip()}"
        for k in TLP_GOVERNOR_KEYS
        if last.get(k, ("", ""))[0].strip()
    ]


def shell_value(raw: str) -> str:
    raw = raw.strip()
    if raw[:1] in ("'", '"'):
        end = raw.find(raw[0], 1)
        return raw[1:end] if end > 0 else raw[1:]
    return raw.split("#", 1)[0].strip()


def cpupower_settings(paths: list[str]) -> list[str]:
    found = []
    for path in paths:
        last: dict[str, tuple[str, int]] = {}
        for number, line in enumerate(read_lines(path), start=1):
            match = SHELL_LINE.match(line)
            if match and not line.lstrip().startswith("#"):
                last[match["name"]] = (shell_value(match["value"]), number)
        for name, (value, number) in last.items():
            if (name.lower() == "governor" and value) or (
                name == "CPUPOWER_START_OPTS" and GOVERNOR_OPTION.search(value)
            ):
                found.append(f"{path} line {number}: {name}={value}")
    return found


def runs(path: str, command: re.Pattern) -> bool:
    """Whether a line of `path` that is not a comment matches `command`."""
    return any(command.search(re.sub(r"(^|\s)#.*$", "", line)) for line in read_lines(path))


def tlp_udev_rules(dirs: list[str]) -> list[dict]:
    """Rules in force (the first directory holding a name wins) that run tlp auto, whatever their name: a
    renamed copy of TLP's rule runs it as well."""
    in_force: dict[str, str] = {}
    for folder in dirs:
        for path in sorted(glob.glob(os.path.join(glob.escape(folder), "*.rules"))):
            in_force.setdefault(os.path.basename(path), path)
    rules = []
    for name, path in sorted(in_force.items()):
        if runs(path, RUNS_TLP_AUTO):
            override = os.path.join(dirs[0], name)
            rules.append({"name": name, "file": path, "override": override, "overridable": path != override})
    return rules


def tlp_sleep_hooks(dirs: list[str]) -> list[dict]:
    """Executables that run tlp resume, whatever their name. /lib is /usr/lib on a merged-/usr system: a hook
    found through both is the same file, named once."""
    hooks, seen = [], set()
    for folder in dirs:
        for path in sorted(glob.glob(os.path.join(glob.escape(folder), "*"))):
            real = os.path.realpath(path)
            name = os.path.basename(path)
            if real in seen or not (os.path.isfile(path) and os.access(path, os.X_OK)):
                continue
            if runs(path, RUNS_TLP_RESUME):
                seen.add(real)
                hooks.append({"name": name, "file": path})
    return hooks


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "tlp_files": {"type": "list", "elements": "str", "required": True},
            "cpupower_files": {"type": "list", "elements": "str", "required": True},
            "udev_rule_dirs": {"type": "list", "elements": "path", "required": True},
            "sleep_hook_dirs": {"type": "list", "elements": "path", "default": []},
        },
        supports_check_mode=True,
    )
    params = module.params
    module.exit_json(
        changed=False,
        tlp=tlp_settings(params["tlp_files"]),
        cpupower=cpupower_settings(params["cpupower_files"]),
        tlp_udev_rules=tlp_udev_rules(params["udev_rule_dirs"]),
        tlp_sleep_hooks=tlp_sleep_hooks(params["sleep_hook_dirs"]),
    )


if __name__ == "__main__":
    main()
