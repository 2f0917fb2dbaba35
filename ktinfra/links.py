"""Where a path leads when it is a symbolic link: one rule for every option that names a file to write."""

from __future__ import annotations

import errno
import os
from pathlib import Path


class LinkLoop(OSError):
    """The path is a loop of links: nothing can be read or written through it."""

    def __init__(self, path: Path) -> None:
        super().__init__(errno.ELOOP, f"{path} is a link that leads back to itself (a loop of links)")

    def __str__(self) -> str:
        return self.strerror


def written_file(path: Path) -> Path:
    """The file a write to `path` lands in: `path`, or where a link there leads (even a dangling one)."""
    if not path.is_symlink():
        return path
    try:
        return Path(os.path.realpath(path, strict=True))
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise LinkLoop(path) from None
    return Path(os.path.realpath(path))
