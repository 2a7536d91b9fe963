"""Knowing a tailed file again after time away: its first bytes and the bytes where reading stopped."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

FINGERPRINT_BYTES = 1024


@dataclass(slots=True)
class TailFingerprint:
    """What a tail remembers of the bytes it read, to know the file again: its first
    :data:`FINGERPRINT_BYTES` and the last ones before the offset reached.

    Inode and size say whether a file was replaced or truncated below the offset, but not whether it was
    truncated and then grew past the offset while the node was unreachable (a restarted harness): the
    same inode, a size that looks like appends. Its first bytes and the bytes where reading stopped then
    differ from what was read, and the tail reads the file from its start again."""

    head: bytes = b""
    tail: bytes = b""

    def read(self, offset: int, data: bytes) -> None:
        """``data`` was read at byte ``offset``, right after what was read before (the head grows only
        while reading goes on from the file's start: a tail resumed elsewhere does not know it)."""
        if offset == len(self.head) < FINGERPRINT_BYTES:
            self.head += data[: FINGERPRINT_BYTES - offset]
        self.tail = (self.tail + data[-FINGERPRINT_BYTES:])[-FINGERPRINT_BYTES:]

    def reset(self) -> None:
        self.head = self.tail = b""

    def copy(self) -> TailFingerprint:
        return TailFingerprint(self.head, self.tail)

    def digest(self) -> str:
        """MD5 (hex) of the head, then the tail: what the remote script compares with ``md5sum``."""
        return hashlib.md5(self.head + self.tail, usedforsecurity=False).hexdigest()

    def matches(self, head: bytes, tail: bytes) -> bool:
        return head == self.head and tail == self.tail
