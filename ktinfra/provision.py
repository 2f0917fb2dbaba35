"""Run a playbook through ansible-runner and account for what happened, host by host.

The driver adds no logic the playbooks lack: it passes the playbook, inventory, --limit, --tags,
--skip-tags, -e, --check and --diff through unchanged, keeps ansible-runner's artifacts for post-mortems and
turns its event stream into counts (the same ok/changed/failed/unreachable/skipped numbers as
ansible-playbook's recap).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shlex
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import yaml

COUNTERS = ("ok", "changed", "failed", "unreachable", "skipped", "rescued", "ignored")
# playbook_on_stats key -> our counter name
STATS_KEYS = {"ok": "ok", "changed": "changed", "failures": "failed", "dark": "unreachable",
              "skipped": "skipped", "rescued": "rescued", "ignored": "ignored"}  # fmt: skip


DEFAULT_ARTIFACTS = (
    Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state") / "ktinfra" / "runs"
)


class ProvisionError(ValueError):
    """Bad input to the driver, reported before ansible-runner starts."""


@dataclass
class HostCounts:
    ok: int = 0
    changed: int = 0
    failed: int = 0
    unreachable: int = 0
    skipped: int = 0
    rescued: int = 0
    ignored: int = 0


@dataclass
class Failure:
    host: str
    task: str
    kind: str  # failed | unreachable; in recovered: rescued | ignored
    message: str


@dataclass
class RunState:
    """Folds ansible-runner events into the progress view's state and the final report."""

    play: str = ""
    task: str = ""
    hosts: dict[str, HostCounts] = field(default_factory=dict)
    failures: list[Failure] = field(default_factory=list)
    events: int = 0
    recap_seen: bool = False
    plays: int = 0
    plays_without_hosts: int = 0  # plays that matched no host ("skipping: no hosts matched")
    changes: list[dict] = field(
        default_factory=list
    )  # {host, task} of each changed result (--check: predicted)
    # failed/unreachable events the recap does not count: rescued by a block, or ignore_unreachable
    recovered: list[Failure] = field(default_factory=list)
    # --diff: {host, task, diff} of each file difference, as ansible-playbook prints it (without colour)
    diffs: list[dict] = field(default_factory=list)
    # vars_prompt variables ansible-playbook went on to prompt for (none given with -e)
    prompts: list[str] = field(default_factory=list)
    # untimed pause tasks (a `when` kept them from the check before the run) found waiting for Enter
    pauses: list[str] = field(default_factory=list)
    timed_pauses: set[str] = field(default_factory=set)  # task uuids of pauses that said "Pausing for"

    def counts(self, host: str) -> HostCounts:
        return self.hosts.setdefault(host, HostCounts())

    def handle(self, event: dict) -> None:
        self.events += 1
        kind = event.get("event", "")
        data = event.get("event_data") or {}
        host = data.get("host") or data.get("remote_addr")
        if kind == "playbook_on_play_start":
            self.play = data.get("play") or data.get("name") or ""
            self.plays += 1
        elif kind == "playbook_on_vars_prompt":
            self.prompts.append(str(data.get("varname") or ""))
        elif kind == "verbose" and data.get("resolved_action") in PAUSE:
            self._pause_output(data, ANSI.sub("", event.get("stdout") or "").strip())
        elif kind == "playbook_on_no_hosts_matched":
            self.plays_without_hosts += 1
        elif kind == "playbook_on_task_start":
            self.task = data.get("task") or data.get("name") or ""
        elif kind == "runner_on_ok" and host:
            counts = self.counts(host)
            counts.ok += 1
            if (data.get("res") or {}).get("changed"):
                counts.changed += 1
                self.changes.append({"host": host, "task": data.get("task", self.task)})
        elif kind == "runner_on_failed" and host:
            counts = self.counts(host)
            if data.get("ignore_errors"):
                counts.ignored += 1
            else:
                counts.failed += 1
                self.failures.append(Failure(host, data.get("task", self.task), "failed", _message(data)))
        elif kind == "runner_on_unreachable" and host:
            self.counts(host).unreachable += 1
            self.failures.append(Failure(host, data.get("task", self.task), "unreachable", _message(data)))
        elif kind == "runner_on_skipped" and host:
            self.counts(host).skipped += 1
        elif kind == "runner_on_file_diff" and host:
            text = ANSI.sub("", event.get("stdout") or "").replace("\r\n", "\n").strip("\n")
            if text:
                self.diffs.append({"host": host, "task": data.get("task", self.task), "diff": text})
        elif kind == "playbook_on_stats":
            self.apply_recap(data)

    def _pause_output(self, data: dict, text: str) -> None:
        """A pause says 'Pausing for N seconds' first where it is timed; its prompt ('[TASK]' and the
        prompt's text) without that waits for Enter."""
        if text.startswith("Pausing for"):
            self.timed_pauses.add(str(data.get("task_uuid")))
        elif text.startswith("[") and str(data.get("task_uuid")) not in self.timed_pauses:
            self.pauses.append(str(data.get("task") or self.task))

    def apply_recap(self, stats: dict) -> None:
        """ansible's own recap is authoritative (it knows rescued tasks and skips without events). It omits
        zero counts, so every counter of every host comes from it, 0 where it names none: a failure later
        rescued (block/rescue) or an unreachable host under ignore_unreachable stayed counted from its event.
        The failure events the recap does not count move to `recovered` (kind rescued / ignored)."""
        self.recap_seen = True
        hosts = set(self.hosts).union(*((stats.get(key) or {}) for key in (*STATS_KEYS, "processed")))
        for host in hosts:
            counts = self.counts(host)
            for key, name in STATS_KEYS.items():
                setattr(counts, name, int((stats.get(key) or {}).get(host, 0)))
        self._reconcile_failures()

    def _reconcile_failures(self) -> None:
        """Keep as failures only as many of each host's failed/unreachable events as the recap counts, the
        last ones (a host stops at a failure nothing rescues); the earlier ones were rescued or ignored."""
        kept: list[Failure] = []
        left = {}
        for host, counts in self.hosts.items():
            left[(host, "failed")] = counts.failed
            left[(host, "unreachable")] = counts.unreachable
        for failure in reversed(self.failures):
            key = (failure.host, failure.kind)
            if left.get(key, 0) > 0:
                left[key] -= 1
                kept.append(failure)
            else:
                kind = "rescued" if failure.kind == "failed" else "ignored"
                self.recovered.insert(0, Failure(failure.host, failure.task, kind, failure.message))
        self.failures = kept[::-1]

    @property
    def bad_hosts(self) -> list[str]:
        return sorted(h for h, c in self.hosts.items() if c.failed or c.unreachable)

    @property
    def targeted(self) -> bool:
        """Some play matched a host (a --tags that selects no task still targets its hosts)."""
        return bool(self.hosts) or self.plays > self.plays_without_hosts


