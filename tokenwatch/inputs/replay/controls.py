"""The replay player's state, what the dashboard reads of it and what its keys do.

:class:`PlayerControls` holds everything a replay knows (the tape playing now, the keyframes, the
position, the pacer) and answers the screen (position, length, speed, keyframes); its controls (pause,
speed, seek) only set what is wanted and wake the player, which acts on it:
:class:`~tokenwatch.inputs.replay.player.ReplayPlayer` plays, keyframes and seeks.
"""

from __future__ import annotations

import asyncio
import math
from pathlib import Path
from typing import Protocol

from tokenwatch.base.clock import Clock, MonotonicClock
from tokenwatch.base.loading import Loading
from tokenwatch.base.pacing import Pacer
from tokenwatch.core import CoreConfig, RackCore
from tokenwatch.inputs.replay.keeper import KeyframeKeeper
from tokenwatch.inputs.replay.tape import ReplayTape
from tokenwatch.recording import RecordingReader, RecordingWriter

# Speeds `+` and `-` step through; 0 means as fast as possible and sorts as the fastest.
SPEEDS: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 0.0)
KEYFRAME_EVERY_S = 300.0
KEYFRAME_BUDGET_BYTES = 64 * 2**20  # compressed keyframes are thinned (every other one) beyond this


class PlaybackHost(Protocol):
    """What the player needs of the session it feeds (:class:`tokenwatch.session.Session` is one)."""

    core: RackCore
    recorder: RecordingWriter | None
    stop_on_run_end: bool

    async def drained(self) -> None: ...

    def replace_core(self, core: RackCore) -> None: ...


def _speed_rank(speed: float) -> float:
    return math.inf if speed == 0 else speed


class PlayerControls:
    """A replay's state, as the screen reads it, and its controls, which wake the player."""

    def __init__(
        self,
        path: str | Path,
        *,
        speed: float = 1.0,
        start_s: float = 0.0,
        paused: bool = False,
        clock: Clock | None = None,
        keyframe_every_s: float = KEYFRAME_EVERY_S,
        keyframe_budget_bytes: int = KEYFRAME_BUDGET_BYTES,
        index: bool = False,
    ) -> None:
        """``index``: once bound, keep keyframes in the recording's index (see replay_index), not memory."""
        self.path = Path(path)
        self._tape = ReplayTape(self.path)  # reads the header now: a bad file is reported up front
        self.pacer = Pacer(clock or MonotonicClock(), max(0.0, speed))
        self.pacer.paused = paused
        self._keyframes = KeyframeKeeper(self.path, keyframe_every_s, keyframe_budget_bytes, self._warn)
        self._use_index = index
        self.message = ""  # the latest thing the engineer should know (e.g. why a seek was refused)
        self.loading: Loading | None = None  # a play up to the start (or a seek ahead) under way
        self._host: PlaybackHost | None = None
        self._config: CoreConfig | None = None
        self._loaders: list[asyncio.Future[None]] = []
        self._warnings: dict[str, None] = {}  # of every tape so far, in order, each once
        self._position = 0.0
        self._played_any = False
        self._seek_target: float | None = max(0.0, start_s)
        self._seeking = True
        self._changed = asyncio.Event()
        self._end_reported = False
        self._end_handled = False
        self._scanned_end: float | None = None  # the run time of the recording's last event (scan)
        self._scan_done = False
        self._closing = False

    # ------------------------------------------------------------ wiring
    def bind(self, host: PlaybackHost) -> None:
        """Feed ``host`` (a session) with controls: keyframe its core, seek back, scan for the length."""
        self._host = host
        self._config = host.core.config
        host.stop_on_run_end = False  # the end of the run is not the end of the replay
        if self._use_index:
            self._keyframes.use_index(self._config)

    def _warn(self, warning: str) -> None:
        self._warnings.setdefault(warning)
        self.message = warning

    @property
    def indexed(self) -> bool:
        """Whether keyframes are in an index file (being built, or complete)."""
        return self._keyframes.indexed

    @property
    def index_complete(self) -> bool:
        """Whether the index covers the whole recording (opened so, or committed at the end)."""
        return self._keyframes.complete

    @property
    def reader(self) -> RecordingReader:
        """The reader of the tape playing now."""
        return self._tape.reader

    @property
    def warnings(self) -> list[str]:
        """Every warning met reading the recording so far (each once, however often re-read)."""
        self._gather_warnings(self._tape)
        return list(self._warnings)

    def _gather_warnings(self, tape: ReplayTape) -> None:
        for warning in tape.reader.warnings:
            self._warnings.setdefault(warning)

    # ------------------------------------------------------------ state for the screen
    @property
    def speed(self) -> float:
        return self.pacer.speed

    @property
    def paused(self) -> bool:
        return self.pacer.paused

    @property
    def position_s(self) -> float:
        """Run time of the latest event played."""
        return self._position

    @property
    def duration_s(self) -> float | None:
        """Run time of the recording's last event, once known (the scan, or the end played)."""
        if self._scan_done:
            return self._scanned_end
        return self._position if self._tape.exhausted else None

    @property
    def loaded(self) -> bool:
        """Whether the recording's length is known."""
        return self._scan_done or self._tape.exhausted

    @property
    def seeking(self) -> bool:
        return self._seeking or self._seek_target is not None

    @property
    def at_end(self) -> bool:
        """Everything played and handled by the session."""
        return self._end_handled and self._tape.exhausted and not self.seeking

    @property
    def keyframe_count(self) -> int:
        return len(self._keyframes.store)

    @property
    def keyframe_every_s(self) -> float:
        return self._keyframes.store.every_s

    # ------------------------------------------------------------ controls
    def _poke(self) -> None:
        self._changed.set()

    def pause(self) -> None:
        self.pacer.paused = True
        self._poke()

    def resume(self) -> None:
        self.pacer.paused = False
        self.pacer.rebase(self._position)
        self._poke()

    def toggle_pause(self) -> None:
        self.resume() if self.paused else self.pause()

    def set_speed(self, speed: float) -> None:
        self.pacer.set_speed(speed, self._position)
        self._poke()

    def faster(self) -> None:
        ahead = [s for s in SPEEDS if _speed_rank(s) > _speed_rank(self.speed)]
        if ahead:
            self.set_speed(min(ahead, key=_speed_rank))

    def slower(self) -> None:
        behind = [s for s in SPEEDS if _speed_rank(s) < _speed_rank(self.speed)]
        if behind:
            self.set_speed(max(behind, key=_speed_rank))

    def seek(self, t: float) -> None:
        """Go to run time ``t`` (clamped to the recording, saying so); the latest request wins."""
        self._seek_target = max(0.0, t) if math.isfinite(t) else 0.0
        self.message = ""  # what the last seek met is no longer news
        self._poke()

    def seek_by(self, delta_s: float) -> None:
        base = self._seek_target if self._seek_target is not None else self._position
        self.seek(base + delta_s)
