#!/usr/bin/python
"""Ansible module: the record of what kt_host_tuning changes on a host, kept so that it can be undone.

`record` adds to the JSON state file what the next steps are about to change, as it is before they change it:
the files they write (their content, or that there was none), the folders they create, fstab's /dev/shm lines
(and the whole file, to put back byte for byte), the runtime values (a sysctl, THP, each CPU's governor, the
/dev/shm size) and the units they mask or disable. An entry already in the record is never replaced: a second
run finds the tuned values, not the host's own. The file is root's alone (0600) and written whole (a
temporary file renamed over it), so a cut-off run leaves the old record or the new one.

`mask` masks and stops the governor daemons (systemctl mask --now) and records, for each mask link it made
(<unit_dir>/<unit> -> /dev/null, none there before), that link's identity (device, inode, mtime): undo unmasks
a unit only while its mask is still that link, so a mask an admin made since (or again after an unmask) stays.

`undo` puts back what the record holds (kt_host_tuning_state=absent), then removes it and the folders it made:
the whole record is checked first, so one that cannot be put back fails before anything changes.
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
  action:
    description: >-
      record adds what is not recorded yet; mask masks the units in masked and records the links it made;
      undo puts back what the record holds and removes it.
    type: str
    choices: [record, mask, undo]
    default: record
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
  unit_dir:
    description: Where systemctl mask puts a unit's /dev/null link (mask).
    type: path
    default: /etc/systemd/system
"""

RETURN = r"""
added:
  description: What this call added to the record (file paths, unit names, runtime paths).
  type: list
  elements: str
  returned: record
masked:
  description: The units mask masked (all of masked; none under --check).
  type: list
  elements: str
  returned: mask
done:
  description: What undo put back.
  type: list
  elements: str
  returned: undo
left:
  description: What undo could not put back now, each with why (and until when it stays).
  type: list
  elements: str
  returned: undo
reexec:
  description: undo changed systemd's manager drop-in (system.conf.d): systemd should be re-executed.
  type: bool
  returned: undo
udev_reload:
  description: undo removed or changed a udev rule file: udev should reload its rules.
  type: bool
  returned: undo
"""

SCHEMA = 1
NOTE = (
    "kt_host_tuning: what the host had before the role changed it; kt_host_tuning_state=absent puts it back "
    "and removes this file"
)
SECTIONS = ("files", "dirs", "fstab", "runtime", "masked", "disabled")
# add()'s arguments where a call records nothing of that kind
EMPTY = {"files": [], "dirs": [], "fstab": "", "sysctls": [], "sysctl_root": "/proc/sys", "thp_path": "",
         "cpu_root": "", "shm_path": "", "masked": [], "disabled": []}  # fmt: skip


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


def mask_link(path: str) -> dict | None:
    """The identity of a mask (a symlink to /dev/null) at `path`, None where there is none."""
    try:
        stat = os.lstat(path)
        target = os.readlink(path)
    except OSError:
        return None
    if target != "/dev/null":
        return None
    return {"path": path, "dev": stat.st_dev, "ino": stat.st_ino, "mtime_ns": stat.st_mtime_ns}


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


def mask(module: AnsibleModule, path: str, record: dict | None) -> None:
    """systemctl mask --now each unit of `masked` (recorded first, as it is now), and the links it made."""
    record = record or {"schema": SCHEMA, "note": NOTE}
    units = module.params["masked"]
    wrong = [unit.get("unit") for unit in units if not UNIT_NAME.match(str(unit.get("unit", "")))]
    if wrong:
        module.fail_json(msg=f"masked: {wrong} not unit names; nothing was changed")
    add(record, {**EMPTY, "masked": units})
    if module.check_mode:
        module.exit_json(changed=True, masked=[])
    save(path, record)
    for unit in units:
        link = os.path.join(module.params["unit_dir"], unit["unit"])
        before = mask_link(link)
        rc, out, err = module.run_command(["systemctl", "mask", "--now", unit["unit"]])
        if rc != 0:
            module.fail_json(msg=f"systemctl mask --now {unit['unit']}: {err.strip() or out.strip()}", rc=rc)
        made = mask_link(link)
        if before is None and made is not None:  # a mask that was there already is not the role's to remove
            record["masked"][unit["unit"]]["mask"] = made
            save(path, record)
    module.exit_json(changed=True, masked=[unit["unit"] for unit in units])


UNIT_NAME = re.compile(r"^[A-Za-z0-9@._:\\-]+$")
ACTIVE = ("active", "activating", "reloading")


