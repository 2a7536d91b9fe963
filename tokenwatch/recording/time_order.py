"""Run time moves forward: a span a recording holds twice is left out and reported, never counted twice.

A recording's events are in run-time order, give or take the few milliseconds by which a live run's
sources stamp their events apart. Time going back by more than :data:`TIME_BACK_TOLERANCE_S` means
the file holds a span twice (a body appended again, ``cat a a``): the core would take the repeated
counters for a restart and count them twice. So the events from there until run time passes its
newest value again are left out, with one warning. A second run start is the same run again (left
out) or another recording appended (the rest of the file is left out).

Run time leaping ahead is left out too: an event more than :data:`MIN_JUMP_S` (or the run's nominal
length, if longer) past the newest run time so far is a broken clock or a stray line, not a run that went
quiet for that long; replayed, it would be hours of snapshots of empty time (a heartbeat at 31,000,000 s
after a 2-minute run was 3 M JSONL lines). One warning for the file; later events back near the run's
time are kept.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Callable
from dataclasses import dataclass

from tokenwatch.base.events import Event, RunStarted

TIME_BACK_TOLERANCE_S = 5.0
MIN_JUMP_S = 3600.0  # no event for an hour: a live run has heartbeats, a recording its ticks


class Verdict(enum.Enum):
    KEEP = 1
    SKIP = 2
    STOP = 3  # a different recording follows: read no further


@dataclass(slots=True)
class TimeOrder:
    """The filter's state: small, and copied into every place a reader may start again (a seek)."""

    newest: float = -math.inf
    run: RunStarted | None = None
    back_from: float | None = None  # while leaving out a span that went back: the time it must pass
    back_to: float = 0.0
    back_line: int = 0
    skipped: int = 0
    jump_reported: bool = False

    def copy(self) -> TimeOrder:
        return dataclasses.replace(self)

    def admit(self, event: Event, line: int, warn: Callable[[int, str], None]) -> Verdict:
        """Whether to hand ``event`` (on ``line``) on; ``warn(line, message)`` hears what was left out."""
        if isinstance(event, RunStarted):
            if self.run is None:
                self.run = event
                return Verdict.KEEP
            if _same_run(self.run, event):
                return Verdict.SKIP  # the time-order warning tells of the repeated span
            warn(
                line,
                f"a different recording ({event.name!r}) was appended to this one (cat a b?): "
                "the rest of the file is left out",
            )
            return Verdict.STOP
        if self.back_from is not None:
            if event.t <= self.back_from:
                self.skipped += 1
                return Verdict.SKIP
            self._report(line - 1, warn)
        elif event.t < self.newest - TIME_BACK_TOLERANCE_S:
            self.back_from, self.back_to, self.back_line, self.skipped = self.newest, event.t, line, 1
            return Verdict.SKIP
        if self._leaps_ahead(event.t):
            if not self.jump_reported:
                self.jump_reported = True
                warn(
                    line,
                    f"run time leaps from {self._reference():g} s to {event.t:,.0f} s with nothing between: "
                    "left out (and any later event as far ahead), no snapshots are made for empty time",
                )
            return Verdict.SKIP
        self.newest = max(self.newest, event.t)
        return Verdict.KEEP

    def _reference(self) -> float:
        """The run time a leap is measured from: the newest so far, else the run start's."""
        if self.newest > -math.inf or self.run is None:
            return self.newest
        return self.run.t

    def _leaps_ahead(self, t: float) -> bool:
        nominal = self.run.nominal_duration_s if self.run is not None else None
        reference = self._reference()  # -inf: no run time yet, nothing to leap from
        return reference > -math.inf and t - reference > max(MIN_JUMP_S, nominal or 0.0)

    def finish(self, last_line: int, warn: Callable[[int, str], None]) -> None:
        """At the end of the file: report a span still being left out."""
        if self.back_from is not None:
            self._report(last_line, warn, to_the_end=True)

    def _report(self, last_line: int, warn: Callable[[int, str], None], to_the_end: bool = False) -> None:
        assert self.back_from is not None
        until = "to the end of the file" if to_the_end else f"until it passed {self.back_from:g} s again"
        warn(
            self.back_line,
            f"run time went back from {self.back_from:g} s to {self.back_to:g} s (a recording appended "
            f"to itself, or its body twice?): the {self.skipped} events on lines "
            f"{self.back_line}-{last_line} {until} are left out, not counted twice",
        )
        self.back_from = None
        self.skipped = 0


def _same_run(a: RunStarted, b: RunStarted) -> bool:
    return (a.name, a.nodes, a.gpus_per_node, a.wall_epoch) == (
        b.name,
        b.nodes,
        b.gpus_per_node,
        b.wall_epoch,
    )
