"""Opening files that someone else may have planted: only regular files, and private ones only if private.

A recording may sit in a shared, group-writable runs folder, where anyone can put a FIFO, a device or a
symlink under a name tokenwatch opens. ``open()`` of a FIFO blocks until a writer comes (a replay froze
before it drew), and a symlink under the name of a file tokenwatch creates makes the user overwrite a
file of their own. So: every open is non-blocking and checked with ``fstat`` before a byte is read, and
what tokenwatch keeps for itself (the replay index's key and indexes) lives in a folder of the user's own
that no one else can read or write.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
from pathlib import Path


class NotARegularFileError(OSError):
    """The path is a FIFO, a device, a socket or a folder; ``strerror`` says which, in words."""


class NotPrivateError(OSError):
    """A file or folder that must be the user's own and closed to others is not; the message is one line
    naming the path and the command that fixes it."""


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a directory"
    return "something else"


def open_regular(path: str | Path, *, follow_symlinks: bool = True) -> int:
    """A read-only descriptor of ``path``, which must be a regular file (a FIFO or a device is refused
    without waiting for it). Raises :class:`NotARegularFileError` or the OSError of the open."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow_symlinks else os.O_NOFOLLOW)
    fd = os.open(path, flags)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotARegularFileError(0, f"is {_kind(mode)}, not a regular file", str(path))
        # Back to blocking reads (a regular file never blocks, but the flag would follow the descriptor
        # into code that does not expect EAGAIN).
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    return fd


def check_private(path: Path, st: os.stat_result) -> None:
    """Raise :class:`NotPrivateError` unless ``st`` (of ``path``, not followed through a symlink) is the
    user's own and closed to everyone else (a folder 0700, a file 0600 or stricter)."""
    folder = stat.S_ISDIR(st.st_mode)
    if not folder and not stat.S_ISREG(st.st_mode):
        raise NotPrivateError(
            f"{path}: is {_kind(st.st_mode)}, not a file of your own (remove it: rm {path})"
        )
    if st.st_uid != os.geteuid():
        raise NotPrivateError(f"{path}: belongs to another user (remove it, or chown it to yourself)")
    if st.st_mode & 0o077:
        mode = "700" if folder else "600"
        raise NotPrivateError(
            f"{path}: open to other users (mode {st.st_mode & 0o777:o}; fix: chmod {mode} {path})"
        )


def private_folder(path: Path) -> Path:
    """``path``, made if missing (0700, its parents as usual), and checked to be the user's own and closed
    to others. Raises :class:`NotPrivateError` or the OSError of the mkdir."""
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=0o700, parents=True)
    check_private(path, os.lstat(path))
    return path
