"""Log-driven tuning advisor for SGLang/kt-kernel servers: read a log, recommend flag changes."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import BinaryIO

import yaml

from ktinfra.links import LinkLoop, written_file
from ktinfra.tune.advise import advise
from ktinfra.tune.parse import BATCH_LINE, SERVER_ARGS_MARK, parse_lines, parse_text

__all__ = [
    "advise",
    "parse_lines",
    "parse_text",
    "read_log_file",
    "read_unit_log",
    "missing_unit",
    "check_vars_path",
    "existing_vars",
    "ansible_vars",
    "write_vars",
]

# Flag -> key under `kt_serve_overrides` (the plan's `serve` keys; see docs/CONTRACTS.md).
ANSIBLE_KEYS = {
    "--schedule-conservativeness": "schedule_conservativeness",
    "--mem-fraction-static": "mem_fraction_static",
    "--chunked-prefill-size": "chunked_prefill_size",
    "--max-running-requests": "max_running_requests",
    "--kt-num-gpu-experts": "kt_num_gpu_experts",
    "--cuda-graph-max-bs": "cuda_graph_max_bs",
    "--max-total-tokens": "max_total_tokens",
}
ANSIBLE_VAR = "kt_serve_overrides"


class LogSourceError(RuntimeError):
    pass


# The advisor reads the last server run; its start-up lines come within the first MiB of a run, and a run
# logs far less than this. Past it only the tail is read (an 8 GB log took 2.5x its size in memory).
MAX_LOG_BYTES = 256 << 20
READ_CHUNK = 1 << 20


def read_log_file(path: Path) -> str:
    """The log's text, its last MAX_LOG_BYTES at most. A regular file is read from its tail; a pipe
    (`--log <(docker logs sglang 2>&1)`) or standard input (`--log -`) is read to its end, keeping the tail.
    Anything else (a directory, /dev/zero) is refused."""
    if str(path) == "-":
        if sys.stdin is None or sys.stdin.isatty():
            raise LogSourceError("--log - reads the log from standard input, which is a terminal here")
        return _read_stream(sys.stdin.buffer, "standard input")
    try:
        mode = os.stat(path).st_mode
        if stat.S_ISFIFO(mode):
            with path.open("rb") as handle:
                return _read_stream(handle, str(path))
        if not stat.S_ISREG(mode):
            raise LogSourceError(f"log file {path} is not a regular file or a pipe")
        with path.open("rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, size - MAX_LOG_BYTES))
            data = handle.read(MAX_LOG_BYTES)
    except FileNotFoundError:
        raise LogSourceError(f"log file not found: {path}") from None
    except OSError as error:  # ENAMETOOLONG, EACCES
        raise LogSourceError(f"cannot read log file {path}: {error.strerror or error}") from None
    return _text(data, cut=size > MAX_LOG_BYTES)


def _read_stream(handle: BinaryIO, what: str) -> str:
    """A pipe read to its end in chunks, keeping the last MAX_LOG_BYTES (its size is known only then)."""
    tail = bytearray()
    cut = False
    try:
        while chunk := handle.read(READ_CHUNK):
            tail += chunk
            if len(tail) > MAX_LOG_BYTES:
                del tail[: len(tail) - MAX_LOG_BYTES]
                cut = True
    except OSError as error:
        raise LogSourceError(f"cannot read {what}: {error.strerror or error}") from None
    return _text(bytes(tail), cut)


def _text(data: bytes, cut: bool) -> str:
    text = data.decode("utf-8", errors="replace")
    return text.partition("\n")[2] if cut else text  # drop the cut first line


def _unit_property(unit: str, name: str) -> str | None:
    """systemd's property NAME of UNIT, or None where it is empty or systemctl cannot say."""
    if not shutil.which("systemctl"):
        return None
    proc = subprocess.run(
        ["systemctl", "show", "-p", name, "--value", unit],
        capture_output=True,
        text=True,
        check=False,
    )
    return proc.stdout.strip() or None if proc.returncode == 0 else None


def missing_unit(unit: str, journal: str, load_state: str | None) -> str | None:
    """Why --unit UNIT names nothing to read, or None: a unit with journal lines is read whatever systemd
    says now (a transient unit is gone once it exited); one without lines must be known to systemd."""
    lines = [line for line in journal.splitlines() if line.strip() and line.strip() != "-- No entries --"]
    if lines or load_state not in (None, "not-found"):
        return None
    if load_state is None:
        return f"unit {unit} not found: the journal has no lines for it and systemctl cannot tell"
    return f"unit {unit} not found: systemd does not know it and the journal has no lines for it"


START_LINES = 5000  # at most this many start-up lines of the unit's current run are read (see read_unit_log)


def read_unit_log(unit: str, lines: int = 20000) -> str:
    """The last `lines` journal lines of UNIT. Where they hold no `server_args=` line (a server up for hours
    logs more than that), the start-up lines of its current run come first: its flags, KV pool and CUDA
    graph sizes, which most rules compare against. Those are the run's lines up to its first batch line, so
    at most a few start-up lines (sizes, not events) can be read twice."""
    if not unit.strip() or unit.startswith("-"):  # systemctl/journalctl would read "--help" as an option
        raise LogSourceError(f"--unit {unit!r} is not a unit name")
    if not shutil.which("journalctl"):
        raise LogSourceError("journalctl is not available on this host; pass --log FILE instead")
    proc = subprocess.run(
        ["journalctl", "-u", unit, "--no-pager", "-o", "cat", "-n", str(lines)],
        capture_output=True,
        # the messages as the server wrote them: UTF-8 as --log reads it, a bad byte replaced, not a traceback
        encoding="utf-8",
        errors="replace",
        check=False,
    )
    if proc.returncode != 0:
        raise LogSourceError(f"journalctl -u {unit} failed: {proc.stderr.strip() or proc.returncode}")
    load_state = None if proc.stdout.strip() else _unit_property(unit, "LoadState")
    if problem := missing_unit(unit, proc.stdout, load_state):
        raise LogSourceError(problem)
    if SERVER_ARGS_MARK in proc.stdout:
        return proc.stdout
    start = _current_run_start(unit)
    return start + proc.stdout if SERVER_ARGS_MARK in start else proc.stdout


