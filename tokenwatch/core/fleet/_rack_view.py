"""One rack of a fleet seen as a run of its own: the state a single-rack run of those nodes would have.

A rack's nodes are consecutive in the run's node order (:mod:`tokenwatch.core.fleet.rack_groups`), so every
per-node array of the fleet's :class:`RackState` gives the rack's as a numpy slice, a view that copies
nothing. The few things that are not per node are made for the rack: its latency histograms (the sum of
its nodes'), its largest latencies and energy (kept per node for this), its alerts (its nodes' and the
run's notices; the fleet's verdict and SLA alerts are the fleet's, not the rack's), its forecast over
time (the fleet memo's row), its share of the run's sample count. The snapshot builder then makes the
rack's snapshot exactly as it makes a rack's: the dashboard of rack N is the dashboard of a run of rack
N's nodes.

The view shares storage with the fleet's state: it is made, read and dropped within one call (a snapshot
or a forecast), while the state stands still, and nothing is ever written through it. One thing differs
from a run of the rack alone: the straggler rule ran over the whole fleet, so a rack's stragglers are
nodes slow against the fleet's median node.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from tokenwatch.core._batch_layout import BatchLayout
from tokenwatch.core._ring import DownsampledSeries, RecentRing
from tokenwatch.core._run_info import RunInfo
from tokenwatch.core._state import BucketMemo, RackState
from tokenwatch.core.alerts import Alert, AlertLog
from tokenwatch.core.histogram import LogHistogram
from tokenwatch.core.verdict import HISTORY_COLUMNS, VerdictState

# Alerts about the whole fleet, not one of its racks: the fleet's projected verdict and its margins, and
# the SLA judged on the fleet's latency histogram. A rack's screen judges its own.
_FLEET_KINDS = ("verdict", "verdict_invalid", "margin_", "sla_")


def rack_state(state: RackState, r: int, *, for_forecast: bool = False) -> RackState:
    """Rack ``r`` of the fleet (an index into ``state.fleet.groups``) as a run of its own.
    ``for_forecast`` leaves out what neither a forecast nor a node's history reads (alerts, the rack's
    merged latency histograms and maxima); the fleet's verdict tick uses the lighter :func:`forecast_view`."""
    memo = state.fleet
    if memo is None:
        raise ValueError("a run of one rack has no racks to look into")
    groups = memo.groups
    rows = groups.nodes(r)
    n = len(state.run.nodes)
    names = state.run.nodes[rows]
    made: dict[str, Any] = {
        "run": _rack_run(state.run, groups.names[r], rows, n),
        "index": {name: i for i, name in enumerate(names)},
        "config": state.config,
        "skips": state.skips,
        "alerts": AlertLog(1) if for_forecast else _rack_alerts(state.alerts, frozenset(names)),
        "raw_counters": state.raw_counters[:, rows],
        "counter_offsets": state.counter_offsets[:, rows],
        "counters_at_first": state.counters_at_first[:, rows],
        "rack_latency": {
            m: LogHistogram() if for_forecast else _merged(hists[rows]) for m, hists in state.latency.items()
        },
        "latency_max": {
            m: math.nan if for_forecast else _nanmax(v[rows]) for m, v in state.node_latency_max.items()
        },
        "layout": BatchLayout(len(names), state.run.gpus_per_node),
        "bucket_memo": BucketMemo(),
        "verdict": _rack_verdict(state.verdict, memo.history.columns(r), rows, n),
        "energy_j": float(state.energy.node_integrated_j[rows].sum()),
        "fleet": None,
        "fleet_figures": None,
    }
    values = {
        f.name: made[f.name] if f.name in made else rows_of(getattr(state, f.name), rows, n)
        for f in dataclasses.fields(RackState)
    }
    return RackState(**values)