def check(record: dict) -> None:
    """ValueError naming the first entry that could not be put back as recorded: before anything changes."""
    for path, entry in record.get("files", {}).items():
        if not os.path.isabs(path) or not (entry is None or isinstance(entry, dict)):
            raise ValueError(f"files: {path!r} is not an absolute path with its content or null")
        if entry is not None:
            try:
                base64.b64decode(entry.get("content", ""), validate=True)
            except ValueError as err:
                raise ValueError(f"files: {path} has no base64 content ({err})") from err
            if not re.match(r"^[0-7]{3,4}$", str(entry.get("mode", ""))):
                raise ValueError(f"files: {path} has no mode")
    for path, existed in record.get("dirs", {}).items():
        if not os.path.isabs(path) or not isinstance(existed, bool):
            raise ValueError(f"dirs: {path!r} is not an absolute path with true or false")
    fstab = record.get("fstab", {})
    if fstab and not (os.path.isabs(str(fstab.get("path", ""))) and isinstance(fstab.get("shm_lines"), list)):
        raise ValueError("fstab: no absolute path or no list of /dev/shm lines")
    for path, entry in record.get("runtime", {}).items():
        if not os.path.isabs(path) or not isinstance(entry, dict) or "value" not in entry:
            raise ValueError(f"runtime: {path!r} is not an absolute path with its value")
    for section in ("masked", "disabled"):
        for unit, entry in record.get(section, {}).items():
            if not UNIT_NAME.match(unit) or not isinstance(entry, dict):
                raise ValueError(f"{section}: {unit!r} is not a unit name with its state")
            link = entry.get("mask")
            if link is not None and not (
                isinstance(link, dict) and os.path.isabs(str(link.get("path", "")))
                and all(isinstance(link.get(key), int) for key in ("dev", "ino", "mtime_ns"))
            ):  # fmt: skip
                raise ValueError(f"{section}: {unit}'s mask is not a path with its dev, ino and mtime_ns")


class Undo:
    """Puts back what a record holds; each step says what it did (done) or why it could not (left)."""

    def __init__(self, module: AnsibleModule, record: dict, path: str):
        self.module, self.record, self.path, self.dry = module, record, path, module.check_mode
        self.done: list[str] = []
        self.left: list[str] = []
        self.changed_files: list[str] = []

    def files(self) -> None:
        for path, entry in sorted(self.record.get("files", {}).items()):
            now = file_entry(path)
            if entry is None:
                if os.path.lexists(path):
                    if not self.dry:
                        os.unlink(path)
                    self.changed_files.append(path)
                    self.done.append(f"removed {path}")
            elif now != entry:
                if not self.dry:
                    write_file(path, base64.b64decode(entry["content"]), int(entry["mode"], 8))
                self.changed_files.append(path)
                self.done.append(f"put back {path} as it was")

    def dirs(self) -> None:
        for path, existed in sorted(self.record.get("dirs", {}).items()):
            if existed or not os.path.isdir(path):
                continue
            # under --check the record is still there
            if [name for name in os.listdir(path) if os.path.join(path, name) != self.path]:
                self.left.append(f"{path}: left, it holds files the role did not write")
                continue
            if not self.dry:
                os.rmdir(path)
            self.done.append(f"removed {path}")

    def fstab(self) -> None:
        fstab = self.record.get("fstab", {})
        if not fstab:
            return
        path, original = fstab["path"], fstab.get("original")
        now = file_entry(path)
        now_text = base64.b64decode(now["content"]).decode("utf-8", "replace") if now else ""
        old_text = base64.b64decode(original["content"]).decode("utf-8", "replace") if original else ""
        if now == original or (now and original and now_text == old_text):
            return
        others = [line.rstrip("\n") for line in now_text.splitlines() if line not in shm_lines(now_text)]
        unchanged = others == [line for line in old_text.splitlines() if line not in shm_lines(old_text)]
        if unchanged and original is None:
            if not self.dry:
                os.unlink(path)
            self.done.append(f"removed {path} (there was none)")
            return
        if unchanged:
            text = old_text  # byte for byte: nothing else in it changed since
        else:
            text = with_shm_lines(now_text, fstab["shm_lines"])
            self.left.append(f"{path}: other lines changed since; its /dev/shm lines alone put back")
        if not self.dry:
            mode = int((original or now or {"mode": "0644"})["mode"], 8)
            write_file(path, text.encode(), mode)
        self.done.append(f"put back {path}'s /dev/shm line" + ("s" if len(fstab["shm_lines"]) != 1 else ""))

    def runtime(self) -> None:
        for path, entry in sorted(self.record.get("runtime", {}).items()):
            setting, value = entry.get("setting", path), entry["value"]
            if setting == "shm":
                self.shm(path, int(value))
                continue
            now = runtime_value(path)
            if now is None:
                self.left.append(f"{setting} ({path}): no longer there")
            elif " ".join(str(value).split()) != now:
                try:
                    if not self.dry:
                        with open(path, "w", encoding="utf-8") as out:
                            out.write(f"{value}\n")
                    self.done.append(f"{setting} {now} -> {value}")
                except OSError as err:
                    self.left.append(f"{setting} stays {now} until the next boot ({path}: {err.strerror})")

    def shm(self, path: str, size: int) -> None:
        try:
            stat = os.statvfs(path)
        except OSError as err:
            self.left.append(f"{path}: {err.strerror}")
            return
        now = stat.f_blocks * stat.f_frsize
        if abs(now - size) <= size / 100:  # tmpfs rounds to pages
            return
        if not self.dry:
            rc, _, err = self.module.run_command(["mount", "-o", f"remount,size={size}", path])
            if rc != 0:
                self.left.append(f"{path} stays {now} bytes until the next boot (remount: {err.strip()})")
                return
        self.done.append(f"{path} size {now} -> {size} bytes")

    def systemctl(self, *args: str) -> tuple[int, str]:
        rc, out, err = self.module.run_command(["systemctl", *args])
        return rc, (out.strip() or err.strip())

    def unit_step(self, action: str, unit: str, failed: str, done: str) -> bool:
        """systemctl ACTION UNIT (not in a dry run): `done` noted, or `failed` with systemctl's error."""
        if not self.dry:
            rc, err = self.systemctl(action, unit)
            if rc != 0:
                self.left.append(f"{failed} (systemctl {action}: {err})")
                return False
        self.done.append(done)
        return True

    def units(self) -> None:
        for unit, was in sorted(self.record.get("masked", {}).items()):
            _, state = self.systemctl("is-enabled", unit)
            if state.splitlines()[:1] != ["masked"]:
                # unmasked since by someone else, who also chose whether it runs: started only where the role
                # removed its own mask in this run
                if was.get("active") in ACTIVE and self.systemctl("is-active", unit)[1] not in ACTIVE:
                    why = "unmasked since the role masked it, and not started"
                    self.left.append(f"{unit} stays stopped ({why}): systemctl start {unit} if it should run")
                continue
            made = was.get("mask")
            if made is None or mask_link(made["path"]) != made:
                why = "masked again since the role did" if made else "the role did not make its mask"
                self.left.append(f"{unit} stays masked ({why}): systemctl unmask {unit} if it should run")
                continue
            if not self.unit_step("unmask", unit, f"{unit} stays masked", f"unmasked {unit}"):
                continue
            if was.get("active") in ACTIVE and self.systemctl("is-active", unit)[1] not in ACTIVE:
                self.unit_step("start", unit, f"{unit} was running and is not", f"started {unit}")
        for unit in sorted(self.record.get("disabled", {})):
            _, state = self.systemctl("is-enabled", unit)
            if state.splitlines()[:1] == ["disabled"]:
                self.unit_step("enable", unit, f"{unit} stays disabled", f"enabled {unit}")


