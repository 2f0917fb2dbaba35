#!/usr/bin/python
"""Ansible module: the record of what kt_host_tuning changes on a host, kept so that it can be undone.

`record` adds to the JSON state file what the next steps are about to change, as it is before they change it:
the files they write (their content, or that there was none), the folders they create, fstab's /dev/shm lines
(and the whole file, to put back byte for byte), the runtime values (a sysctl, THP, each CPU's governor, the
/dev/shm size) and the units they mask or disable. An entry already in the record is never replaced: a second
run finds the tuned values, not the host's own. The file is root's alone (0600) and written whole (a
temporary file renamed over it), so a cut-off run leaves the old record or the new one.
"""

from __future__ import annotations

import base64
import glob
import json
import os
import re
import tempfile

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
module: kt_tuning_record
short_description: Record what kt_host_tuning is about to change, as the host has it now
options:
  path:
    description: The JSON state file (created 0600 with its folder where missing).
    type: path
    required: true
  files:
    description: Files the role writes (each recorded with its content and mode, or as absent).
    type: list
    elements: path
    default: []
  dirs:
    description: Folders the role creates (recorded as there or not).
    type: list
    elements: path
    default: []
  fstab:
    description: The fstab whose /dev/shm line the role writes; empty when it does not.
    type: str
    default: ""
  sysctls:
    description: sysctl names the role sets now, read under sysctl_root.
    type: list
    elements: str
    default: []
  sysctl_root:
    type: path
    default: /proc/sys
  thp_path:
    description: The THP mode file the role writes; empty when it does not.
    type: str
    default: ""
  cpu_root:
    description: Where each CPU's cpufreq/scaling_governor is read; empty when the role sets no governor.
    type: str
    default: ""
  shm_path:
    description: The tmpfs whose size the role changes; empty when it does not.
    type: str
    default: ""
  masked:
    description: Units the role masks (systemctl mask --now), each {unit, active, enabled} as they are now.
    type: list
    elements: dict
    default: []
  disabled:
    description: Units the role disables (enabled now).
    type: list
    elements: str
    default: []
"""

RETURN = r"""
added:
  description: What this call added to the record (file paths, unit names, runtime paths).
  type: list
  elements: str
  returned: always
"""

SCHEMA = 1
NOTE = (
    "kt_host_tuning: what the host had before the role changed it; kt_host_tuning_state=absent puts it back "
    "and removes this file"
)
SECTIONS = ("files", "dirs", "fstab", "runtime", "masked", "disabled")


def sysctl_path(root: str, name: str) -> str:
    """sysctl.d's rule, as kt-tune.sh: a name whose first separator is a slash is a path; else dots and
    slashes swap (net.ipv4.conf.eth0/100.rp_filter is .../eth0.100/rp_filter)."""
    head = re.split(r"[./]", name, maxsplit=1)[0]
    rest = name[len(head) :]
    relative = name if rest.startswith("/") else name.translate(str.maketrans("./", "/."))
    return os.path.join(root, relative)


def read_text(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


def runtime_value(path: str) -> str | None:
    """What a sysfs/procfs file holds: THP's bracketed choice, else its text with whitespace collapsed."""
    text = read_text(path)
    if text is None:
        return None
    chosen = re.search(r"\[([^\]]*)\]", text)
    return chosen.group(1) if chosen else " ".join(text.split())


def shm_lines(text: str) -> list[str]:
    """fstab's lines that mount something on /dev/shm (comments and blank lines are not)."""
    found = []
    for line in text.splitlines():
        fields = line.split("#", 1)[0].split()
        if len(fields) > 1 and fields[1] == "/dev/shm":
            found.append(line)
    return found


def file_entry(path: str) -> dict | None:
    try:
        with open(path, "rb") as handle:
            content = handle.read()
        mode = os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        return None
    return {"content": base64.b64encode(content).decode(), "mode": f"{mode:04o}"}


