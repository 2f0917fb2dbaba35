"""The one place that talks to Packer: the python-packer wrapper (PyPI python-packer 0.1.2) plus workarounds.

What the wrapper does right against a real packer (1.6.6, proven by tests/integration/image/test_packer.py):
`version()`, argument building for -only/-var-file, running `build`/`validate`, streaming lines to a callback.
What it gets wrong, and how this adapter works around it (here only):
- `build(parallel=True)` adds `-parallel=true`, which packer >= 1.5 rejects (prints usage): parallel=False.
- `validate()` on failure reads `ex.message` (Python 2 only) and raises AttributeError: the real sh error is
  that AttributeError's `__context__`; its stdout holds packer's message.
- `inspect()` splits the sh output (bytes) with a str, and parses JSON-template `template-*` lines that an
  HCL2 template never prints: inspect without -machine-readable and parse HCL2's text here.
- `out_iter`/`err_iter` callables crash in sh 1.11 (which python-packer pins) on Python >= 3.11
  (`inspect.getargspec`): pass file-like sinks instead (sh writes bytes chunks to any object with write()).
  The wrapper also sets `_out_bufsize` for err_iter, so stderr chunks are not lines: the sinks re-split them.
- `build()` blocks in sh and an interrupted build leaves packer (and its container) running: the adapter
  runs it in the background (`_bg`), waits, and sends SIGINT to packer's process group (its panicwrap
  parent ignores a plain SIGINT) so packer cancels and cleans up before we re-raise.
- `version()` parses the captured stdout, which is empty when output goes to a sink: read the sink instead.
- colour codes and a TTY: the wrapper has no -color flag; the command is re-baked with PACKER_NO_COLOR and
  without a TTY, and with a PATH that holds this venv's ansible-playbook (packer's ansible provisioner
  runs it even to validate).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ktinfra.image import ImageError


class PackerError(ImageError):
    pass


@dataclass
class Validation:
    ok: bool
    message: str


def _wrapper():
    try:
        import packer  # python-packer
        import sh
    except ImportError as exc:  # pragma: no cover - depends on the ops extra
        raise PackerError("python-packer is not installed: pip install -e '.[ops]' (or `make venv`)") from exc
    return packer, sh


def _decode(out) -> str:
    return out.decode("utf-8", "replace") if isinstance(out, bytes) else str(out)


def _env() -> dict:
    env = dict(os.environ)
    env["PACKER_NO_COLOR"] = "1"
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


def ensure_available(exec_path: str = "packer") -> None:
    """PackerError unless the wrapper is installed and exec_path is an executable packer would run as."""
    _wrapper()
    if not _which(exec_path, _env()["PATH"]):
        raise PackerError(
            f"packer not found ({exec_path}); `apt-get install packer` (Debian 1.6.6) or put a HashiCorp "
            "packer on PATH (then: packer init images/required-plugins.pkr.hcl)"
        )


class Packer:
    def __init__(
        self,
        template: Path,
        var_file: Path | None = None,
        only: list[str] | None = None,
        exec_path: str = "packer",
        cwd: Path | None = None,
        on_line: Callable[[str], None] | None = None,
        tmpdir: Path | None = None,
    ):
        ensure_available(exec_path)
        if os.sep in exec_path:  # found from the caller's directory; packer runs in `cwd`
            exec_path = os.path.abspath(exec_path)
        packer, self._sh = _wrapper()
        self._on_line = on_line
        self._lines: list[str] = []
        env = _env()
        if tmpdir is not None:
            # packer's temporary files (the ansible provisioner's inventory and SSH private key) go here: an
            # interrupted packer leaves them behind, and the caller removes this directory
            env["TMPDIR"] = str(Path(tmpdir).resolve())
        self._w = packer.Packer(
            str(template),
            only=list(only or []),
            var_file=str(var_file) if var_file else None,
            exec_path=exec_path,
            out_iter=_LineSink(self._collect),
            err_iter=_LineSink(self._collect),
        )
        self._w.packer = self._w.packer.bake(_env=env, _cwd=str(cwd or template.parent), _tty_out=False)

    def _collect(self, line: str) -> None:
        line = line.rstrip("\r")
        self._lines.append(line)
        if self._on_line:
            self._on_line(line)

    def tail(self, n: int = 30) -> str:
        return "\n".join(self._lines[-n:])

    def version(self) -> str:
        self._lines.clear()
        try:
            return self._w.version()
        except self._sh.ErrorReturnCode as exc:
            raise PackerError(f"packer version failed (exit {exc.exit_code}):\n{self.tail()}") from exc
        except IndexError:  # output went to the sink, the wrapper split an empty string
            m = re.search(r"Packer v(\S+)", self.tail())
            if not m:
                raise PackerError(f"cannot read the packer version from: {self.tail()!r}") from None
            return m.group(1)

    def validate(self) -> Validation:
        self._lines.clear()
        try:
            result = self._w.validate()
        except AttributeError as exc:  # the wrapper's `ex.message` on a failed validate
            err = exc.__context__
            if not isinstance(err, self._sh.ErrorReturnCode):
                raise
            # all of it: packer prints its first error first, and a template with many errors has long output
            text = (_decode(err.stdout) + _decode(err.stderr)).strip() or "\n".join(self._lines)
            return Validation(False, text)
        return Validation(bool(result.succeeded), "\n".join(self._lines))

    def inspect(self) -> dict:
        """Sources, provisioners, post-processors and variables of an HCL2 template."""
        self._lines.clear()
        try:
            self._w.inspect(mrf=False)
        except self._sh.ErrorReturnCode as exc:
            raise PackerError(f"packer inspect failed:\n{self.tail()}") from exc
        return parse_hcl2_inspect("\n".join(self._lines))

    def build(self, force: bool = True) -> str:
        """Run `packer build`; on Ctrl-C or any error here, packer gets SIGINT and cleans up first."""
        self._lines.clear()
        baked = self._w.packer
        self._w.packer = baked.bake(_bg=True)  # the wrapper would block; we need the process to signal it
        try:
            running = self._w.build(parallel=False, force=force)
        finally:
            self._w.packer = baked
        try:
            running.wait()
        except self._sh.ErrorReturnCode as exc:
            raise PackerError(f"packer build failed (exit {exc.exit_code}):\n{self.tail(40)}") from exc
        except BaseException:
            # Ctrl-C, or SIGTERM (build's SystemExit). sh starts packer in its own session; packer's panicwrap
            # parent ignores SIGINT and expects the terminal to reach its child, so the whole process group
            # gets it (as from a Ctrl-C).
            with contextlib.suppress(ProcessLookupError):  # packer ended as the signal came
                os.killpg(running.process.pid, signal.SIGINT)
            running.process.wait()  # RunningCommand.wait() returns at once once it has been interrupted
            raise
        return "\n".join(self._lines)


class _LineSink:
    """File-like target for sh: joins byte chunks and hands on whole lines."""

    def __init__(self, on_line: Callable[[str], None]):
        self._on_line = on_line
        self._buf = ""

    def write(self, chunk) -> None:
        self._buf += _decode(chunk)
        *lines, self._buf = self._buf.split("\n")
        for line in lines:
            self._on_line(line)

    def flush(self) -> None:
        if self._buf:
            self._on_line(self._buf)
            self._buf = ""


def _which(exe: str, path: str) -> bool:
    def runnable(candidate: str) -> bool:
        return os.path.isfile(candidate) and os.access(candidate, os.X_OK)

    if os.sep in exe:
        return runnable(exe)
    return any(runnable(os.path.join(d, exe)) for d in path.split(os.pathsep) if d)


_SECTIONS = ("sources", "provisioners", "post-processors")


def parse_hcl2_inspect(text: str) -> dict:
    """Parse packer's HCL2 `inspect` text (1.6.x and later print the same sections)."""
    out: dict = {"variables": {}, "sources": [], "provisioners": [], "post-processors": []}
    section = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if line.startswith(">"):
            header = line.lstrip("> ").rstrip(":")
            section = "variables" if header == "input-variables" else None
            continue
        m = re.match(r"^var\.([\w-]+):\s*(.*)$", line)
        if section == "variables" and m:
            out["variables"][m.group(1)] = m.group(2).strip('"')
            continue
        if line.rstrip(":") in _SECTIONS:
            section = line.rstrip(":")
            continue
        if section in _SECTIONS and not line.startswith("<no ") and not re.match(r"^\d+:$", line):
            out[section].append(line)
    return out