def with_shm_lines(text: str, originals: list[str]) -> str:
    """`text` with its /dev/shm lines replaced by `originals`, where the first was (else at the end)."""
    lines, out, placed = text.splitlines(), [], False
    current = shm_lines(text)
    for line in lines:
        if line in current:
            if not placed:
                out.extend(originals)
                placed = True
            continue
        out.append(line)
    if not placed:
        out.extend(originals)
    return "".join(f"{line}\n" for line in out)


def write_file(path: str, content: bytes, mode: int) -> None:
    folder = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=".kt-undo.")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(content)
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


def undo(module: AnsibleModule, path: str, record: dict | None) -> None:
    if record is None:
        msg = f"no record at {path}: nothing to undo (the role did not tune this host, or it was undone)"
        module.exit_json(changed=False, done=[], left=[], reexec=False, udev_reload=False, msg=msg)
    try:
        check(record)
    except ValueError as err:
        module.fail_json(msg=f"{path}: {err}: fix or remove it; nothing was changed")
    steps = Undo(module, record, path)
    steps.files()
    steps.fstab()
    steps.runtime()
    steps.units()
    if not module.check_mode:
        os.unlink(path)
    steps.dirs()  # the record's own folder among them: emptied above
    notes = [f"removed the record {path}"] + steps.done
    if any("/limits.d/" in f for f in steps.changed_files):
        notes.append("logins open now keep their memlock/nofile until they log in again")
    if any("/system.conf.d/" in f for f in steps.changed_files):
        notes.append("services running now keep their limits until restarted (systemd is re-executed)")
    module.exit_json(
        changed=True, done=steps.done, left=steps.left, msg="; ".join(notes + steps.left),
        reexec=any("/system.conf.d/" in f for f in steps.changed_files),
        udev_reload=any(f.endswith(".rules") for f in steps.changed_files),
    )  # fmt: skip


def main() -> None:
    list_of = {"type": "list", "elements": "str", "default": []}
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path", "required": True},
            "action": {"type": "str", "choices": ["record", "mask", "undo"], "default": "record"},
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
            "unit_dir": {"type": "path", "default": "/etc/systemd/system"},
        },
        supports_check_mode=True,
    )
    params = module.params
    try:
        record = load(params["path"])
    except ValueError as err:
        fix = "move it away to record the host anew" if params["action"] == "record" else "fix or remove it"
        module.fail_json(msg=f"{err}: {fix}; nothing was changed")
    if params["action"] == "undo":
        undo(module, params["path"], record)
    if params["action"] == "mask":
        mask(module, params["path"], record)
    record = record or {"schema": SCHEMA, "note": NOTE}
    added = add(record, params)
    if added and not module.check_mode:
        save(params["path"], record)
    module.exit_json(changed=bool(added), added=added)


if __name__ == "__main__":
    main()
