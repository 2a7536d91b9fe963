"""File tails: the remote ``tail -F`` script (run here by the real sh, stat and GNU tail) and its stream
splitter, and the local os.read tailer, through rotation, truncation and resumption."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import PATIENCE_S, wait_until
from tokenwatch.base.clock import MonotonicClock
from tokenwatch.inputs.live.file_tail import LocalFileTailer
from tokenwatch.inputs.live.remote_commands import tail_command
from tokenwatch.inputs.live.tail_fingerprint import TailFingerprint
from tokenwatch.inputs.live.tail_stream import (
    TailData,
    TailItem,
    TailMessage,
    TailReset,
    TailStart,
    TailStreamError,
    TailStreamSplitter,
)

needs_gnu_tail = pytest.mark.skipif(
    shutil.which("tail") is None or shutil.which("stat") is None, reason="no tail"
)


def split_all(stream: bytes, cuts: list[int]) -> list[TailItem]:
    splitter = TailStreamSplitter()
    items: list[TailItem] = []
    last = 0
    for cut in [*sorted(c % (len(stream) + 1) for c in cuts), len(stream)]:
        items += splitter.feed(stream[last:cut])
        last = cut
    return items + splitter.flush()


def merge_data(items: list[TailItem]) -> list[object]:
    """Adjacent data joined (chunking must not matter), other items as they are."""
    out: list[object] = []
    for item in items:
        if isinstance(item, TailData) and out and isinstance(out[-1], bytes):
            out[-1] += item.data
        else:
            out.append(item.data if isinstance(item, TailData) else item)
    return out


ANNOUNCEMENTS = [
    (b"tail: '/x/a b.log' has been replaced;  following new file\n", TailReset),
    (b"tail: '/x/a' has appeared;  following new file\n", TailReset),
    (b"tail: /x/a: file truncated\n", TailReset),
    (b"tail: '/x/a' has become inaccessible: No such file or directory\n", TailMessage),
    (b"tail: cannot open '/x/a' for reading: No such file or directory\n", TailMessage),
]
lines = st.one_of(
    st.binary(max_size=30).map(lambda b: b.replace(b"\n", b" ") + b"\n"),
    st.just(b"tail: this line is the file's own, not tail's\n"),
    st.just(b"tail: "),
)


@settings(max_examples=300)
@given(
    st.lists(st.tuples(st.lists(lines, max_size=4), st.sampled_from([None, 0, 1, 2, 3, 4])), max_size=6),
    st.lists(st.integers(0, 10_000), max_size=12),
)
def test_splitter_lifts_out_announcements_whatever_the_chunking(
    segments: list[tuple[list[bytes], int | None]], cuts: list[int]
) -> None:
    stream = b"TW-START 1234 56\n"
    expected: list[object] = [TailStart("1234", 56)]
    for data_lines, announce in segments:
        data = b"".join(data_lines)
        if announce is not None and not (stream + data).endswith(b"\n"):
            data += b"\n"  # announcements are recognised at line starts (a documented limit)
        stream += data
        if data:
            if expected and isinstance(expected[-1], bytes):
                expected[-1] += data
            else:
                expected.append(data)
        if announce is not None:
            text, kind = ANNOUNCEMENTS[announce]
            stream += text
            expected.append(kind(text.decode().removeprefix("tail: ").rstrip("\n")))
    assert merge_data(split_all(stream, cuts)) == expected


def test_splitter_rejects_output_without_its_header() -> None:
    with pytest.raises(TailStreamError):
        TailStreamSplitter().feed(b"sh: 1: stat: not found\n")


def run_tail(
    path: Path, inode: str | None, offset: int, fingerprint: TailFingerprint | None = None
) -> subprocess.Popen[bytes]:
    # exactly what sshd does with the command line: hand it to the user's shell
    command = tail_command(str(path), inode, offset, fingerprint)
    return subprocess.Popen(command, shell=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE)


class RunningTail:
    """A tail script's output as it comes (a thread reads it), so a test waits on what it has said."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.out = bytearray()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        while chunk := os.read(self.proc.stdout.fileno(), 65536):
            self.out.extend(chunk)

    def said(self) -> list[object]:
        """Every whole item so far, adjacent data joined."""
        return merge_data(TailStreamSplitter().feed(bytes(self.out)))

    def until(self, what: str, predicate: Callable[[list[object]], bool]) -> None:
        wait_until(lambda: predicate(self.said()), what)

    def close(self) -> bytes:
        """Close stdin, as a closing channel does: the tail must end. All it wrote."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=PATIENCE_S)
        self.reader.join(timeout=PATIENCE_S)
        return bytes(self.out)


def told(proc: subprocess.Popen[bytes], ends_with: bytes | None) -> bytes:
    """All a tail wrote, once what it said after its start ends with ``ends_with`` (data, or a message's
    words; None: once it has said its start, for a tail with nothing more to say)."""
    tail = RunningTail(proc)
    if ends_with is None:
        tail.until("the tail's start", lambda said: len(said) >= 1)
    else:
        tail.until(
            f"the tail to say {ends_with!r}", lambda said: len(said) >= 2 and says(said[-1], ends_with)
        )
    return tail.close()


def says(item: object, ending: bytes) -> bool:
    if isinstance(item, bytes):
        return item.endswith(ending)
    return isinstance(item, TailMessage) and ending.decode() in item.text


@needs_gnu_tail
def test_remote_tail_script_follows_rotation_and_truncation(tmp_path: Path) -> None:
    log = tmp_path / "it's a log"
    log.write_bytes(b"a1\na2\n")
    tail = RunningTail(run_tail(log, None, 0))
    tail.until("the first lines", lambda said: said[1:2] == [b"a1\na2\n"])
    with open(log, "ab") as fh:
        fh.write(b"a3\n")
    tail.until("the appended line", lambda said: said[1:2] == [b"a1\na2\na3\n"])
    log.rename(tmp_path / "old.log")
    log.write_bytes(b"b1\n")
    tail.until("the new file's line", lambda said: said[-1] == b"b1\n")  # tail polls each second / inotify
    log.write_bytes(b"")
    tail.until("the truncation", lambda said: sum(isinstance(i, TailReset) for i in said) >= 2)
    with open(log, "ab") as fh:
        fh.write(b"c1\n")
    tail.until("the line after the truncation", lambda said: said[-1] == b"c1\n")
    items = merge_data(split_all(tail.close(), []))
    start = items[0]
    assert isinstance(start, TailStart)
    assert start.offset == 0
    assert items[1] == b"a1\na2\na3\n"
    resets = [i for i in items if isinstance(i, TailReset)]
    assert len(resets) >= 2
    data_after_last_reset = items[items.index(resets[-1]) + 1 :]
    assert data_after_last_reset == [b"c1\n"]
    assert b"b1\n" in items


@needs_gnu_tail
def test_remote_tail_script_resumes_at_the_offset_only_in_the_same_file(tmp_path: Path) -> None:
    log = tmp_path / "run.log"
    log.write_bytes(b"0123456789\nabc\n")
    inode = str(os.stat(log).st_ino)
    same = split_all(told(run_tail(log, inode, 11), b"abc\n"), [])
    assert merge_data(same) == [TailStart(inode, 11), b"abc\n"]
    other = split_all(told(run_tail(log, "999999999", 11), b"abc\n"), [])
    assert merge_data(other) == [TailStart(inode, 0), b"0123456789\nabc\n"]  # not our file: from 0
    shorter = split_all(told(run_tail(log, inode, 500), b"abc\n"), [])
    assert merge_data(shorter)[0] == TailStart(inode, 0)  # truncated while away
    missing = merge_data(split_all(told(run_tail(tmp_path / "nope", None, 0), b"cannot open"), []))
    assert missing[0] == TailStart(None, 0)
    assert any(isinstance(i, TailMessage) and "cannot open" in i.text for i in missing)


def drain(tailer: LocalFileTailer) -> list[object]:
    items: list[TailItem] = []
    while True:
        got = tailer.poll()
        items += got
        if not got:
            return merge_data(items)


def test_local_tailer_reads_appends_rotation_and_truncation(tmp_path: Path) -> None:
    log = tmp_path / "harness.log"
    log.write_bytes(b"one\n")
    tailer = LocalFileTailer(str(log))
    first = drain(tailer)
    assert isinstance(first[0], TailStart)
    assert first[1:] == [b"one\n"]
    with open(log, "ab") as fh:
        fh.write(b"two\n")
    assert drain(tailer) == [b"two\n"]
    with open(log, "ab") as fh:  # written just before rotation: must not be lost
        fh.write(b"three\n")
    log.rename(tmp_path / "harness.log.1")
    log.write_bytes(b"new1\n")
    after = drain(tailer)
    assert after[0] == b"three\n"
    assert isinstance(after[1], TailReset)
    assert after[2:] == [b"new1\n"]
    assert tailer.offset == 5
    log.write_bytes(b"x\n")  # truncated in place, then written
    after = drain(tailer)
    assert isinstance(after[0], TailReset)
    assert "truncated" in after[0].reason
    assert after[1:] == [b"x\n"]
    tailer.close()


def test_local_tailer_waits_for_a_missing_file_and_resumes_by_inode(tmp_path: Path) -> None:
    log = tmp_path / "later.log"
    tailer = LocalFileTailer(str(log))
    waiting = drain(tailer)
    assert len(waiting) == 1
    assert isinstance(waiting[0], TailMessage)
    assert drain(tailer) == []  # said once
    log.write_bytes(b"abc\ndef\n")
    got = drain(tailer)
    assert got[1:] == [b"abc\ndef\n"]
    inode, offset = tailer.inode, tailer.offset
    tailer.close()
    with open(log, "ab") as fh:
        fh.write(b"ghi\n")
    resumed = LocalFileTailer(str(log), inode=inode, offset=offset)
    assert drain(resumed) == [TailStart(inode, 8), b"ghi\n"]
    resumed.close()
    elsewhere = LocalFileTailer(str(log), inode="1", offset=offset)
    assert drain(elsewhere) == [TailStart(inode, 0), b"abc\ndef\nghi\n"]
    elsewhere.close()


async def test_local_tailer_follows_asynchronously(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_bytes(b"x\n")
    tailer = LocalFileTailer(str(log), poll_s=0.02)
    seen: list[TailItem] = []
    async for items in tailer.follow(MonotonicClock()):
        seen += items
        if any(isinstance(i, TailData) and b"y" in i.data for i in seen):
            break
        with open(log, "ab") as fh:
            fh.write(b"y\n")
    assert merge_data(seen)[1:] == [b"x\ny\n"] or merge_data(seen)[1:] == [b"x\n", b"y\n"]


# ---------------------------------------------------------------------------- truncated while away
OLD = b"".join(b"12:00:%02d run1 done %d samples\n" % (k, k) for k in range(1, 6))
NEW = b"".join(b"13:30:%02d run2 done %d samples\n" % (k, k) for k in range(1, 12))


def fingerprint_of(data: bytes) -> TailFingerprint:
    """What a tail that read ``data`` from byte 0 remembers of it."""
    fp = TailFingerprint()
    fp.read(0, data)
    return fp


def test_the_fingerprint_keeps_the_head_and_the_bytes_before_the_offset() -> None:
    fp = TailFingerprint()
    data = bytes(range(256)) * 20
    for at in range(0, len(data), 700):
        fp.read(at, data[at : at + 700])
    assert fp.head == data[: len(fp.head)]
    assert fp.tail == data[-len(fp.tail) :]
    assert len(fp.head) == len(fp.tail) == 1024


@needs_gnu_tail
def test_remote_tail_script_rereads_a_file_truncated_and_regrown_past_the_offset(tmp_path: Path) -> None:
    log = tmp_path / "harness.log"
    log.write_bytes(OLD)
    inode = str(os.stat(log).st_ino)
    fp = fingerprint_of(OLD)
    same = merge_data(split_all(told(run_tail(log, inode, len(OLD), fp), None), []))
    assert same == [TailStart(inode, len(OLD))]  # the same bytes: resumed at the offset
    with open(log, "r+b") as fh:  # truncated while the node was unreachable, then regrown past the offset
        fh.truncate(0)
        fh.write(NEW)
    assert str(os.stat(log).st_ino) == inode
    assert len(NEW) > len(OLD)
    again = merge_data(split_all(told(run_tail(log, inode, len(OLD), fp), NEW[-20:]), []))
    assert again == [TailStart(inode, 0), NEW]  # every new line, from the start


def test_local_tailer_rereads_a_file_truncated_and_regrown_past_the_offset(tmp_path: Path) -> None:
    log = tmp_path / "harness.log"
    log.write_bytes(OLD)
    inode = str(os.stat(log).st_ino)
    fp = fingerprint_of(OLD)
    resumed = LocalFileTailer(str(log), inode=inode, offset=len(OLD), fingerprint=fp)
    assert drain(resumed) == [TailStart(inode, len(OLD))]
    resumed.close()
    with open(log, "r+b") as fh:
        fh.truncate(0)
        fh.write(NEW)
    again = LocalFileTailer(str(log), inode=inode, offset=len(OLD), fingerprint=fp)
    assert drain(again) == [TailStart(inode, 0), NEW]
    again.close()


def test_local_tailer_notices_a_rewrite_between_two_polls(tmp_path: Path) -> None:
    """Truncated and regrown past the offset between two polls: the size never looked smaller."""
    log = tmp_path / "harness.log"
    log.write_bytes(OLD)
    tailer = LocalFileTailer(str(log))
    assert drain(tailer)[1:] == [OLD]
    with open(log, "r+b") as fh:
        fh.truncate(0)
        fh.write(NEW)
    after = drain(tailer)
    assert isinstance(after[0], TailReset)
    assert after[1:] == [NEW]
    tailer.close()
