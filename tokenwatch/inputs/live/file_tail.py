"""Tailing a local file: ``os.read`` of 64 KiB chunks in a worker thread, byte offsets kept.

What plain pollers lack is handled here: **rotation** (the path now names another inode: the old
file is read to its end first, then the new one from byte 0) and **truncation** (the file became
shorter than what was read, or its first bytes changed: it was truncated and grew again between two
looks; start again from 0). Both are reported as :class:`TailReset`, so the consumer starts a fresh
parser and the core sees a counter restart, never double counting. Resuming (a restarted source) checks
the file's :class:`TailFingerprint` too.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator

from tokenwatch.base.clock import Clock
from tokenwatch.inputs.live.tail_fingerprint import TailFingerprint
from tokenwatch.inputs.live.tail_stream import TailData, TailItem, TailMessage, TailReset, TailStart

CHUNK = 64 * 1024
READ_BUDGET = 4 * 1024 * 1024  # per poll, so one huge file cannot hold the others back


class LocalFileTailer:
    def __init__(
        self,
        path: str,
        *,
        inode: str | None = None,
        offset: int = 0,
        poll_s: float = 0.25,
        fingerprint: TailFingerprint | None = None,
    ) -> None:
        """Resume at ``offset`` if the path is still the file with ``inode``, no shorter, and (given its
        ``fingerprint``) still holds the bytes read; else read it from byte 0."""
        self.path = path
        self.poll_s = poll_s
        self._resume_inode = inode
        self._resume_offset = offset
        self._resume_fingerprint = fingerprint
        self.fingerprint = TailFingerprint()  # of what this tailer has read
        self._fd: int | None = None
        self._inode: tuple[int, int] | None = None
        self.offset = 0
        self._said: str | None = None
        self._more = False

    async def follow(self, clock: Clock) -> AsyncIterator[list[TailItem]]:
        """Items as the file grows; runs until cancelled."""
        try:
            while True:
                items = await asyncio.to_thread(self.poll)
                if items:
                    yield items
                if not self._more:
                    await clock.sleep(self.poll_s)
        finally:
            self.close()

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def poll(self) -> list[TailItem]:
        """One look at the file (blocking: call it in a thread)."""
        items: list[TailItem] = []
        self._more = False
        if self._fd is None and not self._open_first(items):
            return items
        assert self._fd is not None
        head = self.fingerprint.head
        if head and os.pread(self._fd, len(head), 0) != head:  # truncated and grown again meanwhile
            self._restart(items, f"{self.path}: file truncated and rewritten")
        if self._read(items) == 0:
            self._check_replaced(items)
        return items

    def _say(self, items: list[TailItem], text: str) -> None:
        if text != self._said:
            self._said = text
            items.append(TailMessage(text))

    def _open(self) -> bool:
        try:
            fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError:
            return False
        st = os.fstat(fd)
        self._fd, self._inode = fd, (st.st_dev, st.st_ino)
        return True

    def _open_first(self, items: list[TailItem]) -> bool:
        try:
            opened = self._open()
        except OSError as exc:
            self._say(items, f"cannot open '{self.path}' for reading: {exc.strerror}")
            return False
        if not opened:
            self._say(items, f"cannot open '{self.path}' for reading: No such file or directory")
            return False
        assert self._fd is not None
        assert self._inode is not None
        size = os.fstat(self._fd).st_size
        inode = str(self._inode[1])
        start = 0
        if self._resume_inode == inode and size >= self._resume_offset and self._still_holds(self._fd):
            start = self._resume_offset
            if self._resume_fingerprint is not None:
                self.fingerprint = self._resume_fingerprint.copy()
        os.lseek(self._fd, start, os.SEEK_SET)
        self.offset = start
        self._said = None
        items.append(TailStart(inode, start))
        return True

    def _still_holds(self, fd: int) -> bool:
        """Whether the file still holds the bytes read before (the resume fingerprint)."""
        fp = self._resume_fingerprint
        if fp is None:
            return True
        head = os.pread(fd, len(fp.head), 0)
        tail = os.pread(fd, len(fp.tail), self._resume_offset - len(fp.tail))
        return fp.matches(head, tail)

    def _restart(self, items: list[TailItem], reason: str) -> None:
        assert self._fd is not None
        os.lseek(self._fd, 0, os.SEEK_SET)
        self.offset = 0
        self.fingerprint.reset()
        items.append(TailReset(reason))
        self._more = True

    def _read(self, items: list[TailItem]) -> int:
        assert self._fd is not None
        total = 0
        while total < READ_BUDGET:
            try:
                data = os.read(self._fd, CHUNK)
            except OSError as exc:
                self._say(items, f"error reading '{self.path}': {exc.strerror}")
                return total
            if not data:
                return total
            total += len(data)
            self.fingerprint.read(self.offset, data)
            self.offset += len(data)
            items.append(TailData(data))
        self._more = True
        return total

    def _check_replaced(self, items: list[TailItem]) -> None:
        assert self._fd is not None
        if os.fstat(self._fd).st_size < self.offset:
            self._restart(items, f"{self.path}: file truncated")
            return
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            # moved away and not re-created yet: keep reading the old inode, a writer may still append
            self._say(items, f"'{self.path}' has become inaccessible: No such file or directory")
            return
        except OSError as exc:
            self._say(items, f"'{self.path}' has become inaccessible: {exc.strerror}")
            return
        if (st.st_dev, st.st_ino) != self._inode:
            self.close()  # the old file was read to its end just now
            if self._open():
                self.offset = 0
                self.fingerprint.reset()
                self._said = None
                items.append(TailReset(f"'{self.path}' has been replaced;  following new file"))
                self._more = True

    @property
    def inode(self) -> str | None:
        return None if self._inode is None else str(self._inode[1])
