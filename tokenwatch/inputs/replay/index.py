"""A replay's keyframes on disk: an index of the recording in this user's cache folder, so a seek
anywhere is quick (where and why there: replay_index_place).

The dashboard's first pass over a recording writes the core every :data:`INDEX_EVERY_S` of run time into
a new private file (0600, a random name, O_EXCL) beside the index; when the pass reaches the end, a table
of contents is appended and the file renamed over the index (atomic: a reader sees a whole index or
none). The next open uses it at once. Nothing but the table of contents is held in memory.

Layout: a magic line, then zstd frames (with checksums), then the table of contents (JSON), then a footer
(the table's offset and length, its keyed MAC, the magic again). A core is pickled with its arrays out of
band (pickle protocol 5); each array's bytes are cut into :data:`CHUNK_BYTES` chunks stored once by their
digest, so the parts of the core that did not change since the previous keyframe (most of its
preallocated histories) cost nothing again; an all-zero chunk is not stored at all. A restore
decompresses each array straight into its own buffer (no second copy), skipping the zero chunks.

Trust: an index holds pickles, and a pickle from someone else runs their code. The table of contents
(which carries each pickle's digest) is signed with a key private to this user (``index.key`` in the
cache folder, which must be 0600 in a 0700 folder of the user's own): an index made elsewhere is foreign
and rebuilt. An index of another recording, or of this one before it changed (size, mtime, first 64 KiB),
is stale and rebuilt; so is one made by other code (replay_index_code: the digest of the pickled classes'
paths and fields); a damaged one is ignored with one warning.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
import hmac
import io
import os
import pickle
import struct
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import orjson
import zstandard

from tokenwatch.base.safe_files import open_regular
from tokenwatch.core import CoreConfig, RackCore
from tokenwatch.inputs.replay.index_code import Name, RecordingPickler, bytecode_of, code_digest
from tokenwatch.inputs.replay.index_place import create_private, open_private
from tokenwatch.inputs.replay.tape import TapePosition

# Run time between keyframes: the verdict interval (10 s), so each keyframe comes just after a verdict
# tick (replay_keyframes.keyframe_due) and a seek never replays one (64 rack forecasts, ~80 ms of CPU
# at 64 racks), only up to 10 one-second ticks.
INDEX_EVERY_S = 10.0
CHUNK_BYTES = 256 << 10
_MAGIC = b"tokenwatch-replay-index\n"
_FOOTER = struct.Struct("<QQ32s24s")  # table offset, table length, MAC, magic
_PICKLE_PROTOCOL = 5
_HEAD_BYTES = 64 << 10  # of the recording, hashed to tell it from another of the same size and time


class UnusableIndexError(ValueError):
    """An index that cannot be used; the message says why in one line."""


# A recording this large (a few racks' run: the 8-rack x 8-hour one is 182 MB) keeps its keyframes in an
# index; a rack's (6 MB for 80 minutes) keeps them in memory, where they fit and leave no file behind.
INDEX_FROM_BYTES = 32 << 20


def wants_index(recording: str | Path) -> bool:
    """Whether a dashboard replay of ``recording`` should keep its keyframes in an index."""
    try:
        return Path(recording).stat().st_size >= INDEX_FROM_BYTES
    except OSError:
        return False  # the replay itself says what is wrong with the path


def recording_identity(recording: Path, config: CoreConfig | None) -> dict[str, Any]:
    """What an index must match: the recording's size, modification time and first bytes, and the core's
    settings (an SLA given on the command line changes the state kept). Raises OSError (a FIFO too)."""
    with os.fdopen(open_regular(recording), "rb") as fh:
        stat = os.fstat(fh.fileno())
        head = hashlib.blake2b(fh.read(_HEAD_BYTES), digest_size=16).hexdigest()
    settings = repr(config or CoreConfig())
    return {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "head": head, "core": settings}


def _digest(data: bytes | memoryview) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


@dataclass(frozen=True, slots=True, eq=False)
class IndexedKeyframe:
    """A keyframe in an index: its run time and where its parts are. The chunk numbers are packed (int32):
    as tuples of Python ints, 255 keyframes of ~4,300 chunks each held ~90 MB."""

    t: float
    position: tuple[int, int, str]  # offset, length, digest of the compressed pickled TapePosition
    meta: tuple[int, int, str]  # the same of the core's pickle (its arrays out of band)
    numbers: np.ndarray  # the chunks' numbers of every out-of-band array, array after array
    counts: np.ndarray  # how many chunks each array has, in order

    def buffers(self) -> list[np.ndarray]:
        """Per out-of-band array: its chunks' numbers, in order."""
        return np.split(self.numbers, np.cumsum(self.counts)[:-1]) if len(self.counts) else []