def _message(data: dict) -> str:
    res = data.get("res") or {}
    # a no_log task's result holds only Ansible's "the output has been hidden ..." (was an empty message)
    msg = res.get("msg") or res.get("stderr") or res.get("reason") or res.get("censored") or ""
    if not msg and res.get("results"):
        msgs = [r.get("msg") for r in res["results"] if isinstance(r, dict) and r.get("failed")]
        msg = "; ".join(str(m) for m in msgs if m)
    return str(msg).strip()[:2000]


@dataclass
class ProvisionRequest:
    playbook: Path
    inventory: Path | list[Path]  # several: each one an -i, merged by Ansible as ansible-playbook -i A -i B
    limit: str | None = None
    tags: str | None = None
    extra_vars: list[str] = field(default_factory=list)
    artifacts: Path = DEFAULT_ARTIFACTS
    check: bool = False  # ansible-playbook --check: predict changes, make none
    diff: bool = False
    skip_tags: str | None = None  # ansible-playbook --skip-tags (comma-separated)

    @property
    def inventories(self) -> list[Path]:
        return list(self.inventory) if isinstance(self.inventory, (list, tuple)) else [self.inventory]

    def validate(self) -> None:
        if not self.playbook.is_file():
            state = "is not a file" if self.playbook.exists() else "does not exist"
            raise ProvisionError(f"playbook {self.playbook} {state}")
        if not self.inventories:
            raise ProvisionError("no inventory given")
        for inventory in self.inventories:
            if not inventory.exists() and not _host_list(inventory):
                message = f"inventory {inventory} does not exist"
                # `-i gpu1` is a path to Ansible too: a host list has a comma
                if os.sep not in str(inventory):
                    message += f" (to name a host, end it with a comma: -i '{inventory},')"
                raise ProvisionError(message)
        vaulted = []
        for value in self.extra_vars:
            if value == "@":  # Path("") is the current directory
                raise ProvisionError("-e @ names no extra-vars file (-e @FILE)")
            if value.startswith("@") and not _vars_file(value).is_file():
                state = "is not a file" if _vars_file(value).exists() else "does not exist"
                raise ProvisionError(f"extra-vars file {value[1:]} {state}")
            if _check_extra_vars(value):
                vaulted.append(f"extra-vars file {value[1:]}" if value.startswith("@") else f"-e {value!r}")
        prompts = _configured_prompts()
        if prompts:
            raise ProvisionError(
                f"{prompts[0]}: ansible-playbook would wait at a prompt ktinfra provision cannot answer; "
                "unset it (a vault password: ANSIBLE_VAULT_PASSWORD_FILE)"
            )
        refused = unknown_tags(self)
        if refused:
            raise ProvisionError("; ".join(refused))
        pauses, debuggers, prompted = interactive_tasks(self)
        if prompted:
            name, where = prompted[0]
            raise ProvisionError(_vars_prompt_refusal(where, name, name))
        if debuggers:
            raise ProvisionError(
                f"{debuggers[0]}: the task debugger would wait at its prompt, which ktinfra provision cannot "
                "answer: remove it (or set debugger: never)"
            )
        if pauses:
            pause, skip = pauses[0]
            raise ProvisionError(_untimed_pause_refusal(pause, skip))
        if vaulted and _vault_password_configured() is False:
            raise ProvisionError(
                f"{vaulted[0]} holds ansible-vault data and no vault password is configured: set "
                "ANSIBLE_VAULT_PASSWORD_FILE (or vault_password_file / vault_identity_list in ansible.cfg); "
                "ktinfra provision cannot prompt for it"
            )
        # the nearest existing ancestor must be a directory (the path itself one or absent)
        existing = next(p for p in (self.artifacts, *self.artifacts.parents) if p.exists())
        if not existing.is_dir():
            raise ProvisionError(f"artifacts {self.artifacts}: {existing} is not a directory")

    def cmdline(self, extra_vars: list[str] | None = None) -> str:
        """ansible-playbook's -e (`extra_vars` as passed, else as given: key=value, JSON/YAML, @file made
        absolute), --check and --diff."""
        if extra_vars is None:
            extra_vars = [arg for arg, _ in _passed_extra_vars(self.extra_vars, None)]
        flags = ["--check"] * self.check + ["--diff"] * self.diff
        return shlex.join([arg for value in extra_vars for arg in ("-e", value)] + flags)


def _passed_extra_vars(values: list[str], private: Path | None) -> list[tuple[str, str]]:
    """Each -e as ansible-playbook gets it, with the value given: an @FILE made absolute; with `private` (the
    run's own 0700 folder) a key=value or JSON/YAML value written to a 0600 file there and given as @ it. On
    ansible-playbook's command line a token or password given with -e was in /proc/PID/cmdline, which every
    user of the controller reads (ps), for as long as the run went."""
    passed = []
    for number, value in enumerate(values, 1):
        if value.startswith("@"):
            path = f"@{_vars_file(value).resolve()}"
            passed.append((path, path))
            continue
        text = None if private is None else _extra_vars_text(value)
        if text is None:
            passed.append((value, value))
            continue
        path = private / f"extra-vars-{number}.yml"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
        with os.fdopen(os.open(path, flags, 0o600), "w", encoding="utf-8", errors="surrogateescape") as out:
            out.write(text)
        passed.append((f"@{path}", value))
    return passed


def _extra_vars_text(value: str) -> str | None:
    """An -e value as the text of a vars file from which ansible-playbook reads the same variables: JSON/YAML
    as given (Ansible parses both with the same loader, and trusts both as templates), key=value pairs as
    Ansible splits them, every value a string as there. None where Ansible cannot be imported here to split
    them: that -e stays on the command line."""
    if value.startswith(("{", "[")):
        return value
    try:
        from ansible.parsing.splitter import parse_kv
    except ImportError:
        return None
    pairs = {str(name): str(text) for name, text in parse_kv(value).items()}
    # YAML, not JSON: Ansible reads a file as JSON first, where a lone "__ansible_unsafe" key means something
    dumped = yaml.safe_dump(pairs, default_style='"', allow_unicode=True, sort_keys=False, width=1 << 30)
    return "# -e key=value pairs, each value a string, as Ansible splits them\n" + dumped


def _host_list(inventory: Path) -> bool:
    """`-i 'gpu1,10.0.0.12,'`: hosts named on the command line (Ansible's host_list plugin: a comma, no such
    path)."""
    return "," in str(inventory) and not inventory.exists()


def _vars_file(value: str) -> Path:
    """The file of `-e @FILE`; Ansible expands a leading ~ (which the shell leaves after the @)."""
    return Path(value[1:]).expanduser()


class _AnsibleTagsLoader(yaml.SafeLoader):
    """safe_load that takes Ansible's own YAML tags (`!vault |` an encrypted value, `!unsafe` a value never
    templated) as what they tag: only whether the text parses into a mapping is checked here."""

    vault = False  # a !vault value was read


def _construct_tagged(loader: _AnsibleTagsLoader, suffix: str, node: yaml.Node) -> object:
    loader.vault = loader.vault or suffix == "vault"
    if isinstance(node, yaml.ScalarNode):
        return loader.construct_scalar(node)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node)
    return loader.construct_mapping(node)  # type: ignore[arg-type]