# What a forecast reads of the state (core/verdict_*.py, core/final_figure.py): its view of one rack holds
# these alone. Every other field is left unset, so a forecast that came to read one would fail loudly
# (AttributeError) in the fleet's tests rather than read the whole fleet's rows as the rack's.
_FORECAST_FIELDS = frozenset(
    {
        "config",
        "run",
        "index",
        "alerts",
        "skips",
        "tokens",
        "samples",
        "prompt_tokens",
        "t_first",
        "counters_at_first",  # measured_means: the counters' growth since the first reading
        "t_read",  # rates over the readings that bound their window
        "recent_read_t",
        "t_last_change",
        "change_gap_s",  # the timing of each node's end
        "last_seen",
        "explicit_state",
        "vouched",  # effective_state: a supervised node's silence is idle
        "engine",  # effective_state: an engine with nothing running or waiting is idle
        "state_reason",
        "state_since",
        "cadence",
        "latency",
        "recent_tokens",
        "history_tokens",
        "verdict",
        "fleet",
        "fleet_figures",
        "now",
        "ended",
        "end_reason",
        "ticks_sampled",
        "last_sample_t",
        "version",
    }
)


def forecast_view(state: RackState, r: int, plan: ViewPlan | None = None) -> RackState:
    """Rack ``r`` as a run of its own, holding only what its MLPerf forecast reads (see
    ``_FORECAST_FIELDS``): a fleet's verdict tick makes one per rack, 64 of them every 10 s, and slicing
    every series of the state (GPU telemetry, logs, causes) for each was most of that tick. ``plan``: the
    state's :func:`view_plan`, where the caller makes several views of it (made here otherwise)."""
    memo = state.fleet
    if memo is None:
        raise ValueError("a run of one rack has no racks to look into")
    if plan is None or plan.version != state.version:
        plan = view_plan(state)
    rows = memo.groups.nodes(r)
    n = len(state.run.nodes)
    names = state.run.nodes[rows]
    made: dict[str, Any] = {
        "run": _rack_run(state.run, memo.groups.names[r], rows, n),
        "index": {name: i for i, name in enumerate(names)},
        "alerts": AlertLog(1),
        "verdict": plan.verdict(rows, memo.history.columns(r)),
        "fleet": None,
        "fleet_figures": None,
        "counters_at_first": state.counters_at_first[:, rows],  # (2, nodes): nodes on the second axis
        # Settings, shared as they are: walking them for per-node rows was a fifth of a view's cost.
        "config": state.config,
    }
    for name, rows_in in plan.fields:
        made[name] = rows_in(rows)
    view: RackState = _made_without_init(RackState, made.items())
    return view


# Reads one rack's rows (a slice of the run's nodes) out of a value of the state: see rows_of.
RowReader = Callable[[slice], Any]


@dataclass(frozen=True, slots=True)
class ViewPlan:
    """How each field of a :func:`forecast_view` is read out of the state at one state version: the walk
    of its dicts and dataclasses for the arrays indexed by node, done once for the fleet's 64 racks (it
    was most of a view's cost). A rack's view reads the same values through it as :func:`rows_of`."""

    version: int
    fields: tuple[tuple[str, RowReader], ...]
    verdict_fields: tuple[tuple[str, RowReader], ...]
    joined_memo: Any

    def verdict(self, rows: slice, history: DownsampledSeries) -> VerdictState:
        """The rack's verdict state (see :func:`_rack_verdict`)."""
        made = _verdict_made(history, self.joined_memo, rows)
        for name, rows_in in self.verdict_fields:
            made[name] = rows_in(rows)
        out: VerdictState = _made_without_init(VerdictState, made.items())
        return out