def _current_run_start(unit: str) -> str:
    """The lines of UNIT's current run (its InvocationID) before its first batch line, at most START_LINES;
    "" where systemd names no run."""
    invocation = _unit_property(unit, "InvocationID")
    if not invocation:
        return ""
    read = ["journalctl", f"_SYSTEMD_INVOCATION_ID={invocation}", "--no-pager", "-o", "cat"]
    head: list[str] = []
    with subprocess.Popen(
        read, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, encoding="utf-8", errors="replace"
    ) as journal:
        for line in journal.stdout:  # type: ignore[union-attr]
            if len(head) >= START_LINES or BATCH_LINE.search(line):
                break
            head.append(line)
        journal.kill()
    return "".join(head)


def vars_target(path: Path) -> Path:
    """The file --ansible-vars writes: the path, or the file a link there leads to (written through)."""
    try:
        return written_file(path)
    except LinkLoop as loop:
        raise LogSourceError(f"--ansible-vars {loop}") from None


def check_not_the_log(path: Path, log: Path | None) -> None:
    """--ansible-vars naming the --log file (or a link to it) would replace the server log with the vars."""
    try:
        same = log is not None and vars_target(path).exists() and os.path.samefile(vars_target(path), log)
    except OSError:  # the log is unreadable or gone: read_log_file says so
        same = False
    if same:
        raise LogSourceError(
            f"--ansible-vars {path} is the --log file {log}: writing it would replace the log"
        )


def check_vars_path(path: Path) -> None:
    """Refuse a --ansible-vars path that cannot become a file, before the log is read or anything written."""
    try:
        target = vars_target(path)
        shown = f"{path}" if target == path else f"{path} (a link to {target})"
        if target.is_dir():
            raise LogSourceError(
                f"--ansible-vars {shown} is a directory; give a file such as {path}/tune.yml"
            )
        if target.exists() and not target.is_file():
            raise LogSourceError(f"--ansible-vars {shown} is not a regular file (a device or a pipe)")
        for parent in target.parents:
            if parent.exists():
                if not parent.is_dir():
                    raise LogSourceError(f"--ansible-vars {shown}: {parent} is not a directory")
                if not os.access(parent, os.W_OK | os.X_OK):
                    raise LogSourceError(f"--ansible-vars {shown}: cannot write in {parent}")
                break
    except OSError as error:  # ENAMETOOLONG and the like: is_dir() only swallows "not found"
        raise LogSourceError(f"--ansible-vars {path}: {error.strerror or error}") from None


def existing_vars(path: Path) -> dict:
    """The vars already in the --ansible-vars file ({} where there is none, or it is empty). A later run adds
    its recommendations to them: the overrides an earlier run wrote are what the server now runs with (its
    log's current values), and the file may be a host_vars file holding other vars."""
    target = vars_target(path)
    if not target.is_file():
        return {}
    try:
        data = yaml.safe_load(target.read_bytes())
    except OSError as error:
        raise LogSourceError(f"--ansible-vars {path}: cannot read it: {error.strerror or error}") from None
    except (yaml.YAMLError, ValueError, RecursionError) as error:  # ValueError: not UTF-8 text
        why = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise LogSourceError(f"--ansible-vars {path} holds no YAML vars ({why}): give another file") from None
    if data is None:
        return {}
    what = f"its {ANSIBLE_VAR}" if isinstance(data, dict) else "it"
    if not isinstance(data, dict) or not isinstance(data.get(ANSIBLE_VAR) or {}, dict):
        raise LogSourceError(
            f"--ansible-vars {path} is not a vars file ({what} is not a mapping): give another file"
        )
    return data


def ansible_vars(result: dict) -> dict:
    """Server-side recommendations with a concrete value, as vars for the kt_serve role."""
    overrides = {
        ANSIBLE_KEYS[r["parameter"]]: r["suggested"]
        for r in result["recommendations"]
        if r["parameter"] in ANSIBLE_KEYS and r["suggested"] is not None
    }
    return {ANSIBLE_VAR: overrides}


def write_vars(result: dict, path: Path) -> dict:
    """Add the recommendations to the file's kt_serve_overrides (other vars and earlier overrides kept; a
    recommended key takes the new value). Write atomically: a failed write leaves any previous file
    untouched."""
    data = existing_vars(path)
    data[ANSIBLE_VAR] = {**(data.get(ANSIBLE_VAR) or {}), **ansible_vars(result)[ANSIBLE_VAR]}
    path = vars_target(path)
    mode = path.stat().st_mode & 0o7777 if path.is_file() else None
    path.parent.mkdir(parents=True, exist_ok=True)
    header = "# Written by `ktinfra tune`: kt_serve flag overrides recommended from the server log.\n"
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(header + yaml.safe_dump(data, sort_keys=True))
        if mode is not None:  # a replaced file keeps its mode (mkstemp makes 0600)
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return data