_AnsibleTagsLoader.add_multi_constructor("!", _construct_tagged)


def _vault_password_configured() -> bool | None:
    """Whether ansible-playbook run from here has a vault password (ANSIBLE_VAULT_PASSWORD_FILE, ansible.cfg's
    vault_password_file or vault_identity_list, ...); None where that cannot be told."""
    try:
        from ansible.config.manager import ConfigManager

        manager = ConfigManager()
        keys = ("DEFAULT_VAULT_PASSWORD_FILE", "DEFAULT_VAULT_IDENTITY_LIST")
        return any(manager.get_config_value(key) for key in keys)
    except Exception:  # ansible-playbook from another environment, an ansible.cfg it cannot read: it says
        return None


# settings that make ansible-playbook ask for a password before its first play (each as ansible.cfg names it)
PROMPT_SETTINGS = {
    "DEFAULT_ASK_VAULT_PASS": "ask_vault_pass",
    "DEFAULT_ASK_PASS": "ask_pass",
    "DEFAULT_BECOME_ASK_PASS": "become_ask_pass",
    "ENABLE_TASK_DEBUGGER": "enable_task_debugger",  # its prompt opens at a failed task
}


def _configured_prompts() -> list[str]:
    """What makes ansible-playbook run from here prompt for a password (ask_vault_pass, ask_pass,
    become_ask_pass or a vault_identity_list entry LABEL@prompt) or open the task debugger
    (enable_task_debugger, the debug strategy), with where it is set. Under ansible-runner the prompt waits on
    a terminal nobody types into: the run hung with no event until killed."""
    try:
        from ansible.config.manager import ConfigManager

        manager = ConfigManager()
        found = []
        for key, name in PROMPT_SETTINGS.items():
            value, origin = manager.get_config_value_and_origin(key)
            if value:
                found.append(f"{name} is set ({origin})")
        identities, origin = manager.get_config_value_and_origin("DEFAULT_VAULT_IDENTITY_LIST")
        for identity in identities or []:
            if identity.split("@", 1)[-1] in ("prompt", "prompt_ask_vault_pass"):
                found.append(f"vault_identity_list holds {identity} ({origin})")
        strategy, origin = manager.get_config_value_and_origin("DEFAULT_STRATEGY")
        if strategy in DEBUG_STRATEGY:
            found.append(f"strategy is {strategy} ({origin})")
        return found
    except Exception:  # ansible-playbook from another environment, an ansible.cfg it cannot read: it says
        return []


# Untimed `pause` (no seconds/minutes) waits for Enter. Ansible skips the wait where stdin is no terminal, but
# ansible-runner gives ansible-playbook one that nobody types into: the run hung at the prompt for ever. An
# untimed pause is a person's go-ahead (e.g. before a reboot), so it is refused, not skipped.
def _names(*short: str) -> frozenset[str]:
    prefixes = ("", "ansible.builtin.", "ansible.legacy.")
    return frozenset(prefix + name for name in short for prefix in prefixes)


PAUSE = _names("pause")
TASK_FILES = _names("import_tasks", "include_tasks", "include")
ROLE_TASKS = _names("import_role", "include_role")
PLAYBOOKS = _names("import_playbook")
ACTIONS = PAUSE | TASK_FILES | ROLE_TASKS
DEBUG_STRATEGY = _names("debug")
DEBUGGER_ON = frozenset({"always", "on_failed", "on_unreachable", "on_skipped"})


def _task_action(task: dict) -> tuple[str, object]:
    """The task's module among ACTIONS and its arguments (`module: args`, `action:`/`local_action:`)."""
    for key in ("action", "local_action"):
        value = task.get(key)
        if isinstance(value, dict):
            return str(value.get("module", "")), {k: v for k, v in value.items() if k != "module"}
        if isinstance(value, str):
            module, _, args = value.strip().partition(" ")
            return module, args
    key = next((key for key in task if key in ACTIONS), "")
    return key, task.get(key)


def _kv(args: object) -> dict | None:
    """A task's arguments as a mapping; None where Ansible would refuse them (it says why)."""
    if args is None or isinstance(args, dict):
        return args or {}
    if not isinstance(args, str):
        return None
    try:
        from ansible.parsing.splitter import parse_kv

        return parse_kv(args)
    except Exception:
        return None


def _tags(task: dict) -> set[str]:
    tags = task.get("tags") or []
    tags = tags.split(",") if isinstance(tags, str) else tags
    return {str(tag).strip() for tag in tags if isinstance(tag, (str, int))}