def view_plan(state: RackState) -> ViewPlan:
    """The state's :class:`ViewPlan` at its current version: valid until the state changes."""
    n = len(state.run.nodes)
    verdict = state.verdict
    return ViewPlan(
        state.version,
        tuple(
            (name, _row_reader(getattr(state, name), n))
            for name in _FORECAST_FIELDS
            if name not in _VIEW_MADE
        ),
        tuple(
            (
                name,
                _row_reader(getattr(verdict, name), n)
                if name not in _VERDICT_WHOLE_RUN
                else _as_is(getattr(verdict, name)),
            )
            for name in _field_names(VerdictState) or ()
            if name not in _VERDICT_MADE
        ),
        verdict.joined_memo,
    )


# The fields forecast_view makes for the rack itself rather than reading rows of the fleet's.
_VIEW_MADE = frozenset(
    {"run", "index", "alerts", "verdict", "fleet", "fleet_figures", "counters_at_first", "config"}
)


def _row_reader(value: Any, n: int) -> RowReader:
    """What :func:`rows_of` does with ``value`` for any ``rows``, the walk of its structure done now."""
    if isinstance(value, np.ndarray):
        return value.__getitem__ if value.ndim and value.shape[0] == n else _as_is(value)
    if isinstance(value, list):
        return value.__getitem__ if len(value) == n else _as_is(value)
    if isinstance(value, RecentRing | DownsampledSeries):
        shape = (value.capacity, *value.value_shape) if isinstance(value, RecentRing) else value.sums.shape
        return value.columns if len(shape) > 1 and shape[1] == n else _as_is(value)
    if isinstance(value, dict):
        items = tuple((key, _row_reader(item, n)) for key, item in value.items())
        return lambda rows: {key: rows_in(rows) for key, rows_in in items}
    cls = type(value)
    names = _field_names(cls)
    if names is None:
        return _as_is(value)
    parts = tuple((name, _row_reader(getattr(value, name), n)) for name in names)
    if hasattr(cls, "__post_init__"):
        return lambda rows: dataclasses.replace(value, **{name: rows_in(rows) for name, rows_in in parts})
    return lambda rows: _made_without_init(cls, ((name, rows_in(rows)) for name, rows_in in parts))


def _as_is(value: Any) -> RowReader:
    """A reader of a value that has no rows: the value as it is, whatever the rows."""
    return lambda _rows: value


def rows_of(value: Any, rows: slice, n: int) -> Any:
    """``value``'s rows ``rows`` where it is indexed by node (its first axis has the run's ``n`` nodes),
    through lists, dicts, series and the state's small dataclasses of per-node arrays; anything else
    (a setting, a time, a flag) as it is."""
    if isinstance(value, np.ndarray):
        return value[rows] if value.ndim and value.shape[0] == n else value
    if isinstance(value, list):
        return value[rows] if len(value) == n else value
    if isinstance(value, RecentRing | DownsampledSeries):
        # A ring's shape without its values: reading them would make storage a ring may not have yet.
        shape = (value.capacity, *value.value_shape) if isinstance(value, RecentRing) else value.sums.shape
        return value.columns(rows) if len(shape) > 1 and shape[1] == n else value
    if isinstance(value, dict):
        return {key: rows_of(item, rows, n) for key, item in value.items()}
    cls = type(value)
    names = _field_names(cls)
    if names is None:
        return value
    if hasattr(cls, "__post_init__"):
        return dataclasses.replace(value, **{name: rows_of(getattr(value, name), rows, n) for name in names})
    return _made_without_init(cls, ((name, rows_of(getattr(value, name), rows, n)) for name in names))


def _made_without_init(cls: type, fields: Iterable[tuple[str, Any]]) -> Any:
    """An instance of ``cls`` holding ``fields``, made field by field, as ``dataclasses.replace`` would
    without a __post_init__ to run: a fleet's verdict tick makes ~90 of these per rack view, and
    replace's checks were a third of their cost."""
    out: Any = object.__new__(cls)
    for name, value in fields:
        object.__setattr__(out, name, value)
    return out


_FIELD_NAMES: dict[type, tuple[str, ...] | None] = {}


