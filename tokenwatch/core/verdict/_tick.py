"""The verdict's logic over the state: the forecast now (:func:`current_forecast`), the snapshot's
:class:`~tokenwatch.core.verdict.view.VerdictView` (:func:`verdict_view`), and the verdict's tick, which
records the forecast and raises its alerts.

``verdict_view`` is a pure function of the state (a replay reproduces it exactly). Every
``verdict_interval_s`` of run time the tick records the forecast (the band-over-time line, the report's
chart) and judges the alerts: the projected verdict turning, a rule's margin under 10 %.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from tokenwatch.core._state import RackState
from tokenwatch.core.config import STATE_CODE
from tokenwatch.core.final_figure import final_tokens_per_s
from tokenwatch.core.verdict._decided import SAVES, decide
from tokenwatch.core.verdict._ingest import NOT_CHECKED
from tokenwatch.core.verdict._inputs import (
    limits_origin,
    projected_nodes,
    projection,
    run_settings,
)
from tokenwatch.core.verdict._loadgen import judged_by_loadgen
from tokenwatch.core.verdict.view import VerdictHistory, VerdictView, describe_rule
from tokenwatch.mlperf.forecast import Band, Forecast, RuleForecast, honest_band
from tokenwatch.mlperf.settings_check import SettingCheck

_FINISHED = STATE_CODE["finished"]
MARGIN_ALERT = 0.10  # a rule projected to pass with less than this share of its limit to spare
_MARGIN_CLEAR = 0.12  # ...is back to normal above this (noise at the threshold is one alert, not ten)


def current_forecast(state: RackState, now: float) -> Forecast:
    """The forecast at ``now`` over the nodes that have run; a node down without any progress is left out,
    named in a rule of its own, and keeps the verdict from being VALID. A node down for good decides the
    verdict INVALID before the run ends (:mod:`tokenwatch.core.verdict._decided`)."""
    memo = state.verdict.forecast_memo
    if memo is not None and memo[0] == (now, state.version):
        return memo[1]
    fc = judged_by_loadgen(state, now, _forecast(state, now))
    if not state.ended and not fc.decided:  # once ended the verdict is FINAL (see _forecast)
        fc = decide(state, now, fc)
        fc = dataclasses.replace(fc, end_s=_not_before(fc.end_s, now))
    state.verdict.forecast_memo = ((now, state.version), fc)
    return fc


def _forecast(state: RackState, now: float) -> Forecast:
    absent, ran = projected_nodes(state, now)
    keep = ran
    codes = state.effective_state(now) if state.ended else None
    if codes is not None:
        # The rules are then judged over the nodes that finished, as the final verdict judges them: one
        # that did not has no result (its own row says so), and left in, its missing end kept the duration
        # rule undecided on the screen and in the JSONL where the summary said it passed.
        finished = keep & (codes == _FINISHED)
        keep = finished if finished.any() else keep
    fc = projection(state, now, keep)
    if codes is not None:
        if not (codes == _FINISHED).any():
            # No node has a result (an interrupted run): there is no rule to judge, only the row that says
            # none finished; a projection's `✓ min duration 877 s` at 5:41 was no final figure.
            fc = dataclasses.replace(fc, rules=())
        fc = _unfinished_nodes_fail(codes, fc)
        # The projection has arrived: the figure is the run's final one, the same number every surface
        # shows (the header, the rack table, the summary), not a projection of nodes that never finished.
        # Likewise the end has come: it is the run's actual end, not a projection.
        fc = dataclasses.replace(
            fc, tokens_per_s=honest_band(*[final_tokens_per_s(state)] * 3), end_s=Band(now, now, now)
        )
    if not absent.any():
        return fc
    names = [state.run.nodes[i] for i in np.flatnonzero(absent)]
    shown = ", ".join(names[:3]) + (f" +{len(names) - 3} more" if len(names) > 3 else "")
    every = RuleForecast(
        "every_node",
        float(ran.sum()) if not absent.all() else 0.0,
        None,
        float(len(absent)),
        None,
        None,
        "nodes",
        f"data from {shown} (down, no progress yet): not in the projection",
    )
    return dataclasses.replace(fc, rules=(*fc.rules, every), valid=None if fc.valid else fc.valid)


def _not_before(end: Band | None, now: float) -> Band | None:
    """A projected end is never in the past: one that says "a moment ago" (the last queries still in
    flight after the schedule's end) means "any moment", i.e. now. Every clock reads this end."""
    if end is None:
        return None
    return Band(max(end.value, now), max(end.low, now), max(end.high, end.value, now))


def _unfinished_nodes_fail(codes: np.ndarray, fc: Forecast) -> Forecast:
    """Once the run has ended, a node that did not finish its LoadGen run (down, stale, still going) has no
    result: the rack's verdict is INVALID, and the rule that says so is a row of its own. ``codes``: the
    nodes' effective states at the end."""
    unfinished = np.flatnonzero(codes != _FINISHED)
    if not unfinished.size:
        return fc
    finished = float(len(codes) - unfinished.size)
    rule = RuleForecast("every_node_finished", finished, finished, float(len(codes)), None, False, "nodes")
    return dataclasses.replace(fc, rules=(rule, *fc.rules), valid=False)


def energy_to_finish(fc: Forecast, now: float, power_w: float) -> Band | None:
    """The projected energy from ``now`` to the projected end at ``power_w`` (the rack's power now), J."""
    end = fc.end_s
    if end is None or not (math.isfinite(power_w) and power_w > 0):
        return None
    return Band(*(power_w * max(0.0, t - now) for t in (end.value, end.low, end.high)))


def verdict_view(
    state: RackState, now: float, power_w: float = math.nan, forecast: Forecast | None = None
) -> VerdictView:
    """The verdict now; ``forecast``: the one to show where the run's is made elsewhere (a fleet known
    rack by rack projects the sum of its racks' own forecasts), else :func:`current_forecast`."""
    verdict = state.verdict
    ref = verdict.benchmark
    _, judged_by = run_settings(state)
    times, values = verdict.history.view()
    columns = values.T if values.size else np.zeros((5, 0))
    fc = current_forecast(state, now) if forecast is None else forecast
    return VerdictView(
        benchmark=None if ref is None else ref.benchmark.name,
        benchmark_named=verdict.benchmark_named,
        scenario=verdict.scenario_label or state.run.scenario,
        judged_by=judged_by,
        limits_from=limits_origin(state),
        forecast=fc,
        history=VerdictHistory(times, *columns),
        settings=settings_checks(state),
        energy_to_finish_j=None if state.ended else energy_to_finish(fc, now, power_w),
    )


def settings_checks(state: RackState) -> tuple[SettingCheck, ...]:
    """The start-of-run check over the nodes whose settings arrived: per setting, the worst node's."""
    verdict = state.verdict
    worst = []
    for name, rank in verdict.setting_rank.items():
        i = int(np.argmin(rank))
        if rank[i] < NOT_CHECKED:
            worst.append(verdict.setting_checks[i][name])
    return tuple(worst)


def verdict_tick(state: RackState, t: float) -> None:
    """Every ``verdict_interval_s``: record the forecast and judge its alerts."""
    verdict = state.verdict
    if t + 1e-9 < verdict.next_due_s:
        return
    verdict.next_due_s = (math.floor(t / verdict.interval_s + 1e-9) + 1) * verdict.interval_s
    if not state.tokens.any() and not state.samples.any():
        return  # nothing to project yet
    fc = current_forecast(state, t)
    band, end = fc.tokens_per_s, fc.end_s
    code = math.nan if fc.valid is None else float(fc.valid)
    row = [band.value, band.low, band.high] if band is not None else [math.nan] * 3
    verdict.history.add(t, np.array([*row, end.value if end is not None else math.nan, code]))
    _verdict_alerts(state, t, fc)


def _verdict_alerts(state: RackState, t: float, fc: Forecast) -> None:
    verdict, alerts = state.verdict, state.alerts
    failing = [r for r in fc.rules if r.ok is False]
    alerts.condition(
        t,
        None,
        "verdict_invalid",
        bool(failing) and not fc.decided,  # a decided verdict has an alert of its own, below
        "projected INVALID: " + "; ".join(describe_rule(r) for r in failing[:2]),
        "critical",
        "projected INVALID is now decided" if fc.decided else "projected verdict no longer INVALID",
    )
    # A decided INVALID is its own alert, its reason in words (the verdict itself adds what stopping saves).
    decided_invalid = bool(fc.decided) and fc.valid is False
    alerts.condition(
        t,
        None,
        "verdict_decided",
        decided_invalid,
        f"DECIDED INVALID: {fc.decided.split(SAVES)[0] if decided_invalid else ''}",
        "critical",
        "verdict no longer decided",
    )
    if fc.valid is True and verdict.last_valid is not True:
        said = (
            f"DECIDED VALID: {fc.decided}" if fc.decided else "projected VALID: every rule projected to pass"
        )
        alerts.event(t, None, "verdict", said, "info")
    if fc.valid is not None:
        verdict.last_valid = fc.valid
    for rule in fc.rules:
        key = f"margin_{rule.name}"
        threshold = _MARGIN_CLEAR if key in verdict.margin_alerted else MARGIN_ALERT
        # A margin the run was configured with (a Server run scheduled for exactly min_duration) is
        # no news: it was so from the start and cannot change. Only an estimate's margin is watched.
        tight = (
            rule.ok is not False
            and not rule.configured
            and rule.margin is not None
            and rule.margin < threshold
        )
        alerts.condition(
            t,
            None,
            key,
            tight,
            f"{rule.name} margin {100 * (rule.margin or 0.0):.1f} %: {describe_rule(rule)}",
            "warning",
            f"{rule.name} margin back above {100 * MARGIN_ALERT:.0f} %",
        )
        if tight:
            verdict.margin_alerted.add(key)
        else:
            verdict.margin_alerted.discard(key)