class PauseScan:
    """Finds the untimed pause tasks ansible-playbook would run (ignoring `when`: a conditional one is left to
    the run, which stops at its prompt): in plays, blocks, handlers, imported playbooks, roles (and their
    dependencies) and task files named without Jinja. --tags/--skip-tags are applied as Ansible does."""

    def __init__(self, request: ProvisionRequest) -> None:
        self.base = Path(os.path.abspath(request.playbook)).parent
        ours = None if "ANSIBLE_ROLES_PATH" in os.environ else roles_path_env(request.playbook)
        configured = ours.split(os.pathsep) if ours else configured_roles_path()
        self.roles_path = [self.base / "roles", *map(Path, configured), self.base]
        self.only = {t.strip() for t in (request.tags or "all").split(",") if t.strip()} or {"all"}
        self.skip = {t.strip() for t in (request.skip_tags or "").split(",") if t.strip()}
        self.read: set[tuple[Path, frozenset[str]]] = set()  # each file once per set of tags it inherits
        self.found: list[tuple[str, str]] = []  # untimed pauses: (which, how to skip it)
        self.debuggers: list[str] = []  # plays, blocks and tasks that open the task debugger
        self.given = _extra_var_names(request.extra_vars)
        self.prompted: list[tuple[str, str]] = []  # vars_prompt (name, file) no -e gives

    # a block's parts walked (rescue: only after a failure)
    BLOCK_PARTS = ("block", "always")

    def skips(self, item: dict) -> bool:
        """A task or role left to the run: a `when` may keep it from running."""
        return "when" in item

    def tags_of(self, item: dict) -> set[str]:
        return _tags(item)

    def unresolved(self, what: str) -> None:
        """What the walk cannot follow (a templated name, a role it does not find, YAML it cannot read)."""

    def task_files(self, name: str, folders: list[Path]) -> list[Path]:
        """The task file an include or import names, as Ansible finds it (none for a templated name)."""
        found = next((f / name for f in folders if "{{" not in name and (f / name).is_file()), None)
        return [found] if found else []

    def debugger(self, item: dict, what: str, path: Path) -> None:
        name = item.get("name")
        where = f"{what} {name!r} in {_shown(path)}" if name else f"a {what} in {_shown(path)}"
        if str(item.get("debugger")) in DEBUGGER_ON:
            self.debuggers.append(f"{where} sets debugger: {item['debugger']}")
        if what == "play" and str(item.get("strategy")) in DEBUG_STRATEGY:
            self.debuggers.append(f"{where} sets strategy: {item['strategy']}")

    def runs(self, tags: set[str]) -> bool:
        """Taggable.evaluate_tags; a templated tag may be anything: taken as selected, not skipped."""
        if any("{{" in tag for tag in tags):
            return True
        tags = tags or {"untagged"}
        selected = (
            "always" in tags
            or ("all" in self.only and "never" not in tags)
            or not tags.isdisjoint(self.only)
            or ("tagged" in self.only and tags != {"untagged"} and "never" not in tags)
        )
        if not selected or not self.skip:
            return selected
        if "all" in self.skip:
            return "always" in tags and "always" not in self.skip
        return tags.isdisjoint(self.skip) and not ("tagged" in self.skip and tags != {"untagged"})

    def load(self, path: Path, tags: set[str] | frozenset[str] = frozenset()) -> list:
        key = (path.resolve(), frozenset(tags))
        if key in self.read:
            return []
        if not path.is_file():
            self.unresolved(str(path))
            return []
        self.read.add(key)
        try:
            data = yaml.load(path.read_text(encoding="utf-8"), Loader=_AnsibleTagsLoader)
        except (OSError, UnicodeDecodeError, yaml.YAMLError):  # ansible-playbook says what is wrong
            self.unresolved(str(path))
            return []
        return data if isinstance(data, list) else []

    def playbook(self, path: Path) -> None:
        for play in self.load(path):
            if not isinstance(play, dict):
                continue
            imported = next((play[key] for key in PLAYBOOKS if key in play), None)
            if any(key in play for key in PLAYBOOKS):
                self.tags_of(play)
                if isinstance(imported, str) and "{{" not in imported:
                    self.playbook(path.parent / imported)
                else:
                    self.unresolved(f"import_playbook {imported!r}")
                continue
            self.debugger(play, "play", path)
            for entry in play.get("vars_prompt") or [] if self.given is not None else []:
                name = entry.get("name") if isinstance(entry, dict) else None
                if isinstance(name, str) and "{{" not in name and name not in self.given:
                    self.prompted.append((name, _shown(path)))
            tags = self.tags_of(play)
            self.roles(play.get("roles"), tags, path)
            for key in ("pre_tasks", "tasks", "post_tasks", "handlers"):
                self.tasks(play.get(key), tags, path, None)

    def roles(self, entries: object, tags: set[str], where: Path) -> None:
        """A play's roles: or a role's dependencies: (`name`, or a mapping with role: or name:)."""
        for entry in entries if isinstance(entries, list) else []:
            entry = {"role": entry} if isinstance(entry, str) else entry
            name = entry.get("role") or entry.get("name") if isinstance(entry, dict) else None
            if not isinstance(name, str):
                self.unresolved(f"role {entry!r}")
            elif not self.skips(entry):
                self.role(name, tags | self.tags_of(entry), where)

    def role(
        self, name: str, tags: set[str], where: Path, tasks: str = "main", handlers: str = "main"
    ) -> None:
        folders = [where.parent / name] if "/" in name else [root / name for root in self.roles_path]
        folder = next((f for f in folders if f.is_dir()), None) if "{{" not in name else None
        if folder is None:  # a collection's role, or none: ansible-playbook finds it or says so
            self.unresolved(f"role {name!r}")
            return
        meta = folder / "meta"
        self.roles(_yaml_mapping(meta, "main").get("dependencies"), tags, meta / "main.yml")
        for sub, stem in (("tasks", tasks), ("handlers", handlers)):
            path = _main_path(folder / sub, stem)
            if path:
                self.tasks(self.load(path, tags), tags, path, folder)

    def tasks(self, tasks: object, tags: set[str], path: Path, role: Path | None) -> None:
        for task in tasks if isinstance(tasks, list) else []:
            if isinstance(task, dict):
                self.debugger(task, "block" if "block" in task else "task", path)
            if not isinstance(task, dict) or self.skips(task):
                continue
            own = tags | self.tags_of(task)
            if "block" in task:
                for part in self.BLOCK_PARTS:
                    self.tasks(task.get(part), own, path, role)
                continue
            action, args = _task_action(task)
            args = _kv(args)
            if args is None:
                continue
            args = {**args, **(task.get("args") if isinstance(task.get("args"), dict) else {})}
            self.tags_of(args["apply"] if isinstance(args.get("apply"), dict) else {})
            # an import's tasks take its tags; an include's tasks only run if it does, with their own
            imported = action.endswith(("import_tasks", "import_role"))
            inherited = own if imported else tags
            if action in PAUSE:
                if self.runs(own) and args.get("seconds") is None and args.get("minutes") is None:
                    name = task.get("name") or action
                    tag = next((t for t in sorted(own) if "{{" not in t and t != "always"), None)
                    skip = (
                        f"leave it out with --skip-tags {tag}"
                        if tag
                        else "tag it to skip it with --skip-tags"
                    )
                    self.found.append((f"task {name!r} ({action}) in {_shown(path)}", skip))
            elif not (imported or self.runs(own)):
                continue
            elif action in TASK_FILES and isinstance(args.get("file") or args.get("_raw_params"), str):
                name = args.get("file") or args.get("_raw_params")
                folders = [path.parent, *([role / "tasks"] if role else []), self.base]
                found = self.task_files(name, folders)
                for each in found:
                    self.tasks(self.load(each, inherited), inherited, each, role)
                if not found:
                    self.unresolved(f"{action} {name!r}")
            elif action in ROLE_TASKS and isinstance(args.get("name"), str):
                stems = (args.get("tasks_from") or "main", args.get("handlers_from") or "main")
                self.role(args["name"], inherited, path, *stems)
            elif action in TASK_FILES | ROLE_TASKS:
                self.unresolved(f"{action} {args!r}")


class TagScan(PauseScan):
    """Every tag the playbook gives a play, role, block or task (`when` or --tags aside; an include's
    `apply: {tags: ...}` too); `complete` is False where some of it cannot be read from here (a templated tag
    or name, a collection's role), so that a tag it lacks may still be there."""

    BLOCK_PARTS = ("block", "rescue", "always")

    def __init__(self, request: ProvisionRequest) -> None:
        super().__init__(request)
        self.known: set[str] = set()
        self.complete = True

    def runs(self, tags: set[str]) -> bool:
        return True

    def skips(self, item: dict) -> bool:
        return False

    def task_files(self, name: str, folders: list[Path]) -> list[Path]:
        """A templated name (`{{ manager }}.yml`): every file it may name in the first folder that has one."""
        if "{{" not in name:
            return super().task_files(name, folders)
        pattern = re.sub(r"{{.*?}}", "*", name)
        found = ([path for path in sorted(folder.glob(pattern)) if path.is_file()] for folder in folders)
        return next((paths for paths in found if paths), [])

    def tags_of(self, item: dict) -> set[str]:
        tags = _tags(item)
        if any("{{" in tag for tag in tags) or isinstance(item.get("tags"), str) and "{{" in item["tags"]:
            self.complete = False
        self.known |= tags
        return tags

    def unresolved(self, what: str) -> None:
        self.complete = False


