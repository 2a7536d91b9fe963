"""A finished ``.zst`` recording's trailer: what a full read of it gave, found from the file's end.

``summarize`` of an 80-minute rack recording decodes ~140,000 lines and runs the core over them; the
recording's own last bytes can hold the result instead. The trailer is a zstd *skippable frame*
(magic ``0x184D2A5E``), which every zstd decoder (``zstd -d``, python-zstandard's readers, this
package's :mod:`~tokenwatch.recording.pieces`) passes over without output, so a recording with one reads
as it did without (replay, report, export, ``zstd -d`` all unchanged), and one without (older
recordings, plain ``.jsonl``, a file cut off) is read in full as before.

Layout at the end of the file::

    skippable frame head (8 bytes: magic, size) | payload (JSON) | payload length (u32) | TRAILER_MAGIC

so a reader finds it with two small reads from the end. The payload names the bytes it stands for: how
many (``body_bytes``: the trailer must begin exactly there, so a file with anything appended after it,
``cat a b``, is not taken for ``b``) and their SHA-256 (a byte changed anywhere in the body -> the
trailer is refused), and the versions it was made under (the trailer's format and tokenwatch's,
which fixes the recording format it wrote, and the build: a digest of tokenwatch's own sources, since the
version string is not bumped by every change that could move a figure). What the payload carries beyond that
(``content``) is its maker's; this module only frames, finds and checks it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from tokenwatch import __version__
from tokenwatch.base.build_stamp import code_digest

TRAILER_VERSION = 1
TRAILER_KEY = "tokenwatch_trailer"
SKIPPABLE_MAGIC = 0x184D2A5E  # one of zstd's sixteen skippable-frame magic numbers
TRAILER_MAGIC = b"TWTRAILR"  # the file's last 8 bytes when it ends with a trailer
_FRAME_HEAD = struct.Struct("<II")  # skippable magic, frame size
_FOOTER = struct.Struct("<I8s")  # payload length, TRAILER_MAGIC
MAX_PAYLOAD_BYTES = 64 << 20  # a 1,000-rack summary is a few MB; beyond this the length is damage
_HASH_CHUNK = 1 << 20
_CUT_SEARCH_BYTES = 1 << 20  # how far back from the end a cut-off trailer's start is looked for
_PAYLOAD_START = b'{"' + TRAILER_KEY.encode() + b'":'
_SKIPPABLE_BYTES = struct.pack("<I", SKIPPABLE_MAGIC)


class TrailerError(ValueError):
    """A trailer is there but cannot be used; the message says why (one line)."""


@dataclass(frozen=True, slots=True)
class Trailer:
    """A checked trailer: ``content`` as its maker wrote it."""

    content: dict[str, Any]


def supports_trailer(path: str | Path) -> bool:
    """Only a ``.zst`` can carry one unseen by readers (a plain file's readers would meet a foreign line)."""
    return Path(path).suffix == ".zst"


def body_digest(fd: int, length: int) -> str:
    """SHA-256 (hex) of the file's first ``length`` bytes."""
    digest = hashlib.sha256()
    offset = 0
    while offset < length:
        chunk = os.pread(fd, min(_HASH_CHUNK, length - offset), offset)
        if not chunk:
            raise TrailerError(f"the file is shorter than the {length:,} bytes the trailer stands for")
        digest.update(chunk)
        offset += len(chunk)
    return digest.hexdigest()


def append_trailer(path: str | Path, content: dict[str, Any]) -> None:
    """Append a trailer standing for the file's bytes as they are now. On a failed write the file is cut
    back to its length before (no torn frame at its end); the :class:`OSError` is raised."""
    from tokenwatch.recording.codec import SCHEMA_VERSION  # the writer's: a reader need not load the codec

    fd = os.open(path, os.O_RDWR | os.O_APPEND)
    try:
        body_bytes = os.fstat(fd).st_size
        payload = orjson.dumps(
            {
                TRAILER_KEY: TRAILER_VERSION,
                "recording_version": SCHEMA_VERSION,
                "tokenwatch_version": __version__,
                "tokenwatch_build": code_digest(),
                "body_bytes": body_bytes,
                "body_sha256": body_digest(fd, body_bytes),
                "content": content,
            }
        )
        frame = (
            _FRAME_HEAD.pack(SKIPPABLE_MAGIC, len(payload) + _FOOTER.size)
            + payload
            + _FOOTER.pack(len(payload), TRAILER_MAGIC)
        )
        try:
            view = memoryview(frame)
            while view:
                view = view[os.write(fd, view) :]
        except BaseException:  # a full disk, or a second Ctrl-C: no torn frame left at the end
            with contextlib.suppress(OSError):
                os.ftruncate(fd, body_bytes)
            raise
    finally:
        os.close(fd)


def read_trailer(path: str | Path) -> Trailer | None:
    """The file's trailer, checked against its bytes; None where it has none (an older recording, a
    plain file, a file cut off). Raises :class:`TrailerError` for one that is there but unusable
    (damaged, made by another format version, its bytes changed), and :class:`OSError` if unreadable."""
    if not supports_trailer(path):
        return None
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        if size < _FRAME_HEAD.size + _FOOTER.size:
            return None
        length, magic = _FOOTER.unpack(os.pread(fd, _FOOTER.size, size - _FOOTER.size))
        if magic != TRAILER_MAGIC:
            if _cut_trailer_in(os.pread(fd, min(size, _CUT_SEARCH_BYTES), max(0, size - _CUT_SEARCH_BYTES))):
                raise TrailerError("it is cut off")
            return None
        start = size - _FOOTER.size - length - _FRAME_HEAD.size
        if length > MAX_PAYLOAD_BYTES or start < 0:
            raise TrailerError("its length field is damaged")
        block = os.pread(fd, _FRAME_HEAD.size + length, start)
        frame_magic, frame_size = _FRAME_HEAD.unpack_from(block)
        if frame_magic != SKIPPABLE_MAGIC or frame_size != length + _FOOTER.size:
            raise TrailerError("its frame header is damaged")
        payload = _parse(block[_FRAME_HEAD.size :])
        if payload["body_bytes"] != start:
            raise TrailerError("it stands for another length of recording (bytes added or cut before it?)")
        if body_digest(fd, start) != payload["body_sha256"]:
            raise TrailerError("the recording's bytes changed since it was written")
        return Trailer(payload["content"])
    finally:
        os.close(fd)


def _cut_trailer_in(tail: bytes) -> bool:
    """Whether the file's last bytes hold the start of a trailer whose end is missing."""
    at = tail.rfind(_SKIPPABLE_BYTES)
    return at >= 0 and tail.startswith(_PAYLOAD_START, at + _FRAME_HEAD.size)


def _parse(raw: bytes) -> dict[str, Any]:
    try:
        payload = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise TrailerError("its JSON is damaged") from None
    if not isinstance(payload, dict) or payload.get(TRAILER_KEY) != TRAILER_VERSION:
        raise TrailerError("it is not a trailer this tokenwatch reads")
    # The summary it holds is what this tokenwatch's full pass gives only if this tokenwatch made it (its
    # version also fixes the recording format it wrote).
    if payload.get("tokenwatch_version") != __version__:
        raise TrailerError(
            f"made by tokenwatch {str(payload.get('tokenwatch_version'))[:40]}, this is {__version__}"
        )
    # The version is not bumped by every change: the code itself must be the code that made it.
    if payload.get("tokenwatch_build") != code_digest():
        raise TrailerError(f"made by another build of tokenwatch {__version__}")
    if (
        type(payload.get("body_bytes")) is not int
        or not isinstance(payload.get("body_sha256"), str)
        or not isinstance(payload.get("content"), dict)
    ):
        raise TrailerError("its fields are damaged")
    return payload
