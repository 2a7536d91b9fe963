"""When a fleet watch reads every node of every rack through the server (the alerting pass, every
``detail_interval``), and what it does when that pass fails or leaves nodes unread.

Counted as done when asked, a pass whose answers timed out on a loaded server left every node unread
until the next one, an hour on with a long interval: the drill-down had no reading to form a rate
from, and the rules judged nothing. A failed pass is asked again a round later, then two, four...
rounds (a server that keeps refusing it is not asked for the whole fleet every round); an answered
one makes the next due a detail interval on.

An answered pass can still lack some nodes: the server holds no sample of theirs at its instant (a
scrape that timed out writes stale markers for the whole exporter). Those racks alone are asked again
on the same schedule, a round later, then two, four... (a node gone for good costs its rack's queries a
dozen times an hour, not the fleet's), until every node of theirs is read.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from tokenwatch.base.events import Event, GpuBatch, ProgressBatch

# Due this much before its time still counts as due: the grid's instants are sums of floats.
_DUE_SLACK_S = 1e-6


@dataclass
class AlertingPassSchedule:
    interval_s: float  # the rounds' interval
    detail_interval_s: float  # between two answered passes
    counted_from: float = -math.inf  # Unix time the next pass is due a detail interval after
    failed_in_a_row: int = 0
    unread: frozenset[str] = frozenset()  # racks with nodes the last answered pass did not read
    unread_tries: int = 0  # rounds that asked them and still left some unread
    unread_due_at: float = math.inf  # Unix time they are asked again

    def due(self, instant: float) -> bool:
        return instant - self.counted_from >= self.detail_interval_s - _DUE_SLACK_S

    def unread_due(self, instant: float) -> frozenset[str]:
        """The racks a pass left nodes of unread, when their next ask is due (else none)."""
        return self.unread if instant >= self.unread_due_at - _DUE_SLACK_S else frozenset()

    def asked(self, instant: float, answered: bool) -> None:
        """The pass asked at ``instant`` was answered (every node query), or not."""
        if answered:
            self.failed_in_a_row = 0
            self.counted_from = instant
            return
        self.failed_in_a_row += 1
        self.counted_from = instant - self.detail_interval_s + self._backoff_s(self.failed_in_a_row)

    def read(self, instant: float, asked: frozenset[str] | None, unread: frozenset[str]) -> None:
        """A round at ``instant`` asked the nodes of ``asked`` racks (None: the whole fleet, in an
        answered pass) and left nodes of ``unread`` racks unread."""
        if asked is None:
            self.unread, self.unread_tries = unread, 0
        elif self.unread:
            retried = self.unread <= asked  # else a focus that read some of them in passing
            self.unread = (self.unread - asked) | (self.unread & unread)
            if retried:
                self.unread_tries += 1
            elif self.unread:
                return
        else:
            return
        self.unread_due_at = instant + self._backoff_s(self.unread_tries + 1) if self.unread else math.inf

    def _backoff_s(self, tries: int) -> float:
        """A round on after the first try, then two, four... up to the detail interval."""
        return min(self.interval_s * 2.0 ** (tries - 1), self.detail_interval_s)


def racks_left_unread(
    events: Sequence[Event], rack_of_node: npt.NDArray[np.str_], asked: frozenset[str] | None
) -> frozenset[str]:
    """The ``asked`` racks (None: all) with a node none of ``events`` read (no counters, no GPUs);
    ``rack_of_node``: each node index's rack."""
    read = np.zeros(len(rack_of_node), bool)
    for event in events:
        if isinstance(event, ProgressBatch | GpuBatch):
            read[event.node_index] = True
    left = rack_of_node[~read]
    if asked is not None:
        left = left[np.isin(left, list(asked))]
    return frozenset(np.unique(left).tolist())