# what --tags / --skip-tags select without any task having them (`always`: a play's fact gathering has it)
SPECIAL_TAGS = frozenset({"all", "always", "tagged", "untagged"})


def unknown_tags(request: ProvisionRequest) -> list[str]:
    """'--tags X' / '--skip-tags X' refusals for tags that nothing in the playbook has: Ansible runs nothing
    (or skips nothing) and exits 0. None where the walk could not read all of the playbook."""
    given = {"--tags": request.tags, "--skip-tags": request.skip_tags}
    wanted = {
        option: [t.strip() for t in (value or "").split(",") if t.strip() and t.strip() not in SPECIAL_TAGS]
        for option, value in given.items()
    }
    if not any(wanted.values()):
        return []
    scan = TagScan(request)
    scan.playbook(Path(os.path.abspath(request.playbook)))
    if not scan.complete:
        return []
    known = ", ".join(sorted(scan.known - SPECIAL_TAGS)) or "none"
    refusals = []
    for option, tags in wanted.items():
        missing = [tag for tag in tags if tag not in scan.known]
        if missing:
            what = "this tag" if len(missing) == 1 else "these tags"
            verb = "run" if option == "--tags" else "skip"
            refusals.append(
                f"{option} {','.join(missing)}: no play, role, block or task of {request.playbook} has "
                f"{what}, so Ansible would {verb} nothing of it; its tags: {known} "
                f"(and {', '.join(sorted(SPECIAL_TAGS))})"
            )
    return refusals


def _main_path(folder: Path, stem: str) -> Path | None:
    """A role's tasks/STEM (tasks_from: STEM), as Ansible finds it: STEM, STEM.yml, STEM.yaml, STEM.json."""
    paths = (folder / f"{stem}{ext}" for ext in (".yml", ".yaml", "", ".json"))
    return next((path for path in paths if path.is_file()), None)


def _yaml_mapping(folder: Path, stem: str) -> dict:
    path = _main_path(folder, stem)
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_AnsibleTagsLoader) if path else None
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return {}
    return data if isinstance(data, dict) else {}


