"""A fleet watch's history: when the run began, and the rack figures from then to the watch's start on
the live grid (:class:`FleetHistory`, a part of
:class:`~tokenwatch.inputs.prometheus.fleet.PrometheusFleetCollector`)."""

from __future__ import annotations

import math

from tokenwatch.base.events import Event, Notice
from tokenwatch.base.gc_pause import gc_paused
from tokenwatch.inputs.prometheus.api import (
    MAX_RANGE_POINTS,
    PromApiError,
    PrometheusApi,
    counted_before,
    counters_start,
)
from tokenwatch.inputs.prometheus.fleet_figures import RackFigures
from tokenwatch.inputs.prometheus.fleet_recorded import FigureQueries
from tokenwatch.inputs.prometheus.fleet_settings import FleetSettings
from tokenwatch.inputs.prometheus.server_timing import ServerTiming
from tokenwatch.sources.fleet_queries import FleetPreset

# The backfill's steps: more than 200 points (one per column of a 200-column terminal's timeline, whose chart
# is 192 columns) however long the run, since rounding the step up to the interval can halve them; a run of
# fewer than 400 intervals gets every interval. The server's time grows with the steps (its joins for the
# running nodes' figures are most of a 64-rack backfill): an 80-minute run is 320 steps of 15 s, not 960 of 5.
HISTORY_POINTS = 400


class FleetHistory:
    """The history half of the fleet collector: what it reads of the collector (its settings, the
    server's timing, its query making) is declared here, set and defined there."""

    name: str
    settings: FleetSettings
    preset: FleetPreset
    timing: ServerTiming
    figure_queries: FigureQueries
    board: RackFigures
    fleet_meta: dict[str, object]
    _said: dict[str, str]
    _last_instant: float

    def _q(self, template: str, racks: frozenset[str] | None = None) -> str:
        raise NotImplementedError

    def _settle_s(self) -> float:
        raise NotImplementedError

    def _step(self, start: float, end: float) -> float:
        """A step that fits the screen: the poll interval, or coarser for a long run."""
        interval = self.settings.interval_s
        wanted = max(interval, (end - start) / HISTORY_POINTS, (end - start) / MAX_RANGE_POINTS)
        return math.ceil(wanted / interval) * interval  # on the live grid, so the two agree

    async def run_start(self, watch_wall: float) -> float | None:
        """When the run began (Unix time): the first step in the last ``lookback`` at which the fleet's
        generated-token counters grew; None with no growth or no answer. Not asked when the fleet could
        not be listed: the server that could not say which nodes there are cannot say when they began,
        and its failure is said at once rather than after another timeout. Where the counters count from
        the run's start and had counted already at the history's first point, the run is older than
        the history (the server's retention, or the lookback): the run's start records it, and the
        summary says what it covers."""
        s = self.settings
        if "discover" in self._said:
            return None
        tokens = self._q(self.preset.fleet_tokens)
        try:
            lookback = s.lookback_s
            if self.timing.retention_s is not None:  # the server keeps less than the lookback asks
                lookback = min(lookback, self.timing.retention_s)
            start = await counters_start(
                s.url, s.timeout_s, tokens, watch_wall, lookback, s.interval_s, s.access
            )
            step = max(s.interval_s, lookback / MAX_RANGE_POINTS)
            if start is not None and self.preset.since_run_start and start <= watch_wall - lookback + step:
                older = await counted_before(s.url, s.timeout_s, tokens, start, s.interval_s, s.access)
                self.fleet_meta["run_older_than_history"] = older
            return start
        except PromApiError as exc:
            self._said["history"] = f"prometheus fleet: no history: {exc}"
            return None

    async def history(self, start_wall: float, end_wall: float) -> list[Event]:
        """The rack figures from ``start_wall`` to ``end_wall`` on the live grid (Unix times as ``t``),
        one batch per step: what a watch from the start saw at those instants.

        The last step is the last instant a live round would already have read at ``end_wall`` (its
        settle time and the engine's latency offset after it), never a newer one: VictoriaMetrics'
        ``query_range`` answers a point closer than its ``-search.latencyOffset`` to now with the point
        before it (``-search.maxStepForPointsAdjustment``), so a backfill that ran up to now ended on a
        copy of the instant before, where the live round that reads the instant later reads its own."""
        s = self.settings
        step = self._step(start_wall, end_wall)
        first = math.ceil(start_wall / step) * step
        last = math.floor((end_wall - self._settle_s()) / s.interval_s) * s.interval_s
        if last < first:
            return []
        async with PrometheusApi(s.url, s.timeout_s * 4, s.access) as api:
            answered, failed = await self.figure_queries.range_answers(api, first, last, step)
        events: list[Event] = [
            Notice(
                end_wall, "warning", f"prometheus fleet: no history of {field!r}: {error}", source=self.name
            )
            for field, error in failed.items()
        ]
        with gc_paused():
            events += self.board.from_history(answered, first, step)
        self._last_instant = last
        problem = self._said.pop("history", None)
        if problem is not None:
            events.append(Notice(end_wall, "warning", problem, source=self.name))
        return events
