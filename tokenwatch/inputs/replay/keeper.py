"""Where a replay keeps its keyframes: in memory (:class:`Keyframes`) or in the recording's index in this
user's cache folder (:class:`IndexedKeyframes`), falling back to memory, with one warning, whenever the
file fails (an index that fails to load is removed, so the next open builds a new one)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tokenwatch.core import CoreConfig, RackCore
from tokenwatch.inputs.replay.index import IndexedKeyframe, UnusableIndexError
from tokenwatch.inputs.replay.index_store import IndexedKeyframes, open_keyframes
from tokenwatch.inputs.replay.keyframes import Keyframe, Keyframes, freeze, thaw
from tokenwatch.inputs.replay.tape import TapePosition

AnyKeyframe = Keyframe | IndexedKeyframe


class KeyframeKeeper:
    """The player's keyframes; ``warn`` hears each problem with the index once, in one line."""

    def __init__(self, path: Path, every_s: float, budget_bytes: int, warn: Callable[[str], None]) -> None:
        self.path = path
        self._every_s = every_s
        self._budget_bytes = budget_bytes
        self._warn = warn
        self.store: Keyframes | IndexedKeyframes = Keyframes(every_s, budget_bytes)
        self.config: CoreConfig | None = None

    def use_index(self, config: CoreConfig | None) -> None:
        """Keep keyframes in the recording's index (opened, or built on this pass) where possible."""
        self.config = config
        indexed, warning = open_keyframes(self.path, config)
        if indexed is not None:
            self.store = indexed
        if warning:
            self._warn(warning)

    def _failed(self, warning: str) -> None:
        """Go on with keyframes in memory (from the start: the file's are not to be trusted now)."""
        if isinstance(self.store, IndexedKeyframes):
            self.store.remove()
            self.store = Keyframes(self._every_s, self._budget_bytes)
        self._warn(warning)

    @property
    def indexed(self) -> bool:
        return isinstance(self.store, IndexedKeyframes)

    @property
    def complete(self) -> bool:
        return isinstance(self.store, IndexedKeyframes) and not self.store.building

    def due(self, played_s: float) -> bool:
        return self.store.due(played_s)

    def before(self, t: float) -> AnyKeyframe:
        return self.store.before(t)

    def near(self, keyframe: AnyKeyframe, target: float) -> bool:
        """Whether ``keyframe`` is an index keyframe at most two spacings before ``target`` (a short seek)."""
        return isinstance(keyframe, IndexedKeyframe) and target - keyframe.t <= 2 * self.store.every_s

    def keep(self, t: float, position: TapePosition | None, core: RackCore) -> None:
        """``core`` as of just before the event at ``position`` (run time ``t``), on the loop feeding it."""
        store = self.store
        if isinstance(store, Keyframes):
            store.add(Keyframe(position, t, freeze(core)))  # streamed: no copy of the core is made
            return
        try:
            store.add(t, position, core)
        except OSError as exc:
            self._failed(f"{self.path}: replay index not written ({exc.strerror}): kept in memory")

    def commit(self) -> None:
        """The first pass reached the end: the index goes into place."""
        store = self.store
        if isinstance(store, IndexedKeyframes) and store.building:
            try:
                store.commit()
            except OSError as exc:
                self._failed(f"{self.path}: replay index not written ({exc.strerror}): kept in memory")

    def start_of(self, keyframe: AnyKeyframe) -> Keyframe:
        """The keyframe's place in the recording (its core is restored while a tape reads from there)."""
        store = self.store
        if isinstance(keyframe, Keyframe) or not isinstance(store, IndexedKeyframes):
            return keyframe if isinstance(keyframe, Keyframe) else Keyframe(None, 0.0, b"")
        try:
            return Keyframe(store.position_of(keyframe), keyframe.t, b"")
        except (UnusableIndexError, OSError) as exc:
            self._failed(f"{store.path}: replay index {exc}: ignored, keyframes kept in memory")
            return Keyframe(None, 0.0, b"")

    def core_of(self, keyframe: AnyKeyframe, start: Keyframe) -> RackCore | None:
        """The keyframe's core; None where the index turns out damaged (then: from the start)."""
        store = self.store
        if isinstance(keyframe, Keyframe) or not isinstance(store, IndexedKeyframes):
            return thaw(start, self.config)
        try:
            return store.core_of(keyframe) or RackCore(self.config)
        except (UnusableIndexError, OSError) as exc:
            self._failed(f"{store.path}: replay index {exc}: ignored, keyframes kept in memory")
            return None

    def close(self) -> None:
        if isinstance(self.store, IndexedKeyframes):
            self.store.close()