def load(path: str) -> dict | None:
    """The record, None where there is none; ValueError naming what is wrong with one that is unusable."""
    try:
        with open(path, encoding="utf-8") as handle:
            record = json.load(handle)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as err:
        raise ValueError(f"{path} cannot be read as JSON ({err})") from err
    if not isinstance(record, dict) or record.get("schema") != SCHEMA:
        raise ValueError(f"{path} is not a kt_host_tuning record of schema {SCHEMA}")
    for section in SECTIONS:
        if not isinstance(record.get(section, {}), dict):
            raise ValueError(f"{path}: {section} is not a map")
    return record


def save(path: str, record: dict) -> None:
    folder = os.path.dirname(path)
    os.makedirs(folder, mode=0o755, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=".host-tuning.")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(record, out, indent=2, sort_keys=True)
            out.write("\n")
        os.chmod(temporary, 0o600)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


def runtime_now(params: dict) -> dict:
    """path -> {setting, value} of each runtime value the role sets, as it is now; the /dev/shm size apart."""
    now = {}
    for name in params["sysctls"]:
        path = sysctl_path(params["sysctl_root"], name)
        now[path] = {"setting": name, "value": runtime_value(path)}
    if params["thp_path"]:
        now[params["thp_path"]] = {"setting": "thp", "value": runtime_value(params["thp_path"])}
    if params["cpu_root"]:
        pattern = os.path.join(params["cpu_root"], "cpu[0-9]*", "cpufreq", "scaling_governor")
        for path in sorted(glob.glob(pattern)):
            now[path] = {"setting": "governor", "value": runtime_value(path)}
    if params["shm_path"]:
        try:
            stat = os.statvfs(params["shm_path"])
            size = stat.f_blocks * stat.f_frsize
        except OSError:
            size = None
        now[params["shm_path"]] = {"setting": "shm", "value": size}
    return {path: entry for path, entry in now.items() if entry["value"] is not None}


def add(record: dict, params: dict) -> list[str]:
    """Adds to `record` what it does not hold yet; returns what was added."""
    added = []

    def keep(section: str, key: str, value) -> None:
        if key not in record.setdefault(section, {}):
            record[section][key] = value
            added.append(key)

    for path in params["files"]:
        keep("files", path, file_entry(path))
    for path in params["dirs"]:
        keep("dirs", path, os.path.isdir(path))
    if params["fstab"] and "path" not in record.setdefault("fstab", {}):
        original = file_entry(params["fstab"])
        text = base64.b64decode(original["content"]).decode("utf-8", "replace") if original else ""
        record["fstab"] = {"path": params["fstab"], "original": original, "shm_lines": shm_lines(text)}
        added.append(params["fstab"])
    for path, entry in runtime_now(params).items():
        keep("runtime", path, entry)
    for unit in params["masked"]:
        keep("masked", unit["unit"], {"active": unit.get("active", ""), "enabled": unit.get("enabled", "")})
    for unit in params["disabled"]:
        keep("disabled", unit, {"enabled": "enabled"})
    return added


def main() -> None:
    list_of = {"type": "list", "elements": "str", "default": []}
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path", "required": True},
            "files": {"type": "list", "elements": "path", "default": []},
            "dirs": {"type": "list", "elements": "path", "default": []},
            "fstab": {"type": "str", "default": ""},
            "sysctls": list_of,
            "sysctl_root": {"type": "path", "default": "/proc/sys"},
            "thp_path": {"type": "str", "default": ""},
            "cpu_root": {"type": "str", "default": ""},
            "shm_path": {"type": "str", "default": ""},
            "masked": {"type": "list", "elements": "dict", "default": []},
            "disabled": list_of,
        },
        supports_check_mode=True,
    )
    params = module.params
    try:
        record = load(params["path"])
    except ValueError as err:
        module.fail_json(msg=f"{err}: move it away to record the host anew; nothing was changed")
    record = record or {"schema": SCHEMA, "note": NOTE}
    added = add(record, params)
    if added and not module.check_mode:
        save(params["path"], record)
    module.exit_json(changed=bool(added), added=added)


if __name__ == "__main__":
    main()
