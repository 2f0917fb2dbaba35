"""Rename a name within one open folder unless the new name is taken: renameat2(RENAME_NOREPLACE)."""

from __future__ import annotations

import ctypes
import errno
import os

RENAME_NOREPLACE = 1  # <linux/fs.h>
# renameat2 refuses the flag where the filesystem cannot honour it (EINVAL: some FUSE, older NFS) or the
# kernel predates it (ENOSYS, < 3.15)
UNSUPPORTED = (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP)


def _renameat2():
    """glibc's renameat2 (2.28+), None where the C library has none."""
    try:
        function = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    function.restype = ctypes.c_int
    return function


def rename_no_replace(folder: int, old: str, new: str) -> None:
    """Rename `old` to `new` in the open folder `folder`; FileExistsError when `new` is taken, also when it
    is taken after any check (renameat2 with RENAME_NOREPLACE decides in the kernel).

    Where that is not to be had, `new` is checked, then rename(2) runs: a folder renamed that way replaces
    only an empty folder (a file, a link or a folder with anything in it makes rename(2) fail), so what may
    be lost in the window between the two calls is an empty folder made in it."""
    renameat2 = _renameat2()
    if renameat2 is not None:
        if renameat2(folder, os.fsencode(old), folder, os.fsencode(new), RENAME_NOREPLACE) == 0:
            return
        code = ctypes.get_errno()
        if code not in UNSUPPORTED:
            raise OSError(code, os.strerror(code))
    if _taken(folder, new):
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST))
    os.rename(old, new, src_dir_fd=folder, dst_dir_fd=folder)


def _taken(folder: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True
