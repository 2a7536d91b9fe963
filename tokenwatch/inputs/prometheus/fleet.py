"""Watches a fleet of racks through the Prometheus server that already scrapes it.

Every interval the server aggregates each rack for us (:mod:`tokenwatch.sources.fleet_queries`: sums,
counts, min/max, the median and the slowest node per rack) and one :class:`RackFiguresBatch` carries
the answers, a dozen numbers per rack, instead of every node's and GPU's series. The nodes themselves
(per-node counters, per-GPU telemetry, latency buckets, through :class:`PrometheusQueryCollector`'s
event making) are fetched only for the racks on screen (:class:`FleetFocus`, which the dashboard sets
when a rack is opened) and, for alerts, for the whole fleet every ``detail_interval``.

Instant queries are evaluated on a grid of the interval in Unix time (``time=k * interval``, asked a
moment after, once the scrapes before it are in), the same instants ``query_range`` steps on: a watch
that attaches mid-run fills the timeline from the run's start (:meth:`history`) with exactly the figures
a watch from the start saw live. An unreachable server or a failing query is a :class:`Notice`, once
per problem; a rack whose series are gone (its exporter died) is marked down while the others go on.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
from collections.abc import Callable, Mapping

import numpy as np

from tokenwatch.base.clock import Clock, MonotonicClock
from tokenwatch.base.events import Emit, Event, Notice, RackFiguresBatch
from tokenwatch.base.formatting import natural_key
from tokenwatch.base.gc_pause import gc_paused
from tokenwatch.inputs.discovery import Discovered
from tokenwatch.inputs.prometheus.alerting_pass import AlertingPassSchedule, racks_left_unread
from tokenwatch.inputs.prometheus.api import PromApiError, PrometheusApi, Sample
from tokenwatch.inputs.prometheus.fleet_figures import RackFigures, places_meta, rack_places_of
from tokenwatch.inputs.prometheus.fleet_history import FleetHistory
from tokenwatch.inputs.prometheus.fleet_node_queries import (
    FLEET_NODE_LABEL,
    fleet_node_queries,
    fleet_node_reader,
    fleet_query,
)
from tokenwatch.inputs.prometheus.fleet_recorded import FigureQueries
from tokenwatch.inputs.prometheus.fleet_settings import FleetFocus, FleetSettings
from tokenwatch.inputs.prometheus.gpu_answers import GpuColumn
from tokenwatch.inputs.prometheus.node_states import NodeStates
from tokenwatch.inputs.prometheus.query import PrometheusQueryCollector
from tokenwatch.inputs.prometheus.rack_answers import RackAnswerReader, RackColumn
from tokenwatch.inputs.prometheus.scrape_times import (
    SCRAPED_AT,
    at_scrape_times,
    scrape_times,
)
from tokenwatch.inputs.prometheus.server_timing import ServerTiming, read_server_timing
from tokenwatch.sources.fleet_queries import (
    FLEET_PRESETS,
    FleetPreset,
    rack_queries,
)
from tokenwatch.sources.fleet_rules import RuleSet

# Where the fleet's settings, history and node queries moved to, still importable from here.
__all__ = [
    "BACKOFF_CAP_S",
    "FLEET_NODE_LABEL",
    "FleetFocus",
    "FleetSettings",
    "PrometheusFleetCollector",
]

# A server that answers nothing is asked again after a growing pause (1, 3, 7 ... intervals after the
# failed round ends), at most this long: a watch left running against a dead server does not hammer it,
# and one that comes back is seen within a minute.
BACKOFF_CAP_S = 60.0
# The most a round's node readings are stamped before the moment they arrived (s): a recording's reader
# takes time going back by more than 5 s for a span written twice, and leaves it out.
MAX_READING_LAG_S = 4.0


class PrometheusFleetCollector(FleetHistory):
    name = "prometheus-fleet"

    def __init__(
        self,
        settings: FleetSettings,
        *,
        now: Callable[[], float],
        clock: Clock | None = None,
        focus: FleetFocus | None = None,
        polls: int | None = None,
    ) -> None:
        """``now()`` gives run seconds for the events; ``polls`` stops after that many rounds."""
        self.settings = settings
        self.preset: FleetPreset = FLEET_PRESETS[settings.preset]
        self.now = now
        self.clock = clock or MonotonicClock()
        self.focus = focus or FleetFocus()
        self.polls = polls
        self.templates = rack_queries(self.preset)
        # The rack figures: the recording rules' series where the server holds them, else these raw
        # queries (the rules are made from the same RuleSet, so the two are one formula).
        self.figure_queries = FigureQueries(
            RuleSet(settings.preset, settings.rack_label, settings.node_label, settings.window_s)
        )
        self._figures_note: Notice | None = None  # which queries make the rack figures, said at the start
        self.board = RackFigures(settings.rack_label, settings.node_label)
        self.rack_reader = RackAnswerReader(settings.rack_label, settings.node_label)
        self.nodes: tuple[str, ...] = ()
        self.node_reader: PrometheusQueryCollector | None = None
        self.node_states: NodeStates | None = None
        self.timing = ServerTiming(None, None, settings.latency_offset_s or 0.0)
        self.fleet_meta: dict[str, object] = {}  # meta["fleet"] of the run's start
        self._failing: set[str] = set()  # the errors queries fail with now (each said once)
        self._said: dict[str, str] = {}  # problems found before the run started, said when it starts
        self._last_instant = -math.inf  # Unix time of the last grid instant read (history or live)
        self._failed_rounds = 0  # rounds in a row in which no query was answered
        self.alerting_pass = AlertingPassSchedule(settings.interval_s, settings.detail_interval_s)
        self._unanswered: set[str] = set()  # the fields the last round's queries failed for
        self._rack_of_node = np.array([], str)  # each node index's rack (listed by discover)
        self._wall_at_run_zero: float | None = None  # Unix time at run time 0, for the readings' times

    # ------------------------------------------------------------ queries
    def _q(self, template: str, racks: frozenset[str] | None = None) -> str:
        return fleet_query(self.settings, template, racks)

    async def _ask_all(
        self, api: PrometheusApi, queries: Mapping[str, str], at: float | None, figures: Mapping[str, str]
    ) -> tuple[dict[str, list[Sample]], dict[str, GpuColumn], dict[str, RackColumn], list[Event]]:
        """``queries`` and the rack ``figures`` at once; the answers by field (the nodes' GPU fields,
        ``node <field>``, read into columns by the node reader; the figures into columns by the rack
        reader), and a notice when what fails changes (an unreachable server fails every query: one
        notice, not one per query)."""
        columns: dict[str, GpuColumn] = {}
        asked = api.read_all(figures, at, self.rack_reader.read)
        if self.node_reader is not None:
            (results, columns, errors), (rack_columns, figure_errors) = await asyncio.gather(
                self.node_reader.ask(api, queries, at, prefix="node "), asked
            )
        else:
            (results, errors), (rack_columns, figure_errors) = await asyncio.gather(
                api.query_all(queries, at), asked
            )
        errors = {**figure_errors, **errors}
        answered = bool(results or columns or rack_columns)
        self._failed_rounds = self._failed_rounds + 1 if errors and not answered else 0
        self._unanswered = set(errors)
        failed: dict[str, list[str]] = {}  # error -> the fields it hit
        for field, error in errors.items():
            failed.setdefault(str(error), []).append(field)
        return results, columns, rack_columns, self._problems(failed)

    def _problems(self, failed: Mapping[str, list[str]]) -> list[Event]:
        out: list[Event] = []
        for error, fields in failed.items():
            if error not in self._failing:
                shown = ", ".join(fields[:3]) + (f" and {len(fields) - 3} more" if len(fields) > 3 else "")
                message = f"prometheus fleet: {shown} failed: {error}"
                out.append(Notice(self.now(), "warning", message, source=self.name))
        if self._failing and not failed:
            out.append(
                Notice(self.now(), "info", "prometheus fleet: every query answers again", source=self.name)
            )
        self._failing = set(failed)
        return out

    @property
    def racks(self) -> list[str]:
        """Known racks: discovered, then any that appear."""
        return self.board.racks

    @property
    def rack_nodes(self) -> dict[str, int]:
        """The nodes each rack had when last listed."""
        return self.board.rack_nodes

    def figures(self, t: float, results: Mapping[str, RackColumn | list[Sample]]) -> RackFiguresBatch | None:
        """One batch from one instant's answers (see :meth:`RackFigures.figures`)."""
        return self.board.figures(t, results)

    # ---------------------------------------------------------- discovery
    async def discover(self) -> Discovered | None:
        """The fleet's racks and nodes (``group by (rack, node)`` of the per-node health series), nodes
        named ``rack/node`` and grouped by rack in natural order; None if the server cannot say."""
        s = self.settings
        ask = {
            "nodes": self._q(f"group by ($rack, $node) ({self.preset.up})"),
            "jobs": self._q(f"group by (job) ({self.preset.up})"),
            # Where each rack stands (its series' site and row labels), for the board's groups.
            "places": self._q(f"group by ($rack, {s.site_label}, {s.row_label}) ({self.preset.up})"),
        }
        if s.gpus_per_node is None:
            ask["gpus"] = self._q(f"max({self.preset.gpus})")
        ask["recorded"] = self.figure_queries.probe()
        async with PrometheusApi(s.url, s.timeout_s, s.access) as api:
            answers = await asyncio.gather(*(api.query(q) for q in ask.values()), return_exceptions=True)
            jobs = answers[1] if isinstance(answers[1], list) else []
            if not isinstance(answers[0], BaseException):  # a server that cannot list is not asked more
                self.timing = await read_server_timing(
                    api, {labels.get("job", "") for labels, _ in jobs}, s.latency_offset_s
                )
        named = dict(zip(ask, answers, strict=True))
        found, places, recorded = named["nodes"], named["places"], named["recorded"]
        gpus_answer = named.get("gpus")
        if isinstance(found, BaseException):
            self._said["discover"] = f"prometheus fleet: cannot list the fleet's nodes: {found}"
            return None
        if not found:  # the server answers, but holds none of the series the fleet is made of
            self._said["discover"] = (
                f"prometheus fleet: {s.url} holds no series for {ask['nodes']} "
                "(a scrape job not configured, other label names, or not scraped yet)"
            )
            return None
        by_rack: dict[str, set[str]] = {}
        for labels, _ in found:
            rack, node = labels.get(s.rack_label), labels.get(s.node_label)
            if rack and node:
                by_rack.setdefault(rack, set()).add(node)
        self.board.racks[:] = sorted(by_rack, key=natural_key)
        nodes: list[str] = []
        layout = []
        for rack in self.racks:
            members = sorted(by_rack[rack], key=natural_key)
            layout.append([rack, len(nodes), len(members)])
            nodes += [f"{rack}/{n}" for n in members]
            self.rack_nodes[rack] = len(members)
        gpus = s.gpus_per_node
        if gpus is None and isinstance(gpus_answer, list) and gpus_answer:
            value = gpus_answer[0][1]
            gpus = int(value) if math.isfinite(value) and 1 <= value <= 1024 else None
        self.nodes = tuple(nodes)
        self._rack_of_node = np.array([rack for rack in self.racks for _ in range(self.rack_nodes[rack])])
        self.node_reader = self._node_reader(gpus or 1)
        probe = recorded if isinstance(recorded, list) else None
        self._figures_note = self.figure_queries.found(self.now(), probe, self.racks)
        if self.preset.node_status:
            self.node_states = NodeStates(self.nodes, FLEET_NODE_LABEL)
        self.fleet_meta = {
            "source": "prometheus",
            "preset": s.preset,
            "rack_label": s.rack_label,
            "racks": layout,
            "rack_figures": self.figure_queries.kind,  # recorded (the recording rules' series) | raw
            # The server's freshness, and the silence after which a node read through it is stale.
            **self.timing.meta(),
            "node_stale_after_s": self.timing.node_stale_after_s(s.interval_s, s.detail_interval_s),
        }
        meta: dict[str, object] = {
            # One rack name per node, as the fleet board groups a run (core/fleet/rack_groups.py).
            "racks": self._rack_of_node.tolist(),
            **places_meta(places, s.rack_label, (s.site_label, s.row_label), self.rack_nodes),
            # The same dict the run's start carries: what run_start learns later goes in too.
            "fleet": self.fleet_meta,
        }
        return Discovered(self.nodes, gpus, meta)

    def _node_reader(self, gpus_per_node: int) -> PrometheusQueryCollector:
        return fleet_node_reader(self.settings, self.preset, self.nodes, gpus_per_node, self.now, self.clock)

    def _node_queries(self, racks: frozenset[str] | None) -> dict[str, str]:
        assert self.node_reader is not None
        return fleet_node_queries(self.settings, self.preset, self.node_reader.queries, racks)

    # ----------------------------------------------------------------- live
    async def run(self, emit: Emit) -> None:
        s = self.settings
        problem = self._said.pop("discover", None)
        if problem is not None:
            await emit(Notice(self.now(), "warning", problem, source=self.name))
        if self._figures_note is not None:
            await emit(self._figures_note)
            self._figures_note = None
        done = 0
        async with PrometheusApi(s.url, s.timeout_s, s.access) as api:
            while self.polls is None or done < self.polls:
                instant = self._next_instant()
                await self.clock.sleep(instant + self._settle_s() - self.clock.wall())
                for event in await self.poll(api, instant):
                    await emit(event)
                if self._failed_rounds:
                    # A fresh pool for the next round: its token file is read again (a rotated token), its
                    # connections made anew.
                    await api.aclose()
                done += 1

    def _next_instant(self) -> float:
        """The next grid instant after the last one read, and never one already past by a whole
        interval (a slow round skips instants rather than falling behind); after rounds that got no
        answer at all, one at least the backoff's pause away."""
        interval = self.settings.interval_s
        wall = self.clock.wall()
        latest = math.floor((wall - self._settle_s()) / interval) * interval
        instant = max(self._last_instant + interval, latest)
        if self._failed_rounds > 1:
            pause = min(BACKOFF_CAP_S, interval * (2 ** min(self._failed_rounds - 1, 16) - 1))
            instant = max(instant, math.ceil((wall + pause) / interval) * interval)
        return instant

    def _settle_s(self) -> float:
        """How long after a grid instant it is asked: the scrapes stamped before it are in, and the
        engine no longer hides them (its latency offset)."""
        return self.settings.settle_s + self.timing.latency_offset_s

    async def poll(self, api: PrometheusApi, instant: float) -> list[Event]:
        """One round at the grid instant ``instant`` (Unix time): the rack figures, then the nodes of
        the racks on screen, or of the whole fleet when the alerting pass is due."""
        self._last_instant = instant
        figures = self.figure_queries
        queries = figures.queries
        detail = self.alerting_pass.due(instant)
        # The racks on screen, and those an answered pass left nodes of unread, when due again.
        focus = self.focus.racks | (frozenset() if detail else self.alerting_pass.unread_due(instant))
        node_queries: dict[str, str] = {}
        if self.node_reader is not None and (detail or focus):
            node_queries = self._node_queries(None if detail else focus)
        ask = {f"node {f}": q for f, q in node_queries.items()}
        probe = detail and not figures.using_recorded and bool(self.racks)
        if probe:  # rules loaded since: found at the next alerting pass
            ask["recorded probe"] = figures.probe()
        results, columns, answered, notices = await self._ask_all(api, ask, instant, queries)
        nodes_answered = not any(f.startswith("node ") for f in self._unanswered)
        if detail and node_queries:
            self.alerting_pass.asked(instant, nodes_answered)
        t = self.now()
        events: list[Event] = []
        counted = answered.get("nodes_total")
        if figures.using_recorded and counted is not None and not len(counted.values):
            events.append(figures.lost(t))  # the rules unloaded: this instant asked again, raw
            answered, _ = await api.read_all(figures.raw, instant, self.rack_reader.read)
        elif probe and "recorded probe" in results:
            note = figures.found(t, results["recorded probe"], self.racks)
            events += [note] if note is not None else []
        known = len(self.racks)
        batch = self.figures(t, answered)
        if (impossible := self.board.newly_impossible()) is not None:
            events.append(Notice(t, "warning", f"prometheus fleet: {impossible}", source=self.name))
        if batch is not None:
            if len(self.racks) > known:  # racks that appeared since the start: where they stand
                batch = await self._placed(api, batch, self.racks[known:], instant)
            events.append(batch)
        if node_queries and self.node_reader is not None:
            reader = self.node_reader
            node_results = {f[5:]: v for f, v in results.items() if f.startswith("node ")}
            gpu_columns = {f[5:]: v for f, v in columns.items()}
            read_t = self._reading_time(instant)
            if self.node_states is not None:
                events += self.node_states.events(read_t, node_results.get("status", []))
            with gc_paused():  # ~50,000 samples in an alerting pass
                read = reader.node_events(read_t, node_results, gpu_columns)
            scraped = scrape_times(node_results.get(SCRAPED_AT, ()), reader.node_of, reader.node_label)
            events += at_scrape_times(read, scraped, lambda stamp: self._run_time(stamp, 0.0))
            # Which racks it left unread, after an answered pass (a failed one is asked whole again) or
            # a round that asked racks a pass left unread (not every round of a rack on screen).
            if nodes_answered if detail else bool(self.alerting_pass.unread & focus):
                asked = None if detail else focus
                unread = racks_left_unread(read, self._rack_of_node, asked)
                self.alerting_pass.read(instant, asked, unread)
        return events + notices

    async def _placed(
        self, api: PrometheusApi, batch: RackFiguresBatch, racks: list[str], instant: float
    ) -> RackFiguresBatch:
        """``batch`` saying where ``racks`` (new since the start) stand: their series' site and row
        labels at ``instant``. The run's start says where the racks found then stand; without this a
        rack whose exporter came later stood in "(none)" on a grouped board, labels or not. As it
        was where the server cannot say, or the racks carry neither label."""
        s = self.settings
        ask = self._q(f"group by ($rack, {s.site_label}, {s.row_label}) ({self.preset.up})", frozenset(racks))
        try:
            answer = await api.query(ask, instant)
        except PromApiError:
            return batch
        found = rack_places_of(answer, s.rack_label, (s.site_label, s.row_label), set(racks))
        places = tuple((rack, *found[rack]) for rack in racks if any(found.get(rack, ())))
        return dataclasses.replace(batch, places=places) if places else batch

    def _reading_time(self, instant: float) -> float:
        """The run time of a round's node readings: when the round was due (its instant, plus the
        settle time every round waits), not when its answers arrived. The core forms a node's rate
        from two readings' counters over their times; stamped on arrival, a slow round followed by a
        prompt one laid two readings 0.65 s apart that measure instants 2 s apart, and the drill-down's
        nodes summed to 3x the rack's figure. A constant offset from the instants keeps every span
        theirs (the clocks' offset is read once: read at every round, the microseconds between the
        two readings would move each rate in its fifth digit). Never later than now, nor more than
        :data:`MAX_READING_LAG_S` before it."""
        return self._run_time(instant, self._settle_s())

    def _run_time(self, unix: float, after_s: float) -> float:
        """The run time ``after_s`` after the Unix time ``unix`` (also a counter's scrape time), bounded."""
        now = self.now()
        if self._wall_at_run_zero is None:
            self._wall_at_run_zero = self.clock.wall() - now
        # Unix seconds in a float are 2.4e-7 s apart: the whole seconds are taken apart before the
        # fraction, so two readings' span is the instants' to the last digit.
        whole = math.floor(self._wall_at_run_zero)
        due = (unix - whole) + (after_s - (self._wall_at_run_zero - whole))
        # Nor before the run's start: the first round's instant is the grid's last before the watch began,
        # and a reading stamped before the run began is no reading of it (the core drops it, and the
        # first alerting pass would leave every node unread until it was next asked).
        return min(max(due, now - MAX_READING_LAG_S, 0.0), now)
