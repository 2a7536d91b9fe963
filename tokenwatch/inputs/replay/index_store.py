"""The player's keyframes in the recording's index (replay_index): opened whole, or written on the
first pass; where the index is (replay_index_place) and what happens when it cannot be used."""

from __future__ import annotations

import contextlib
from pathlib import Path

import numpy as np

from tokenwatch.base.safe_files import NotPrivateError
from tokenwatch.core import CoreConfig, RackCore
from tokenwatch.inputs.replay.index import (
    INDEX_EVERY_S,
    IndexedKeyframe,
    IndexReader,
    IndexWriter,
    UnusableIndexError,
    recording_identity,
)
from tokenwatch.inputs.replay.index_place import index_path_for, remove_unused, touch, user_key
from tokenwatch.inputs.replay.keyframes import keyframe_due
from tokenwatch.inputs.replay.tape import TapePosition

# The empty core of the start, in no file.
START = IndexedKeyframe(0.0, (0, 0, ""), (0, 0, ""), np.zeros(0, "<i4"), np.zeros(0, "<i4"))


class IndexedKeyframes:
    """The player's keyframes in an index: opened whole, or written on the first pass (``writer``)."""

    def __init__(self, source: IndexReader | IndexWriter) -> None:
        self._source = source
        self.path = source.path
        self.every_s = source.every_s
        self.frames: list[IndexedKeyframe] = [START, *source.keyframes]
        self.building = isinstance(source, IndexWriter)

    def __len__(self) -> int:
        return len(self.frames)

    def due(self, played_s: float) -> bool:
        return self.building and keyframe_due(played_s, self.frames[-1].t, self.every_s)

    def add(self, t: float, position: TapePosition | None, core: RackCore) -> None:
        """Raises OSError where the file cannot take it (a full disk)."""
        assert isinstance(self._source, IndexWriter)
        self._source.add(t, position, core)
        self.frames.append(self._source.keyframes[-1])

    def before(self, t: float) -> IndexedKeyframe:
        usable = [kf for kf in self.frames if kf.t <= t]
        return usable[-1] if usable else START

    def position_of(self, keyframe: IndexedKeyframe) -> TapePosition | None:
        """Where the keyframe's next event is (None: the start). Raises :class:`UnusableIndexError`."""
        return None if keyframe is START else self._source.read_position(keyframe)

    def core_of(self, keyframe: IndexedKeyframe) -> RackCore | None:
        """The keyframe's core (None: the start, a new one). Raises :class:`UnusableIndexError`."""
        return None if keyframe is START else self._source.read_core(keyframe)

    def commit(self) -> None:
        """The first pass reached the end: put the index in place (raises OSError)."""
        if isinstance(self._source, IndexWriter) and self.building:
            self.building = False
            self._source.commit()
            remove_unused(self.path.parent, keep=self.path)

    def remove(self) -> None:
        """Close and delete the index (it failed to load: the next open builds a new one)."""
        self.close()
        if not self.building:
            with contextlib.suppress(OSError):
                self.path.unlink()

    def close(self) -> None:
        if isinstance(self._source, IndexWriter) and self.building:
            self._source.discard()  # an unfinished first pass leaves no index
        else:
            self._source.close()


def open_keyframes(
    recording: Path, config: CoreConfig | None, every_s: float = INDEX_EVERY_S
) -> tuple[IndexedKeyframes | None, str]:
    """The recording's index, or a new one to build on the first pass; None and a one-line warning where
    neither can be had (the player keeps its keyframes in memory then)."""
    where: Path | str = "replay index"
    warning = ""
    try:
        key = user_key()
        target = where = index_path_for(recording)
        try:
            reader = IndexReader(target, recording, config, key)
        except FileNotFoundError:
            pass
        except UnusableIndexError as exc:
            warning = f"{target}: replay index {exc}: rebuilt on this pass"
        else:
            touch(target)
            return IndexedKeyframes(reader), ""
        writer = IndexWriter(target, recording_identity(recording, config), key, every_s)
    except NotPrivateError as exc:
        return None, f"{exc}: replay index not used, keyframes kept in memory"
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        return None, f"{where}: cannot use a replay index ({reason}): keyframes kept in memory"
    return IndexedKeyframes(writer), warning
