"""A replay's keyframes: the core as of a place in the recording, kept compact, to seek back from.

A keyframe is the session's core at the moment an event is about to be played, with that event's
:class:`~tokenwatch.inputs.replay.tape.TapePosition`: restore the core, start a tape there, and play
on to any later run time. The core is kept pickled and zstd-compressed (an 8-rack core of ~97 MB of
mostly preallocated series is ~13 MB so), and keyframes are thinned to stay within a byte budget.

Everything here is picklable on purpose: a later fleet replay can build keyframes in a first pass and keep
them in an index file beside the recording, then seek anywhere by restoring one.
"""

from __future__ import annotations

import io
import math
import pickle
from dataclasses import dataclass

import zstandard

from tokenwatch.core import CoreConfig, RackCore
from tokenwatch.inputs.replay.tape import TapePosition

MAX_KEYFRAMES = 256
MIN_KEYFRAMES = 4  # the empty start and three more, whatever the budget


@dataclass(frozen=True, slots=True)
class Keyframe:
    position: TapePosition | None  # where the next event comes from (None: the file's start)
    t: float  # run time of the last event in the core (0 before any)
    blob: bytes  # the core, pickled and compressed (b"": the empty core of the start)

    @property
    def nbytes(self) -> int:
        return len(self.blob)


def freeze(core: RackCore) -> bytes:
    """The core as compact bytes, pickled straight into the compressor: neither a copy of the core nor
    the uncompressed pickle ever exists whole in memory (0.12 s for an 8-rack core). The core must not
    change meanwhile: call it on the loop that feeds it."""
    out = io.BytesIO()
    with zstandard.ZstdCompressor(level=1).stream_writer(out, closefd=False) as writer:
        pickle.dump(core, writer, protocol=pickle.HIGHEST_PROTOCOL)
    return out.getvalue()


def thaw(keyframe: Keyframe, config: CoreConfig | None) -> RackCore:
    """The keyframe's core, new and independent (the empty start: a new core with ``config``)."""
    if not keyframe.blob:
        return RackCore(config)
    with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(keyframe.blob)) as reader:
        core = pickle.load(reader)  # our own bytes, made by freeze() in this process
    assert isinstance(core, RackCore)
    return core


def keyframe_due(played_s: float, last_s: float, every_s: float) -> bool:
    """Whether a core that has played every event up to run time ``played_s`` is due for a keyframe, the
    newest being at ``last_s``: once past the next multiple of ``every_s`` (strictly, so the tick at that
    multiple, with the verdict and per-rack forecasts due there, the costliest of a seek's replay, has
    been sampled into the core and is never replayed by a seek from it)."""
    return played_s > (math.floor(last_s / every_s) + 1) * every_s


class Keyframes:
    """Keyframes in run-time order, the empty start first, within ``budget_bytes`` (compressed) and
    :data:`MAX_KEYFRAMES`: beyond either, every other one is dropped and the next are spaced wider."""

    def __init__(self, every_s: float, budget_bytes: int) -> None:
        self.every_s = every_s
        self.budget_bytes = budget_bytes
        self.frames: list[Keyframe] = [Keyframe(None, 0.0, b"")]

    def __len__(self) -> int:
        return len(self.frames)

    def due(self, played_s: float) -> bool:
        """Whether the core as of run time ``played_s`` is due to be kept (:func:`keyframe_due`)."""
        return keyframe_due(played_s, self.frames[-1].t, self.every_s)

    @property
    def nbytes(self) -> int:
        return sum(kf.nbytes for kf in self.frames)

    def add(self, keyframe: Keyframe) -> None:
        self.frames.append(keyframe)
        while len(self.frames) > MIN_KEYFRAMES and (
            self.nbytes > self.budget_bytes or len(self.frames) > MAX_KEYFRAMES
        ):
            # Keep the empty start and every other keyframe after it; space the next ones wider.
            self.frames = self.frames[:1] + self.frames[2::2]
            self.every_s *= 2

    def before(self, t: float) -> Keyframe:
        """The newest keyframe whose core holds nothing after run time ``t``."""
        usable = [kf for kf in self.frames if kf.t <= t]
        return usable[-1] if usable else self.frames[0]