def _shown(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def interactive_tasks(
    request: ProvisionRequest,
) -> tuple[list[tuple[str, str]], list[str], list[tuple[str, str]]]:
    """The untimed pauses the playbook would run, what in it opens the task debugger, and its vars_prompt
    variables that no -e gives (name, file)."""
    scan = PauseScan(request)
    scan.playbook(Path(os.path.abspath(request.playbook)))
    return scan.found, scan.debuggers, scan.prompted


def _extra_var_names(values: list[str]) -> set[str] | None:
    """The variables the -e values give (checked by _check_extra_vars); None where that cannot be told here
    (an ansible-vault file, ansible-playbook from another environment)."""
    names: set[str] = set()
    for value in values:
        if value.startswith("@"):
            text = _vars_file(value).read_text(encoding="utf-8")
            if text.startswith("$ANSIBLE_VAULT"):
                return None
        elif value.startswith(("{", "[")):
            text = value
        else:
            try:
                from ansible.parsing.splitter import parse_kv
            except ImportError:
                return None
            names.update(parse_kv(value))
            continue
        data = yaml.load(text, Loader=_AnsibleTagsLoader)
        names.update(map(str, data if isinstance(data, dict) else {}))
    return names


def _check_extra_vars(value: str) -> bool:
    """-e JSON/YAML (or @file) Ansible cannot parse: Ansible reports it as an inventory it could not parse.
    True where it holds ansible-vault data (without a vault password Ansible blames the inventory too)."""
    if value.startswith("@"):
        where = f"extra-vars file {value[1:]}"
        try:
            text = _vars_file(value).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise ProvisionError(f"{where} cannot be read: {error}") from None
        if text.startswith("$ANSIBLE_VAULT"):  # ansible-vault encrypted: Ansible decrypts and checks it
            return True
    elif value.startswith(("{", "[")):  # Ansible's test: only a first { or [ makes it JSON/YAML
        where, text = f"-e {value!r}", value
    elif "=" not in value and (value.startswith(("/", ".", "~")) or Path(value).expanduser().is_file()):
        raise ProvisionError(f"-e {value!r}: prefix an extra-vars file with @ (-e @{value})")
    elif "=" not in value:  # Ansible reads it as key=value pairs, finds none and drops it without a word
        raise ProvisionError(
            f"-e {value!r} is neither key=value pairs nor JSON/YAML starting with {{ or [ "
            "(nor @FILE); Ansible would ignore it"
        )
    else:
        _check_key_value(value)
        return False
    loader = _AnsibleTagsLoader(text)
    try:
        data = loader.get_single_data()
    except yaml.YAMLError as error:
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise ProvisionError(f"{where} is not valid YAML/JSON: {problem}") from None
    finally:
        loader.dispose()
    if data is None:  # an empty or comments-only file: Ansible refuses it, blaming the inventory
        raise ProvisionError(f"{where} is empty (or only comments): Ansible needs a mapping of variables")
    if not isinstance(data, dict):
        raise ProvisionError(f"{where} must hold a mapping of variables, not a {type(data).__name__}")
    return loader.vault


def _check_key_value(value: str) -> None:
    """-e key=value as Ansible splits it (at spaces; quotes and Jinja blocks kept whole). Ansible refused an
    unbalanced one while parsing the inventory (and so blamed it), and took `k=my secret` as k=my plus a
    variable _raw_params=secret."""
    try:
        from ansible.parsing.splitter import parse_kv
    except ImportError:  # ansible-playbook from another environment: it says
        return
    try:
        pairs = parse_kv(value)
    except Exception as error:
        problem = (str(error).splitlines() or [type(error).__name__])[0]
        raise ProvisionError(
            f"-e {value!r}: Ansible cannot split it into key=value pairs: {problem}"
        ) from None
    if "_raw_params" in pairs:
        raise ProvisionError(
            f"-e {value!r}: {pairs['_raw_params']!r} is no key=value pair (Ansible would drop it; it splits "
            'at spaces): quote a value with spaces (key="a b") or give JSON'
        )


def roles_path_for(playbook: Path) -> str | None:
    """The nearest roles/ above the playbook (a checkout's playbooks/ or molecule/<scenario>/)."""
    for parent in list(playbook.resolve().parents)[1:4]:
        if (parent / "roles").is_dir():
            return str(parent / "roles")
    return None


# ansible-core's default roles_path (its ANSIBLE_HOME is ~/.ansible unless set)
DEFAULT_ROLES_PATH = ("{home}/roles", "/usr/share/ansible/roles", "/etc/ansible/roles")


def configured_roles_path() -> list[str]:
    """roles_path as ansible-playbook run from here would take it (ansible.cfg of the cwd, ~/.ansible.cfg,
    ANSIBLE_CONFIG, ...); ansible-core's default where nothing sets it."""
    try:
        from ansible.config.manager import ConfigManager
    except ImportError:  # ansible-playbook from another environment: its defaults
        value, origin = None, "default"
    else:
        try:
            value, origin = ConfigManager().get_config_value_and_origin("DEFAULT_ROLES_PATH")
        except Exception:  # an ansible.cfg Ansible cannot read (was a traceback): ansible-playbook says so
            value, origin = None, "default"
    if origin == "default" or not value:  # the default is a template ConfigManager does not render
        home = os.environ.get("ANSIBLE_HOME") or os.path.expanduser("~/.ansible")
        return [path.format(home=home) for path in DEFAULT_ROLES_PATH]
    return [str(path) for path in value]


def roles_path_env(playbook: Path) -> str | None:
    """ANSIBLE_ROLES_PATH for the run: the checkout's roles/ first, then what is configured (replacing it
    made a cwd ansible.cfg's roles_path and ~/.ansible/roles unreachable: "the role 'x' was not found")."""
    ours = roles_path_for(playbook)
    if ours is None:
        return None
    return os.pathsep.join([ours, *(path for path in configured_roles_path() if path != ours)])


def ansible_playbook() -> str:
    """ansible-playbook on PATH, else the one installed beside this interpreter (an unactivated venv)."""
    beside = Path(sys.executable).parent / "ansible-playbook"
    found = shutil.which("ansible-playbook") or (str(beside) if beside.is_file() else None)
    if not found:
        raise ProvisionError("ansible-playbook not found: pip install 'ktinfra[ops]'")
    return found


class Interrupt:
    """Ctrl-C / SIGTERM / SIGHUP during a run (ansible-runner's cancel callback). Runner's own cancel SIGKILLs
    the ansible-playbook process group only, but each Ansible worker is a session leader of its own: the
    worker and the module it runs (a wait_for, a pip install) went on after ktinfra had exited. So the
    playbook process is asked first, as a Ctrl-C in its terminal would: SIGINT (Ansible ends its workers
    and says 'User interrupted execution'), SIGTERM after GRACE seconds, and only GRACE seconds later (or
    at the third signal) runner's SIGKILL of the group. Another signal moves on to the next step at once."""

    GRACE = 5.0
    POLL = 0.25  # ansible-runner checks the callback once per pexpect timeout (default 5 s)

    def __init__(self) -> None:
        self.signals = 0
        self.first: float | None = None
        self.sent: list[int] = []
        self.previous: dict[int, object] = {}

    def __enter__(self) -> Interrupt:
        if threading.current_thread() is threading.main_thread():
            # SIGHUP: the controller's terminal went away (a dropped ssh session); by default it ended ktinfra
            # at once and left Ansible's workers and modules running, as runner's own cancel did
            for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                self.previous[number] = signal.signal(number, self._handler)
        return self

    def __exit__(self, *exc: object) -> None:
        for number, handler in self.previous.items():  # the caller's handlers again
            signal.signal(number, handler)

    def _handler(self, number: int, frame: object) -> None:
        self.signals += 1
        self.first = self.first or time.monotonic()

    def stop(self) -> None:
        """Stop the run as a Ctrl-C would, though nobody pressed one (the run is not 'canceled')."""
        self.first = self.first or time.monotonic()

    @staticmethod
    def _playbook_pids() -> list[int]:
        """This process's children running ansible-playbook (runner forks it through pexpect)."""
        me, found = os.getpid(), []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                cmdline = (entry / "cmdline").read_bytes()
            except (OSError, IndexError, ValueError):
                continue
            if ppid == me and b"ansible-playbook" in cmdline:
                found.append(int(entry.name))
        return found

    def __call__(self) -> bool:
        if self.first is None:
            return False
        waited = time.monotonic() - self.first
        step = max(self.signals - 1, 0, *(n for n in (1, 2) if waited >= n * self.GRACE))
        if step >= 2:
            return True  # runner SIGKILLs the ansible-playbook process group
        wanted = (signal.SIGINT, signal.SIGTERM)[step]
        if wanted not in self.sent:
            pids = self._playbook_pids()
            if not pids:  # it has exited (a zombie has no cmdline): runner reaps it and keeps its status;
                return False  # cancelling now made a finished run rc 254 'canceled'
            for pid in pids:
                try:
                    os.kill(pid, wanted)
                except ProcessLookupError:
                    pass
            self.sent.append(wanted)
        return False


def _make_run_dir(request: ProvisionRequest, run_dir: Path) -> None:
    """The run's artifact folder and its job_events/, as ansible-runner makes them (0700; it takes them as
    they are). Made by ansible-runner, an existing artifacts folder it could not write in (another user's, a
    read-only mount) was a traceback; now it is bad input, and nothing of the run is left."""
    try:
        run_dir.mkdir(mode=0o700)
        (run_dir / "job_events").mkdir(mode=0o700)
    except OSError as exc:
        shutil.rmtree(run_dir, ignore_errors=True)
        raise ProvisionError(
            f"artifacts {request.artifacts}: cannot write in it ({exc.strerror or exc})"
        ) from exc


# variables whose values a run's `command` file keeps (Ansible's settings, paths); the others are hidden
KEPT_ENV = re.compile(r"^(ANSIBLE_|RUNNER_|AWX_|LC_)|^(PATH|PYTHONPATH|HOME|PWD|LANG|VIRTUAL_ENV)$")
SECRET_ENV = re.compile(r"PASS(WORD)?$|TOKEN|SECRET|_KEY$|CREDENTIAL", re.IGNORECASE)
HIDDEN = "(hidden by ktinfra)"


def _hidden_extra_vars(value: str) -> str:
    """An -e value as the `command` file keeps it: its variables' names, each with HIDDEN for its value (an
    @FILE stays: a path)."""
    if value.startswith("@"):
        return value
    try:
        if value.startswith(("{", "[")):
            data = yaml.load(value, Loader=_AnsibleTagsLoader)
            return json.dumps(dict.fromkeys(map(str, data if isinstance(data, dict) else {}), HIDDEN))
        from ansible.parsing.splitter import parse_kv

        return " ".join(f"{name}={HIDDEN}" for name in parse_kv(value))
    except Exception:  # validate() let it through: hidden whole
        return HIDDEN


def _hide_environment(artifact_dir: Path, given: dict[str, str] | None = None) -> None:
    """ansible-runner writes the controller's whole environment into the run's `command` file, kept for 50
    runs: an HF_TOKEN, a cloud key, anything exported in the shell lay on disk. Values other than Ansible's
    settings and paths are replaced (the names stay, for post-mortems); so are the -e values of its command
    line (`-e hf_token=...` lay there too). `given`: each -e argument passed -> the value given (a run's own
    extra-vars file is shown as the -e it holds, hidden so)."""
    path = artifact_dir / "command"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    env = data.get("env") if isinstance(data, dict) else None
    if not isinstance(env, dict):
        return
    data["env"] = {
        name: value if KEPT_ENV.search(name) and not SECRET_ENV.search(name) else HIDDEN
        for name, value in env.items()
    }
    command = data.get("command")
    if isinstance(command, list):
        data["command"] = [
            _hidden_extra_vars((given or {}).get(str(arg), str(arg)))
            if previous in ("-e", "--extra-vars")
            else arg
            for previous, arg in zip([None, *command], command, strict=False)
        ]
    partial = path.with_name(".command.partial")
    try:
        with os.fdopen(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as handle:
            json.dump(data, handle, ensure_ascii=False)
        os.replace(partial, path)  # never a half-written command file
    except OSError:  # a full disk: the run goes on (ansible-runner's own writes fail as loudly)
        partial.unlink(missing_ok=True)


def run(request: ProvisionRequest, on_event: Callable[[RunState], None] | None = None) -> dict:
    """Run the playbook; return the report (see docs/readme/roles2.md for its keys)."""
    request.validate()
    return run_validated(request, on_event)


def run_validated(request: ProvisionRequest, on_event: Callable[[RunState], None] | None = None) -> dict:
    """run() for a request whose validate() has passed (it reads the playbooks and Ansible's configuration,
    ~0.7 s for site.yml: the CLI validates before its live view starts, and does not again here)."""
    try:
        import ansible_runner  # controller-side dependency (ktinfra[ops])
    except ImportError:
        raise ProvisionError("ansible-runner is not installed: pip install 'ktinfra[ops]'") from None
    playbook_exe = ansible_playbook()
    state = RunState()
    # unique even for two runs from one process within a second (they would share one artifact dir)
    ident = time.strftime("%Y%m%dT%H%M%S") + f"-{os.getpid()}-{secrets.token_hex(3)}"
    artifact_root = request.artifacts.resolve() / "artifacts"
    try:
        artifact_root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # e.g. under /proc, read-only or not permitted
        raise ProvisionError(
            f"artifacts {request.artifacts}: cannot create it ({exc.strerror or exc})"
        ) from exc
    _make_run_dir(request, artifact_root / ident)

    def handler(event: dict) -> bool:
        state.handle(event)
        if state.prompts or state.pauses:  # it waits on ansible-runner's terminal, which nobody types into
            interrupt.stop()
        if on_event:
            on_event(state)
        return True

    envvars = {
        "PATH": os.pathsep.join([str(Path(playbook_exe).parent), os.environ.get("PATH", "")]),
        # Ansible's paramiko connection asks on ansible-playbook's terminal whether to trust a host key
        # missing from known_hosts, and that terminal is ansible-runner's, which nobody types into: the run
        # hung there. With this setting it fails the host with the key's fingerprint instead; it changes
        # nothing else (only connection plugins that support persistence read it: the network ones, which
        # force it). The ssh connection cannot ask: Ansible runs it without a terminal, so it says "Host
        # key verification failed".
        "ANSIBLE_USE_PERSISTENT_CONNECTIONS": "True",
    }
    roles = roles_path_env(request.playbook)
    if roles and "ANSIBLE_ROLES_PATH" not in os.environ:
        envvars["ANSIBLE_ROLES_PATH"] = roles
    started = time.time()
    # A fresh private_data_dir per run: ansible-runner reads env/cmdline, env/envvars, env/extravars, ...
    # back from it whenever they exist, so a shared one made every past -e apply to later runs. Only the
    # artifacts (one directory per run) are kept, under ARTIFACTS/artifacts/.
    try:
        private_dir = tempfile.TemporaryDirectory(prefix="ktinfra-provision-")
    except OSError as exc:  # no usable temporary folder (full, read-only, gone): nothing of the run is left
        shutil.rmtree(artifact_root / ident, ignore_errors=True)
        raise ProvisionError(
            f"cannot make ansible-runner's private folder in {exc.filename or 'the temporary folder'} "
            f"({exc.strerror or exc}): set TMPDIR to a writable folder"
        ) from exc
    with private_dir as private, Interrupt() as interrupt:
        try:
            passed = _passed_extra_vars(request.extra_vars, Path(private))
        except OSError as exc:  # a full or read-only temporary folder: nothing of the run is left
            shutil.rmtree(artifact_root / ident, ignore_errors=True)
            raise ProvisionError(
                f"cannot write the -e values for ansible-playbook in {private} ({exc.strerror or exc})"
            ) from exc
        given = dict(passed)
        runner = ansible_runner.interface.init_runner(
            private_data_dir=private,
            project_dir=os.getcwd(),  # ansible-playbook's cwd is the caller's, as when run by hand
            artifact_dir=str(artifact_root),
            ident=ident,
            # absolute, symlinks kept: Ansible reads group_vars/host_vars (and the playbook's roles/) beside
            # the path as given, not beside a link's target
            playbook=os.path.abspath(request.playbook),
            inventory=[str(i) if _host_list(i) else os.path.abspath(i) for i in request.inventories],
            limit=request.limit,
            tags=request.tags,
            skip_tags=request.skip_tags,
            cmdline=request.cmdline([arg for arg, _ in passed]) or None,
            envvars=envvars,
            suppress_env_files=True,
            event_handler=handler,
            quiet=True,
            rotate_artifacts=50,
            cancel_callback=interrupt,
            # 'running': the command file is written, ansible-playbook not yet started
            status_handler=lambda data, runner_config: (
                _hide_environment(artifact_root / ident, given) if data.get("status") == "running" else None
            ),
            settings={"pexpect_timeout": Interrupt.POLL},
        )
        # ansible-runner sets ANSIBLE_HOST_KEY_CHECKING=False wherever the environment does not set it, and
        # that beats ansible.cfg: every SSH host's key was taken unchecked (a changed or unknown key
        # connected, where ansible-playbook refuses). Ansible's own setting decides, as when run by hand.
        if "ANSIBLE_HOST_KEY_CHECKING" not in os.environ:
            runner.config.env.pop("ANSIBLE_HOST_KEY_CHECKING", None)
        # ... and it points the fact cache at a jsonfile folder of this run's artifacts, over ansible.cfg and
        # over the caller's own ANSIBLE_CACHE_PLUGIN*: a site's fact cache (shared across runs, read back with
        # gathering = smart) was never read or written. Ansible's own settings decide here too.
        for name in ("ANSIBLE_CACHE_PLUGIN", "ANSIBLE_CACHE_PLUGIN_CONNECTION"):
            if name in os.environ:
                runner.config.env[name] = os.environ[name]
            else:
                runner.config.env.pop(name, None)
        runner.run()
    if not state.recap_seen and runner.stats:
        state.apply_recap(runner.stats)
    # interrupted: Ansible itself stopped (rc 99 'User interrupted execution'), or runner killed it (254); a
    # Ctrl-C after ansible-playbook exited 0 stopped nothing
    status = "canceled" if interrupt.signals and runner.rc != 0 else runner.status
    return report(request, state, runner.rc, status, str(Path(runner.config.artifact_dir)), started)


# Ansible's own errors (no host event carries them): the first line of each and its continuation lines;
# "ERROR: " is the CLI's before it has a display (an unreadable ansible.cfg, a non-UTF-8 locale)
ERROR_STARTS = ("[ERROR]", "ERROR!", "ERROR: ", "[WARNING]: Could not match supplied host pattern")
# Warnings after which Ansible carries on, and exits 0, without that source's hosts: an inventory (or a
# file of an inventory directory) that no plugin could parse, with each plugin's reason (2.19: "Failed to
# parse inventory with 'ini' plugin: ...", before: " * Failed to parse X with ini plugin: ...")
INVENTORY_UNPARSED = ("[WARNING]: Unable to parse", "[WARNING]: No inventory was parsed")
INVENTORY_STARTS = (
    "[WARNING]: Failed to parse",
    "[WARNING]: * Failed to parse",
    "[WARNING]:  * Failed to parse",
)
# ... and plays that matched no host of a parsed inventory
NO_HOST_STARTS = (
    "[WARNING]: provided hosts list is empty",
    "[WARNING]: Could not match supplied host pattern",
)
PREFIXES = ("[ERROR]: ", "[ERROR]:", "ERROR! ", "ERROR: ", "[WARNING]: ")
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _blocks(stdout: str, starts: tuple[str, ...], max_lines: int = 6) -> list[str]:
    """The lines of `stdout` starting with one of `starts` (prefix dropped), each with its continuation."""
    found: list[list[str]] = []
    block: list[str] | None = None
    for raw in stdout.splitlines():
        line = ANSI.sub("", raw).strip()
        if line.startswith(starts):
            text = next((line[len(p) :] for p in PREFIXES if line.startswith(p)), line).strip()
            block = [text.removeprefix("* ")]
            found.append(block)
        elif block is not None and line and not line.startswith("[") and len(block) < max_lines:
            block.append(line)
        else:
            block = None
    return [" ".join(b) for b in found]


def ansible_errors(stdout: str, max_lines: int = 6) -> list[str]:
    """'[ERROR]: YAML parsing failed ... Origin: x.yml:4:6' and the like from ansible-playbook's output."""
    return _blocks(stdout, ERROR_STARTS, max_lines)


def inventory_errors(stdout: str) -> list[str]:
    """Ansible's words when an inventory source could not be parsed (it warns, goes on, exits 0); else []."""
    blocks = _blocks(stdout, INVENTORY_UNPARSED + INVENTORY_STARTS)
    unparsed = tuple(start.removeprefix("[WARNING]: ") for start in INVENTORY_UNPARSED)
    return blocks if any(b.startswith(unparsed) for b in blocks) else []


def _vars_prompt_refusal(where: str, names: str, first: str) -> str:
    return (
        f"{where} prompts for {names} (vars_prompt), which ktinfra provision cannot answer: give it with "
        f"-e {first}=VALUE"
    )


def _untimed_pause_refusal(pause: str, skip: str) -> str:
    return (
        f"{pause} waits for someone to press Enter (a pause without seconds or minutes), which ktinfra "
        f"provision cannot do: give it seconds or minutes, or {skip}"
    )


def run_problems(request: ProvisionRequest, state: RunState, rc: int, stdout: str) -> list[str]:
    """What fails a run that ansible-playbook calls successful: its inventory could not be parsed, or no
    play matched a host (a group missing from the inventory, an empty one), so nothing was provisioned."""
    if state.prompts:
        names = ", ".join(state.prompts)
        return [_vars_prompt_refusal(str(request.playbook), names, state.prompts[0])]
    if state.pauses:
        pause = f"{request.playbook}: task {state.pauses[0]!r}"
        return [
            _untimed_pause_refusal(
                pause, "leave it out with --skip-tags TAG (a tag it has, or one to give it)"
            )
        ]
    unparsed = inventory_errors(stdout)
    inventories = ", ".join(str(inventory) for inventory in request.inventories)
    if unparsed:
        if len(request.inventories) > 1:
            what = "one of them (or a file of one)"
        else:
            what = "a file of it" if request.inventories[0].is_dir() else "it"
        return [f"inventory {inventories}: Ansible could not parse {what}", *unparsed]
    if rc == 0 and not state.targeted:
        said = _blocks(stdout, NO_HOST_STARTS)
        return [
            f"no host targeted: no play of {request.playbook} matched a host of {inventories}",
            *said,
        ]
    return []


# what ssh and Ansible's paramiko connection say where a host's key is not in known_hosts, or has changed
HOST_KEY_FAILURES = (
    "Host key verification failed",
    "authenticity of host",
    "HOST IDENTIFICATION HAS CHANGED",
)


def host_key_problems(state: RunState) -> list[str]:
    """How to go on where a host failed at its SSH host key (ktinfra provision never lets ssh ask)."""
    hosts = sorted({f.host for f in state.failures if any(s in f.message for s in HOST_KEY_FAILURES)})
    if not hosts:
        return []
    return [
        f"{', '.join(hosts)}: the SSH host key is not in known_hosts (or has changed), and ktinfra provision "
        "cannot answer ssh's question whether to trust it: check the key's fingerprint and add it "
        "(ssh-keyscan -p PORT HOST >> ~/.ssh/known_hosts), or turn checking off yourself "
        "(host_key_checking = False in ansible.cfg, or ANSIBLE_HOST_KEY_CHECKING=False)"
    ]


def report(
    request: ProvisionRequest, state: RunState, rc: int, status: str, artifacts: str, started: float
) -> dict:
    stdout = Path(artifacts) / "stdout"
    text = stdout.read_text(errors="replace") if stdout.is_file() else ""
    errors = run_problems(request, state, rc, text) + host_key_problems(state)
    ok = rc == 0 and not state.bad_hosts and not errors
    # failed before or beside any host: say what Ansible said (stopped at a prompt: its "User interrupted")
    if not ok and not state.failures and not state.prompts and not state.pauses:
        errors += [e for e in ansible_errors(text) if e not in errors]
        if rc is None:  # a signal ended it: the SIGTERM or SIGKILL after a Ctrl-C it did not stop at
            ended = f"was ended by a signal ({status}) before it exited"
        else:
            ended = f"exited {rc} ({status}) with no failed host"
        errors = errors or [f"ansible-playbook {ended}; its output: {stdout}"]
    return {
        "ok": ok,
        "playbook": str(request.playbook),
        # one -i: its path, as always; several: the list
        "inventory": [str(i) for i in request.inventories]
        if len(request.inventories) > 1
        else str(request.inventories[0]),
        "limit": request.limit,
        "tags": request.tags,
        "skip_tags": request.skip_tags,
        "check": request.check,
        "diff": request.diff,
        "rc": rc,
        "status": status,
        "seconds": round(time.time() - started, 1),
        "hosts": {h: asdict(c) for h, c in sorted(state.hosts.items())},
        "failed_hosts": state.bad_hosts,
        "failures": [asdict(f) for f in state.failures],
        "recovered": [asdict(f) for f in state.recovered],
        "changes": state.changes,
        "diffs": state.diffs,
        "errors": errors,
        "artifacts": artifacts,
    }


def exit_code(result: dict) -> int:
    """The README's contract: 0 ok, 1 any failure (ansible-playbook's own code stays in result['rc'])."""
    return 0 if result["ok"] else 1