def _field_names(cls: type) -> tuple[str, ...] | None:
    """A dataclass's field names (None for any other type), looked up once a type: a fleet's verdict
    tick makes a view per rack, each walking the state's dataclasses, and ``dataclasses.fields`` on
    every one was a third of a view's cost."""
    if cls not in _FIELD_NAMES:
        _FIELD_NAMES[cls] = (
            tuple(f.name for f in dataclasses.fields(cls)) if dataclasses.is_dataclass(cls) else None
        )
    return _FIELD_NAMES[cls]


def _rack_run(run: RunInfo, rack: str, rows: slice, n: int) -> RunInfo:
    nodes = run.nodes[rows]
    meta = {key: value for key, value in run.meta.items() if key != "racks"}
    meta.update(nodes_per_rack=len(nodes), rack=rack, fleet=run.name)
    # The run's sample count is split evenly over its nodes (as the core's progress figures split it).
    total = round(run.total_samples * len(nodes) / n) if run.total_samples else run.total_samples
    return dataclasses.replace(run, name=f"{run.name} · {rack}", nodes=nodes, total_samples=total, meta=meta)


def _rack_alerts(log: AlertLog, nodes: frozenset[str]) -> AlertLog:
    def mine(alert: Alert) -> bool:
        if alert.node is not None:
            return alert.node in nodes
        return not alert.kind.startswith(_FLEET_KINDS)

    out = AlertLog(log.log.maxlen or 1)
    out.log.extend(a for a in log.log if mine(a))
    out.active = {key: a for key, a in log.active.items() if mine(a)}
    out.total = len(out.log)
    return out


def _merged(hists: list[LogHistogram]) -> LogHistogram:
    out = LogHistogram()
    for hist in hists:
        out.merge(hist)
    return out


def _nanmax(values: np.ndarray) -> float:
    finite = values[np.isfinite(values)]
    return float(finite.max()) if finite.size else math.nan


# The verdict state's fields that are not per node: the rack's view shares them as they are (``shared``
# interns the settings and checks nodes share; walking it for rows was most of a view's cost).
_VERDICT_WHOLE_RUN = frozenset(
    {"benchmark", "benchmark_named", "limit_origin", "interval_s", "next_due_s", "shared", "last_valid"}
)
# ...and those the view makes afresh (below).
_VERDICT_MADE = frozenset(
    {
        "history",
        "margin_alerted",
        "settings_alerted",
        "forecast_memo",
        "projection_memo",
        "progress_memo",
        "loadgen_memo",
        "joined_memo",  # its series are (points, nodes): the rack's are columns, made below
    }
)


def _rack_verdict(verdict: VerdictState, history: DownsampledSeries, rows: slice, n: int) -> VerdictState:
    assert history.sums.shape[1:] == (len(HISTORY_COLUMNS),)
    # The fleet's memoised forecast is keyed by run time and state version, which the view shares: the
    # rack's own forecast must be made afresh, never read from it.
    made = _verdict_made(history, verdict.joined_memo, rows)

    def value_of(name: str) -> Any:
        if name in _VERDICT_MADE:
            return made[name]
        value = getattr(verdict, name)
        return value if name in _VERDICT_WHOLE_RUN else rows_of(value, rows, n)

    # Made field by field (``dataclasses.replace`` of its two dozen fields was half of this view's cost)
    out: VerdictState = _made_without_init(
        VerdictState, ((name, value_of(name)) for name in _field_names(VerdictState) or ())
    )
    return out


def _verdict_made(history: DownsampledSeries, joined_memo: Any, rows: slice) -> dict[str, Any]:
    """The fields of a rack's verdict state made for the rack (``_VERDICT_MADE``)."""
    return {
        "history": history,
        "margin_alerted": set(),
        "settings_alerted": set(),
        "forecast_memo": None,
        "projection_memo": None,
        "progress_memo": None,
        "loadgen_memo": None,
        "joined_memo": joined_memo.columns(rows),
    }
