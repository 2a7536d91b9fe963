"""The inference engines' queues per node (requests running and waiting, KV-cache use), as the servers'
gauges report them: evidence for a straggler whose GPUs look like the rack's (a node that queues more
than its peers is slow in its engine, not in its silicon), and when each engine last had work (a node is
idle only once its engine has been empty for a while, not at one empty reading between requests).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tokenwatch.base.events import EngineQueue, FloatArray
from tokenwatch.core._ring import RecentRing

QUEUE_FIELDS: tuple[str, ...] = ("running", "waiting", "kv_cache_pct")


@dataclass(slots=True, eq=False)
class EngineQueues:
    """Latest gauges per node (nodes, 3) in :data:`QUEUE_FIELDS` order (NaN: never reported), when they
    came, when each engine last reported a request running or waiting (``busy_t``, run time; NaN: never),
    and the recent ticks' values (pushed only once some engine has reported)."""

    latest: FloatArray
    seen_t: FloatArray
    busy_t: FloatArray
    recent: RecentRing
    any_seen: bool = False

    @classmethod
    def for_nodes(cls, nodes: int, points: int) -> EngineQueues:
        return cls(
            np.full((nodes, len(QUEUE_FIELDS)), np.nan),
            np.full(nodes, np.nan),
            np.full(nodes, np.nan),
            RecentRing(points, (nodes, len(QUEUE_FIELDS))),
        )

    def note(self, i: int, ev: EngineQueue) -> None:
        row = np.array([ev.running, ev.waiting, ev.kv_cache_pct])
        self.latest[i] = np.where(np.isnan(row), self.latest[i], row)
        self.seen_t[i] = ev.t
        if ev.running > 0 or ev.waiting > 0:  # NaN (not reported) compares False: no news of work
            self.busy_t[i] = ev.t
        self.any_seen = True

    def empty_since(self, t: float, hold_s: FloatArray) -> np.ndarray:
        """Per node: its engine's latest gauges read nothing running or waiting, fresh within ``hold_s``,
        and no reading showed work for longer than ``hold_s`` before ``t`` (never busy counts as empty
        for ever). One empty reading between two requests is not an idle engine."""
        with np.errstate(invalid="ignore"):
            empty = (self.latest[:, 0] == 0) & (self.latest[:, 1] == 0) & (t - self.seen_t <= hold_s)
            return np.asarray(empty & ~(t - self.busy_t <= hold_s), dtype=bool)

    def tick(self, t: float, fresh_nodes: np.ndarray) -> None:
        """Record the gauges of now; a node whose engine went silent has none."""
        if self.any_seen:
            self.recent.push(t, np.where(fresh_nodes[:, None], self.latest, np.nan))

    def window_mean(self, t: float, window_s: float) -> FloatArray:
        """(nodes, 3) mean of each node's gauges over the last ``window_s`` (NaN: none reported)."""
        n = len(self.latest)
        if not len(self.recent):
            return np.full((n, len(QUEUE_FIELDS)), np.nan)
        times, values = self.recent.view()
        inside = values[times > t - window_s]
        if not len(inside):
            return np.full((n, len(QUEUE_FIELDS)), np.nan)
        counted = np.isfinite(inside).sum(axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(counted > 0, np.nansum(inside, axis=0) / np.maximum(counted, 1), np.nan)
