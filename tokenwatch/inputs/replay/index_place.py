"""Where a replay index lives and what signs it: this user's cache folder, never beside the recording.

Indexes used to be written beside the recording (``FILE.twidx``). A recording often sits in a shared,
group-writable runs folder, and there a file tokenwatch creates is a file anyone can plant a symlink or a
FIFO under, and two users replaying one recording overwrote each other's index (each signs with a key of
their own, so each found the other's foreign) on every open. In the user's cache folder (0700, checked)
no one else can plant anything, each user keeps an index of their own, and a read-only runs folder gets an
index too. An index is named after the recording's real path (one per recording; its table says which
version of the recording it matches); indexes not used for :data:`UNUSED_FOR_S` are removed when a new one
is written, so the folder does not fill with indexes of recordings long gone.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import secrets
import tempfile
import time
from pathlib import Path

from platformdirs import user_cache_path

from tokenwatch.base.safe_files import check_private, open_regular, private_folder

INDEX_SUFFIX = ".twidx"
KEY_BYTES = 32
UNUSED_FOR_S = 30 * 86400.0


def cache_folder() -> Path:
    """tokenwatch's cache folder (``$XDG_CACHE_HOME/tokenwatch`` on Linux), made 0700 and checked to be
    this user's own and closed to others. Raises NotPrivateError (one line, with the fix) or OSError."""
    return private_folder(user_cache_path("tokenwatch", appauthor=False))


def index_folder() -> Path:
    return private_folder(cache_folder() / "replay-index")


def index_path_for(recording: Path) -> Path:
    """This user's index of ``recording``: named after its real path (the name's readable part is only
    for whoever lists the folder)."""
    real = os.path.realpath(recording)
    key = hashlib.blake2b(os.fsencode(real), digest_size=12).hexdigest()
    readable = re.sub(r"[^A-Za-z0-9._-]", "_", recording.name)[:64]
    return index_folder() / f"{readable}.{key}{INDEX_SUFFIX}"


def create_private(target: Path) -> tuple[int, Path]:
    """A new file (0600) beside ``target`` in its private folder, under a random name, made with
    O_CREAT | O_EXCL | O_NOFOLLOW (tempfile.mkstemp): a name that exists, link or not, is never opened."""
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    return fd, Path(name)


def open_private(path: Path) -> int:
    """A descriptor of ``path``, a regular file of this user's, closed to others, not through a symlink.
    Raises FileNotFoundError, NotARegularFileError, NotPrivateError or another OSError."""
    fd = open_regular(path, follow_symlinks=False)
    try:
        check_private(path, os.fstat(fd))
    except BaseException:
        os.close(fd)
        raise
    return fd


def user_key() -> bytes:
    """This user's key for signing indexes, made on first use (0600, in the private cache folder).
    Raises NotPrivateError where the key or its folder is open to others (a key others can read signs
    nothing), OSError where it cannot be had."""
    path = cache_folder() / "index.key"
    try:
        fd = open_private(path)
    except FileNotFoundError:
        pass
    else:
        with os.fdopen(fd, "rb") as fh:
            key = fh.read(KEY_BYTES + 1)
        if len(key) == KEY_BYTES:
            return key
    key = secrets.token_bytes(KEY_BYTES)
    fd, tmp = create_private(path)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(key)
        try:
            os.link(tmp, path)  # only where there is none: a key another replay made meanwhile wins
        except FileExistsError:
            return _existing_or(path, tmp, key)
    finally:
        tmp.unlink(missing_ok=True)
    return key


def _existing_or(path: Path, tmp: Path, key: bytes) -> bytes:
    """The key at ``path`` (another process's, made just now), or ours put in place of a damaged one."""
    with os.fdopen(open_private(path), "rb") as fh:
        existing = fh.read(KEY_BYTES + 1)
    if len(existing) == KEY_BYTES:
        return existing
    os.replace(tmp, path)
    return key


def touch(path: Path) -> None:
    """Mark an index as used now (see :func:`remove_unused`)."""
    with contextlib.suppress(OSError):
        os.utime(path)


def remove_unused(folder: Path, keep: Path) -> None:
    """Remove the indexes (and leftover temporary files) not used for :data:`UNUSED_FOR_S`."""
    before = time.time() - UNUSED_FOR_S
    with contextlib.suppress(OSError):
        for entry in os.scandir(folder):
            if entry.path == str(keep) or not entry.name.endswith((INDEX_SUFFIX, ".tmp")):
                continue
            with contextlib.suppress(OSError):
                if (
                    entry.is_file(follow_symlinks=False)
                    and entry.stat(follow_symlinks=False).st_mtime < before
                ):
                    os.unlink(entry.path)
