"""The fleet table of a run that knows every node: its nodes grouped by rack, one row per rack.

Per rack (:mod:`tokenwatch.core.fleet.rack_groups` says which nodes): tokens/s over the window and per GPU,
the spread of its running nodes' measured means, nodes up of all, power, tokens per joule, its projected
MLPerf verdict and figure, and its slowest running node against the rack's median with that node's cause
hint. The figures are the snapshot's node figures summed the way the rack aggregate sums them, in one
numpy pass over a (racks x nodes-per-rack) index, so a 64-rack table costs a fraction of a millisecond.

The projected verdict is each rack's own forecast (the forecast a run of that rack alone would make,
:func:`tokenwatch.core.fleet._rack_view.forecast_view`, a view of its rows holding only what a forecast reads,
with the nodes' latency quantiles read once for the fleet and the racks' projections made together), made
at each verdict tick by :func:`fleet_tick` and kept in the state; once the run has ended, it is made at the
snapshot (the end decides it: a node that did not finish makes its rack INVALID). Where nothing reads them
as the run goes (``rack_forecasts`` off: no dashboard) the tick makes none.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np

from tokenwatch.base.events import FloatArray
from tokenwatch.core._state import RackState
from tokenwatch.core.config import STATE_CODE
from tokenwatch.core.fleet._memo import FleetMemo
from tokenwatch.core.fleet._rack_view import ViewPlan, forecast_view, view_plan
from tokenwatch.core.fleet.table import FleetTable
from tokenwatch.core.node_spread import below_median_pct
from tokenwatch.core.snapshot import NodeTable
from tokenwatch.core.verdict import current_forecast, prime_latency_quantiles, project_racks_together
from tokenwatch.mlperf.forecast import Forecast

_UP, _STALE, _DOWN = (STATE_CODE[s] for s in ("up", "stale", "down"))


def rack_forecast(state: RackState, r: int, t: float, plan: ViewPlan | None = None) -> Forecast:
    """Rack ``r``'s forecast at ``t``: the one a run of its nodes alone would make (what the verdict tick
    keeps, or made on demand where ``rack_forecasts`` is off). ``plan``: see :func:`forecast_view`."""
    return current_forecast(forecast_view(state, r, plan), t)


def fleet_tick(state: RackState, t: float) -> None:
    """Every ``verdict_interval_s`` of run time (as the rack-wide forecast's record): each rack's
    forecast, kept for the fleet table and recorded for the rack's own verdict panel."""
    if state.fleet is None:
        return  # one rack: nothing to step through
    for _ in fleet_tick_steps(state, t):
        pass


def fleet_tick_steps(state: RackState, t: float) -> Iterator[None]:
    """:func:`fleet_tick` a rack at a time: it yields after each rack's view, after their projection
    (made together: core/verdict/_together.py) and after each rack's forecast, so a caller on an event
    loop can let the loop in (64 racks' forecasts are 50-250 ms in one piece on a loaded machine). The
    racks' forecasts are kept together after the last one: until then the memo holds the last tick's."""
    memo = state.fleet
    if memo is None or not state.config.rack_forecasts or t + 1e-9 < memo.next_due_s:
        return
    interval = state.config.verdict_interval_s
    memo.next_due_s = (math.floor(t / interval + 1e-9) + 1) * interval
    if not state.tokens.any() and not state.samples.any():
        return  # nothing to project yet
    prime_latency_quantiles(state)  # read once for the fleet; each rack's view slices them
    rows = np.full((len(memo.groups), 5), math.nan)
    plan = view_plan(state)  # the racks' views read through it while the state stands still
    try:
        views = []
        for r in range(len(memo.groups)):
            views.append(forecast_view(state, r, plan))
            yield
        project_racks_together(views, t)  # their projections, made in one pass
        yield
        for r, view in enumerate(views):
            # A state changed since (not while a tick's steps run) is read afresh, the rack on its own.
            seen = view if plan.version == state.version else forecast_view(state, r)
            rows[r] = _history_row(current_forecast(seen, t))
            yield
    finally:
        state.verdict.joined_memo.forget()  # the fleet's joined series: only its racks at this tick read them
    memo.valid, memo.tokens_per_s = rows[:, 4].copy(), rows[:, 0].copy()
    memo.history.add(t, rows)


def _history_row(fc: Forecast) -> list[float]:
    """The forecast as the verdict history records it (``HISTORY_COLUMNS``)."""
    band, end = fc.tokens_per_s, fc.end_s
    row = [band.value, band.low, band.high] if band is not None else [math.nan] * 3
    return [
        *row,
        end.value if end is not None else math.nan,
        math.nan if fc.valid is None else float(fc.valid),
    ]


def fleet_table(state: RackState, nodes: NodeTable, codes: np.ndarray, now: float) -> FleetTable | None:
    """The fleet table of the snapshot whose node table is ``nodes`` (``codes``: the nodes' effective
    state codes at ``now``); None for a run of one rack."""
    memo = state.fleet
    if memo is None:
        return None
    groups = memo.groups
    index, mask = groups.padded_index()

    def per_rack(values: np.ndarray) -> FloatArray:
        return np.where(mask, np.asarray(values, np.float64)[index], np.nan)

    rack_codes = np.where(mask, codes[index], _DOWN)
    stopped = (rack_codes == _STALE) | (rack_codes == _DOWN)
    rates = per_rack(nodes.tokens_per_s)
    tokens_per_s = _sum_known(rates)
    gpus = groups.count * state.run.gpus_per_node
    power = per_rack(nodes.power_w)
    power_w = _sum_known(power)
    with np.errstate(invalid="ignore", divide="ignore"):
        per_gpu = np.where(gpus > 0, tokens_per_s / np.maximum(gpus, 1), np.nan)
        per_joule = np.where(power_w > 0, tokens_per_s / power_w, np.nan)
    means = np.where(stopped, np.nan, per_rack(nodes.mean_tokens_per_s))
    spread = _spread_pct(means)
    running = (rack_codes == _UP) & (per_rack(nodes.tokens_done) > 0) & mask
    worst, worst_delta = _worst(rates, running)
    valid, projected = (memo.valid, memo.tokens_per_s) if not state.ended else _final(state, memo, now)
    names = nodes.names
    causes = _cause_hints(nodes)
    worst_names = tuple(names[int(index[r, k])] if k >= 0 else "" for r, k in enumerate(worst))
    worst_causes = tuple(causes[int(index[r, k])] if k >= 0 and causes else "" for r, k in enumerate(worst))
    nodes_up = (~stopped & mask).sum(axis=1)
    states = tuple(
        _rack_state(up, total, c) for up, total, c in zip(nodes_up, groups.count, rack_codes, strict=True)
    )
    if not state.ended:  # a rack whose data stopped is not projected from its last figures
        silent = np.array([s != "up" for s in states], bool)
        valid, projected = np.where(silent, np.nan, valid), np.where(silent, np.nan, projected)
    return FleetTable(
        racks=groups.names,
        state=states,
        nodes_total=groups.count.copy(),
        nodes_up=nodes_up.astype(np.int64),
        gpus=gpus.astype(np.int64),
        tokens_per_s=tokens_per_s,
        per_gpu_tokens_per_s=per_gpu,
        spread_pct=spread,
        power_w=power_w,
        tokens_per_joule=per_joule,
        projected_valid=valid.copy(),
        projected_tokens_per_s=projected.copy(),
        worst_node=worst_names,
        worst_delta_pct=worst_delta,
        worst_cause=worst_causes,
        first_node=groups.first.copy(),
        node_count=groups.count.copy(),
    )


def _sum_known(values: FloatArray) -> FloatArray:
    """Each row's sum over its known (finite) values; NaN for a row with none (not 0: unknown)."""
    known = np.isfinite(values)
    return np.where(known.any(axis=1), np.where(known, values, 0.0).sum(axis=1), np.nan)


def _spread_pct(means: FloatArray) -> FloatArray:
    """(max - min) / min of each row's finite, positive values, in % (NaN for a row with none)."""
    ok = np.isfinite(means) & (means > 0)
    hi = np.where(ok, means, -np.inf).max(axis=1)
    lo = np.where(ok, means, np.inf).min(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(ok.any(axis=1), (hi - lo) / lo * 100.0, np.nan)


def _worst(rates: FloatArray, running: np.ndarray) -> tuple[np.ndarray, FloatArray]:
    """Per rack: the slot of its slowest running node (-1: fewer than two running) and how far it is
    from the median of the rack's running nodes, in % (negative = slower)."""
    slots = np.full(len(rates), -1, np.int64)
    delta = np.full(len(rates), np.nan)
    for r in range(len(rates)):
        below = below_median_pct(rates[r], running[r])
        if np.isfinite(below).any():
            k = int(np.nanargmax(below))
            slots[r], delta[r] = k, -below[k]
    return slots, delta


def _rack_state(up: int, total: int, codes: np.ndarray) -> str:
    """A rack is down when none of its nodes reports and one is down, stale when none reports."""
    if up > 0 or total == 0:
        return "up"
    return "down" if bool((codes[:total] == _DOWN).any()) else "stale"


def _final(state: RackState, memo: FleetMemo, now: float) -> tuple[FloatArray, FloatArray]:
    """Once the run has ended: each rack's forecast now (its end decided, as the rack-wide one is)."""
    valid = np.full(len(memo.groups), math.nan)
    projected = np.full(len(memo.groups), math.nan)
    for r in range(len(memo.groups)):
        row = _history_row(rack_forecast(state, r, now))
        valid[r], projected[r] = row[4], row[0]
    return valid, projected


def _cause_hints(nodes: NodeTable) -> tuple[str, ...]:
    """Each node's cause hint in words (``NodeTable.cause_text``; () where the table has none)."""
    texts = nodes.cause_text
    return texts if len(texts) == len(nodes.names) else ()
