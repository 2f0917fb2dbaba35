"""Write a rendered bundle into a directory: every file whole or not at all."""

from __future__ import annotations

import os
import secrets
import shutil
import stat
import tempfile
from pathlib import Path, PurePosixPath

from ktinfra.render.common import Rendered, RenderError


def check_out_dir(out_dir: Path) -> None:
    """Refuse an --out that cannot become a directory we write into (a file, an unwritable parent)."""
    if out_dir.exists() and not out_dir.is_dir():
        raise RenderError(f"--out {out_dir} exists and is not a directory")
    probe = out_dir
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir():
        raise RenderError(f"--out {out_dir}: {probe} is not a directory")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise RenderError(f"--out {out_dir}: {probe} is not writable")


def install_map(rendered: Rendered) -> dict[str, str]:
    """Where each rendered file goes on the target: units under /etc/systemd/system, the rest beside the
    instance's EnvironmentFile (ktinfra-serve-NAME.env -> /etc/ktinfra/serve/NAME.env)."""
    env_file = PurePosixPath(rendered.info["env_file"])
    unit_prefix = rendered.info["unit"].split("@", 1)[0]
    targets = {}
    for name in rendered.files:
        if name.endswith(".service"):
            targets[name] = f"/etc/systemd/system/{name}"
        elif name.startswith(f"{unit_prefix}-") and name.endswith(".env"):
            targets[name] = str(env_file)
        else:
            targets[name] = str(env_file.parent / name)
    return targets


def _payloads(rendered: Rendered) -> dict[str, tuple[bytes, int]]:
    """Each file's bytes and mode; a name that is not a plain file name, or non-UTF-8 text, is refused."""
    payloads = {}
    for name, (content, mode) in rendered.files.items():
        if not name or name in (".", "..") or "/" in name or "\0" in name:
            raise RenderError(f"cannot write {name!r}: not a plain file name")
        try:
            payloads[name] = (content.encode("utf-8"), mode)
        except UnicodeEncodeError as exc:
            raise RenderError(f"cannot write {name}: its content is not UTF-8 text ({exc.reason})") from None
    return payloads


def _check_targets(out: Path, names) -> None:
    """Refuse before anything is written when a target cannot be replaced by a file: a directory (or anything
    else that is neither a regular file nor a symlink, which the rename replaces, not its target)."""
    for name in names:
        target = out / name
        try:
            mode = os.lstat(target).st_mode
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise RenderError(f"cannot write {target}: {exc.strerror or exc}") from exc
        if stat.S_ISDIR(mode):
            raise RenderError(f"cannot write {target}: a directory is in the way; {out} is left as it was")
        if not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
            raise RenderError(
                f"cannot write {target}: it exists and is not a regular file; {out} is left as it was"
            )


def _missing_dirs(out: Path) -> list[Path]:
    """out and those of its parents that do not exist yet, deepest first (mkdir creates them)."""
    missing = []
    probe = out
    while not probe.exists() and probe != probe.parent:
        missing.append(probe)
        probe = probe.parent
    return missing


def _backup(final: Path) -> Path:
    """A second name for the file at final (a hard link, or a copy where links fail), so a rename that
    replaced it can be undone."""
    for _ in range(100):
        backup = final.with_name(f".{final.name}.{secrets.token_hex(4)}.bak")
        try:
            os.link(final, backup, follow_symlinks=False)
            return backup
        except FileExistsError:
            continue
        except OSError:
            break
    if final.is_symlink():
        backup = final.with_name(f".{final.name}.{secrets.token_hex(8)}.bak")
        os.symlink(os.readlink(final), backup)
        return backup
    fd, name = tempfile.mkstemp(prefix=f".{final.name}.", suffix=".bak", dir=final.parent)
    try:
        with os.fdopen(fd, "wb") as handle, open(final, "rb") as source:
            shutil.copyfileobj(source, handle)
        shutil.copystat(final, name)
    except OSError:
        Path(name).unlink(missing_ok=True)
        raise
    return Path(name)


def _remove_quietly(paths) -> None:
    for path in paths:
        try:
            Path(path).unlink(missing_ok=True)
        except OSError:
            pass


def check_bundle(out_dir: str | os.PathLike, rendered: Rendered) -> dict[str, tuple[bytes, int]]:
    """write_bundle's checks alone (the directory, the content, every target): for callers that do other
    work first and must not do it for a bundle that cannot be written."""
    out = Path(out_dir)
    check_out_dir(out)
    payloads = _payloads(rendered)
    _check_targets(out, payloads)
    return payloads


def write_bundle(out_dir: str | os.PathLike, rendered: Rendered) -> list[str]:
    """Write every file to a temp name in out_dir, then rename them into place.

    Each file appears atomically with its final mode (an env file is never briefly world-readable).
    Every target is checked before anything is written; if writing or a rename still fails, the files
    already replaced are restored from backups, new ones and temp files are removed, and out_dir keeps
    its old content.
    """
    out = Path(out_dir)
    payloads = check_bundle(out, rendered)
    created = _missing_dirs(out)
    staged: list[tuple[Path, Path]] = []
    backups: dict[Path, Path] = {}

    def discard() -> None:
        _remove_quietly([tmp for tmp, _ in staged] + list(backups.values()))
        for directory in created:  # deepest first; only the ones this call made, and only when empty
            try:
                directory.rmdir()
            except OSError:
                break

    try:
        out.mkdir(parents=True, exist_ok=True)
        for name, (data, mode) in payloads.items():
            fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=out)
            staged.append((Path(tmp), out / name))
            with os.fdopen(fd, "wb") as handle:
                os.fchmod(handle.fileno(), mode)
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
        for _, final in staged:
            if os.path.lexists(final):
                backups[final] = _backup(final)
    except OSError as exc:
        discard()
        raise RenderError(f"cannot write into {out}: {exc}; {out} is left as it was") from exc
    replaced: list[Path] = []
    try:
        for tmp, final in staged:
            os.replace(tmp, final)
            replaced.append(final)
    except OSError as exc:
        failed = _roll_back(replaced, backups)
        discard()
        if failed:
            raise RenderError(
                f"cannot write {final}: {exc.strerror or exc}; restoring {', '.join(failed)} failed too"
            ) from exc
        raise RenderError(f"cannot write {final}: {exc.strerror or exc}; {out} is left as it was") from exc
    _remove_quietly(backups.values())
    dir_fd = os.open(out, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return [str(final) for _, final in staged]


def _roll_back(replaced: list[Path], backups: dict[Path, Path]) -> list[str]:
    """Undo the renames done so far: put each backup back, remove files that did not exist before.
    Returns the targets that could not be restored."""
    failed = []
    for final in reversed(replaced):
        try:
            if final in backups:
                os.replace(backups.pop(final), final)
            else:
                final.unlink()
        except OSError:
            failed.append(str(final))
    return failed
