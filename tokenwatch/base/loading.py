"""A slow start, said while it goes: what is being loaded and how far (``loading baseline a.jsonl.zst:
43 %``), from one object every outlet reads (the terminal line before the dashboard opens, the
dashboard's header, a headless run's stderr).

A load shorter than :data:`QUIET_S` says nothing: a quick start stays quiet, and only a start a person
would wait on (a rack's baseline recording, a watch reading minutes of logs, a replay playing up to its
``--start``) is announced.
"""

from __future__ import annotations

import time
from collections.abc import Callable

QUIET_S = 0.5  # a load shorter than this says nothing


class Loading:
    """A load under way: call it with the share done (0..1) as it goes; :meth:`finish` once it is over."""

    def __init__(self, what: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.what = what
        self.clock = clock
        self.started = clock()
        self.share = 0.0
        self.finished_at: float | None = None

    def __call__(self, fraction: float) -> None:
        self.share = min(1.0, max(0.0, fraction))

    def finish(self) -> None:
        if self.finished_at is None:
            self.finished_at = self.clock()

    @property
    def elapsed_s(self) -> float:
        return (self.finished_at if self.finished_at is not None else self.clock()) - self.started

    def worth_saying(self) -> bool:
        """Whether it has gone on long enough to be said (:data:`QUIET_S`)."""
        return self.elapsed_s >= QUIET_S

    def text(self) -> str:
        """``loading baseline a.jsonl.zst:  43 %``."""
        return f"{self.what}: {self.share * 100:3.0f} %"

    def done_text(self) -> str:
        """``loading baseline a.jsonl.zst: done in 11.2 s``."""
        return f"{self.what}: done in {self.elapsed_s:.1f} s"