def _packed(values: list[int]) -> np.ndarray:
    return np.asarray(values, dtype="<i4")


def _encoded(values: np.ndarray) -> str:
    return base64.b64encode(values.astype("<i4").tobytes()).decode("ascii")


def _decoded(text: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(text, validate=True), dtype="<i4")


class IndexWriter:
    """Builds an index in a new private file beside ``target`` (random name, O_EXCL, 0600: nothing
    planted under a name it could use is ever opened); :meth:`commit` renames it into place.

    Raises OSError on construction where the folder cannot be written."""

    def __init__(self, target: Path, identity: dict[str, Any], key: bytes, every_s: float) -> None:
        self.target = self.path = target
        fd, self.tmp = create_private(target)
        self._fh: BinaryIO = os.fdopen(fd, "w+b")  # closed by commit()/discard()
        self._fh.write(_MAGIC)
        self._names: set[Name] = set()  # every class and function the pickles name (replay_index_code)
        self._identity = identity
        self._key = key
        self.every_s = every_s
        self._compressor = zstandard.ZstdCompressor(level=1, write_checksum=True)
        self._chunk_of: dict[str, int] = {}
        self.chunks: list[tuple[int, int, int]] = []  # offset, compressed length, raw length
        self.keyframes: list[IndexedKeyframe] = []

    @property
    def nbytes(self) -> int:
        return self._fh.tell()

    def _append(self, data: bytes) -> tuple[int, int]:
        self._fh.seek(0, os.SEEK_END)
        offset = self._fh.tell()
        self._fh.write(data)
        return offset, len(data)

    def _chunk(self, raw: memoryview) -> int:
        digest = _digest(raw)
        number = self._chunk_of.get(digest)
        if number is None:
            if np.frombuffer(raw, np.uint8).any():
                offset, length = self._append(self._compressor.compress(raw))
            else:
                offset, length = 0, 0  # all zeros: nothing stored, nothing to decompress or touch
            number = self._chunk_of[digest] = len(self.chunks)
            self.chunks.append((offset, length, len(raw)))
        return number

    def add(self, t: float, position: TapePosition | None, core: RackCore) -> None:
        """Keep ``core`` (as of just before the event at ``position``) as the keyframe at ``t``."""
        buffers: list[pickle.PickleBuffer] = []
        meta = self._pickled(core, buffers.append)
        numbers: list[int] = []
        counts: list[int] = []
        for buffer in buffers:
            raw = buffer.raw()
            numbers.extend(self._chunk(raw[at : at + CHUNK_BYTES]) for at in range(0, len(raw), CHUNK_BYTES))
            counts.append(-(-len(raw) // CHUNK_BYTES))
        where = []
        for blob in (self._pickled(position), meta):
            packed = self._compressor.compress(blob)
            offset, length = self._append(packed)
            where.append((offset, length, _digest(packed)))
        self.keyframes.append(IndexedKeyframe(t, where[0], where[1], _packed(numbers), _packed(counts)))

    def _pickled(self, obj: object, buffer_callback: Any = None) -> bytes:
        out = io.BytesIO()
        pickler = RecordingPickler(
            out, self._names, protocol=_PICKLE_PROTOCOL, buffer_callback=buffer_callback
        )
        pickler.dump(obj)
        return out.getvalue()

    def read_position(self, keyframe: IndexedKeyframe) -> TapePosition | None:
        """Of a keyframe written so far (a seek during the first pass)."""
        self._fh.flush()
        return _read_position(self._fh, keyframe)

    def read_core(self, keyframe: IndexedKeyframe) -> RackCore:
        self._fh.flush()
        return _read_core(self._fh, self.chunks, keyframe)

    def commit(self) -> None:
        """Append the table of contents and rename the file over the index."""
        names = sorted(self._names)
        table = orjson.dumps(
            {
                "code": code_digest(names, _format_facts()),
                "names": names,
                "identity": self._identity,
                "every_s": self.every_s,
                "chunks": self.chunks,
                "keyframes": [
                    [kf.t, list(kf.position), list(kf.meta), _encoded(kf.numbers), _encoded(kf.counts)]
                    for kf in self.keyframes
                ],
            }
        )
        offset, length = self._append(table)
        mac = hmac.digest(self._key, table, "sha256")
        self._fh.write(_FOOTER.pack(offset, length, mac, _MAGIC.rjust(24)))
        self._fh.flush()
        os.fsync(self._fh.fileno())
        os.replace(self.tmp, self.target)  # the open file goes on serving this player's seeks

    def close(self) -> None:
        self._fh.close()

    def discard(self) -> None:
        self._fh.close()
        with contextlib.suppress(OSError):
            self.tmp.unlink()


class IndexReader:
    """A committed index, opened and checked: :meth:`read` restores a keyframe."""

    def __init__(self, path: Path, recording: Path, config: CoreConfig | None, key: bytes) -> None:
        """Raises :class:`UnusableIndexError` (stale, foreign or damaged) or OSError (unreadable)."""
        self.path = path
        self._fh: BinaryIO = os.fdopen(open_private(path), "rb")  # closed by close()
        try:
            table = self._table(key)
            if not isinstance(table.get("names"), list):  # made before the digest was: no names
                raise UnusableIndexError("made by another version of tokenwatch")
            names = [(str(module), str(name)) for module, name in table["names"]]
            if table.get("code") != code_digest(names, _format_facts()):
                raise UnusableIndexError("made by another version of tokenwatch")
            if table.get("identity") != recording_identity(recording, config):
                raise UnusableIndexError(
                    f"is stale (made for another version of {recording.name} or other settings)"
                )
            self.every_s = float(table["every_s"])
            self.chunks = [(int(o), int(n), int(r)) for o, n, r in table["chunks"]]
            self.keyframes = [
                IndexedKeyframe(float(t), _blob(p), _blob(m), _decoded(numbers), _decoded(counts))
                for t, p, m, numbers, counts in table["keyframes"]
            ]
            for kf in self.keyframes:  # a negative number would index from the end: refused here
                if kf.counts.sum() != len(kf.numbers) or (kf.counts < 0).any() or (kf.numbers < 0).any():
                    raise UnusableIndexError("damaged")
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            self._fh.close()
            raise UnusableIndexError(str(exc) if isinstance(exc, UnusableIndexError) else "damaged") from None
        except BaseException:
            self._fh.close()
            raise

    def _table(self, key: bytes) -> dict[str, Any]:
        size = self._fh.seek(0, os.SEEK_END)
        if size < len(_MAGIC) + _FOOTER.size:
            raise UnusableIndexError("damaged (too short)")
        self._fh.seek(0)
        if self._fh.read(len(_MAGIC)) != _MAGIC:
            raise UnusableIndexError("not a tokenwatch replay index")
        self._fh.seek(size - _FOOTER.size)
        offset, length, mac, magic = _FOOTER.unpack(self._fh.read(_FOOTER.size))
        if magic != _MAGIC.rjust(24) or offset + length > size - _FOOTER.size:
            raise UnusableIndexError("damaged (cut off?)")
        self._fh.seek(offset)
        table = self._fh.read(length)
        if not hmac.compare_digest(hmac.digest(key, table, "sha256"), mac):
            raise UnusableIndexError("made by another user or machine, or damaged")
        loaded = orjson.loads(table)
        if not isinstance(loaded, dict):
            raise UnusableIndexError("damaged")
        return loaded

    def read_position(self, keyframe: IndexedKeyframe) -> TapePosition | None:
        return _read_position(self._fh, keyframe)

    def read_core(self, keyframe: IndexedKeyframe) -> RackCore:
        return _read_core(self._fh, self.chunks, keyframe)

    def close(self) -> None:
        self._fh.close()


def _blob(where: list[Any]) -> tuple[int, int, str]:
    offset, length, digest = where
    return int(offset), int(length), str(digest)


def _unpickle(fh: BinaryIO, where: tuple[int, int, str], buffers: list[np.ndarray] | None = None) -> Any:
    """A pickle of this index whose digest (in the signed table) checks out; unpickled only then."""
    offset, length, digest = where
    fh.seek(offset)
    packed = fh.read(length)
    if _digest(packed) != digest:
        raise UnusableIndexError("damaged (a keyframe does not match its digest)")
    try:
        return pickle.loads(zstandard.ZstdDecompressor().decompress(packed), buffers=buffers)
    except Exception as exc:  # a class moved or changed (AttributeError, ModuleNotFoundError, ...) or damage
        raise UnusableIndexError(f"does not load ({type(exc).__name__})") from None


def _read_position(fh: BinaryIO, keyframe: IndexedKeyframe) -> TapePosition | None:
    position = _unpickle(fh, keyframe.position)
    if position is not None and not isinstance(position, TapePosition):
        raise UnusableIndexError("damaged (not a keyframe)")
    return position


# Threads that decompress a keyframe's chunks into its arrays: zstd lets go of the GIL, so two halve a
# 64-rack restore's ~85 ms of decompression. The arrays are allocated on the caller's thread (see
# replay.py: memory from a worker's malloc arena would not go back).
_DECOMPRESS_THREADS = 2
_Job = tuple[int, int, memoryview]  # offset and length of a compressed chunk, where it goes


@functools.cache
def _decompress_pool() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(_DECOMPRESS_THREADS, thread_name_prefix="twidx")


def _decompress_into(fd: int, jobs: list[_Job]) -> None:
    decompressor = zstandard.ZstdDecompressor()
    for offset, length, view in jobs:
        packed = os.pread(fd, length, offset)
        if len(packed) != length:
            raise UnusableIndexError("damaged (cut off?)")
        with decompressor.stream_reader(packed) as reader:
            at = 0
            while at < len(view):
                got = reader.readinto(view[at:])
                if not got:
                    raise UnusableIndexError("damaged (a part is short)")
                at += got


def _read_core(fh: BinaryIO, chunks: list[tuple[int, int, int]], keyframe: IndexedKeyframe) -> RackCore:
    """The keyframe's core, each array decompressed straight into memory of its own (no copy made).
    The all-zero chunks (unused capacity, ~40% of a 64-rack core's bytes) are not decompressed: an array
    of nothing else is np.zeros (calloc: fresh memory from the system is not even touched until the core
    writes there), any other np.empty with only its zero chunks cleared (memory reused from the previous
    core is not zeroed twice). Raises :class:`UnusableIndexError` where a part does not check out (the
    zstd checksums, the pickle's digest)."""
    buffers = []
    jobs: list[_Job] = []
    try:
        for numbers in keyframe.buffers():
            size = sum(chunks[n][2] for n in numbers)
            all_zero = not any(chunks[n][1] for n in numbers)
            buffer = np.zeros(size, np.uint8) if all_zero else np.empty(size, np.uint8)
            view = memoryview(buffer.data)
            at = 0
            for n in numbers:
                offset, length, raw = chunks[n]
                if length:
                    jobs.append((offset, length, view[at : at + raw]))
                elif not all_zero:  # an all-zero chunk
                    buffer[at : at + raw] = 0
                at += raw
            buffers.append(buffer)
        fd = fh.fileno()
        shares = [
            _decompress_pool().submit(_decompress_into, fd, jobs[k::_DECOMPRESS_THREADS])
            for k in range(_DECOMPRESS_THREADS)
        ]
        wait(shares)  # all of them, before a failure is raised: none goes on writing after
        for share in shares:
            share.result()
    except UnusableIndexError:
        raise
    except (zstandard.ZstdError, ValueError, IndexError):
        raise UnusableIndexError("damaged") from None
    core = _unpickle(fh, keyframe.meta, buffers)
    if not isinstance(core, RackCore):
        raise UnusableIndexError("damaged (not a keyframe)")
    return core


@functools.cache
def _format_facts() -> tuple[object, ...]:
    """What an index's compatibility is derived from besides the pickled classes (replay_index_code):
    the format's constants and the code that writes and reads it, so a change to either rebuilds older
    indexes without a number to bump."""
    code = bytecode_of(
        IndexWriter, IndexReader, _packed, _encoded, _decoded, _unpickle, _decompress_into, _read_core
    )
    return (_MAGIC, _FOOTER.format, CHUNK_BYTES, _PICKLE_PROTOCOL, code)
