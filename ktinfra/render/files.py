"""Write a rendered bundle into a directory: every file whole or not at all."""

from __future__ import annotations

import os
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


def write_bundle(out_dir: str | os.PathLike, rendered: Rendered) -> list[str]:
    """Write every file to a temp name in out_dir, then rename them into place.

    Each file appears atomically with its final mode (an env file is never briefly world-readable);
    if anything fails before the renames, the temp files are removed and out_dir keeps its old content.
    """
    out = Path(out_dir)
    check_out_dir(out)
    staged: list[tuple[str, Path]] = []
    try:
        out.mkdir(parents=True, exist_ok=True)
        for name, (content, mode) in rendered.files.items():
            fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=out)
            staged.append((tmp, out / name))
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                os.fchmod(handle.fileno(), mode)
                handle.write(content)
                handle.flush()
                os.fsync(handle.fileno())
    except OSError as exc:
        for tmp, _ in staged:
            Path(tmp).unlink(missing_ok=True)
        raise RenderError(f"cannot write into {out}: {exc}") from exc
    for tmp, final in staged:
        os.replace(tmp, final)
    dir_fd = os.open(out, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return [str(final) for _, final in staged]
