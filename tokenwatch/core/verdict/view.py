"""The MLPerf verdict as front ends read it: the forecast now, the forecast over time, the start-of-run
check (:class:`VerdictView`, made by :mod:`tokenwatch.core.verdict._tick`), and how a rule's figures and
the forecast's accuracy read.

Types and pure readers only, so the snapshot that carries a :class:`VerdictView` does not import the
verdict's logic, nor the state it reads.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tokenwatch.base.events import FloatArray
from tokenwatch.base.formatting import group, latency_figure, seconds_ms
from tokenwatch.mlperf.early_stopping import queries_needed
from tokenwatch.mlperf.forecast import Band, Forecast, RuleForecast
from tokenwatch.mlperf.settings_check import SettingCheck
from tokenwatch.mlperf.verdict import Check

# The forecast over time as the verdict history keeps it: projected tokens/s, its band, the projected end,
# the verdict (1, 0, -1; NaN). Here, with the types, so the fleet wing reads it without the verdict's state.
HISTORY_COLUMNS = ("value", "low", "high", "end_s", "valid")


@dataclass(frozen=True, slots=True, eq=False)
class VerdictHistory:
    """The forecast at each verdict tick: tokens/s projected, its band, the projected end (s) and the
    projected verdict (1 VALID, 0 INVALID, NaN undecided)."""

    times: FloatArray
    value: FloatArray
    low: FloatArray
    high: FloatArray
    end_s: FloatArray
    valid: FloatArray


@dataclass(frozen=True, slots=True, eq=False)
class VerdictView:
    """The verdict at the snapshot's time. ``benchmark``: the rules' name (None when no known benchmark
    was named; ``benchmark_named`` keeps what was). ``judged_by``: whose settings the rules use (the
    nodes' ``LoadGen`` detail logs, else the benchmark's own figures). ``settings``: the start-of-run
    check, each setting's worst node."""

    benchmark: str | None
    benchmark_named: str
    scenario: str
    judged_by: str
    limits_from: str
    forecast: Forecast
    history: VerdictHistory
    settings: tuple[SettingCheck, ...]
    # The GPU energy from now to the projected end at the rack's current power (J; the band from the
    # projected end's); None when either is unknown or the run has ended.
    energy_to_finish_j: Band | None = None

    @property
    def valid(self) -> bool | None:
        return self.forecast.valid


def format_rule_value(value: float | None, rule: RuleForecast) -> str:
    """A rule's figure for people (:func:`figure_text`): the live panel's, the alerts'."""
    return figure_text(value, rule.name, rule.unit)


def figure_text(value: float | None, name: str, unit: str) -> str:
    """A rule's or a final check's figure for people, one form on every surface: a duration in whole
    seconds from a minute on, below it to the ms (a LoadGen test run's 0.4-s min_duration read ``0 s`` on
    the live panel beside the summary's ``400 ms``); a latency in ms (or s from 1 s on); a count grouped;
    early stopping's budget of -1 (a run too short to pass it whatever its latencies) is ``none``."""
    if value is None or not math.isfinite(value):
        return "—"
    if name.startswith("early_stopping") and value < 0:
        return "none"
    if unit == "s" and name == "min_duration" and value >= 60:
        return f"{group(value)} s"
    if unit == "s":
        return seconds_ms(value)
    return group(value)


def rule_figure(value: float | None, rule: RuleForecast) -> str:
    """A rule's own figure (now, projected) for people (:func:`measured_text`)."""
    return measured_text(value, rule.name, rule.unit, rule.estimated)


def measured_text(value: float | None, name: str, unit: str, estimated: bool) -> str:
    """A rule's or a check's measured figure (not its limit) for people: ``~`` before a histogram's
    estimate, as the Run result table marks its percentiles (a limit is never one); a latency to that
    table's digits."""
    if unit == "s" and name != "min_duration":
        return latency_figure(value, estimated)
    return estimate_marked(figure_text(value, name, unit), estimated)


def estimate_marked(text: str, estimated: bool) -> str:
    """A figure with ``~`` before it where it is read from histograms' buckets (about three digits), as
    every surface marks one; no mark on the dash of an unknown value."""
    return f"~{text}" if estimated and text != "—" else text


def describe_rule(rule: RuleForecast) -> str:
    """``min_duration projected 584 s, limit 600 s`` (or what it is missing)."""
    if rule.missing:
        return f"{rule.name}: needs {rule.missing}"
    if rule.name.startswith("early_stopping") and rule.limit is not None and rule.limit < 0:
        return (
            f"{rule.name}: too few queries to pass early stopping whatever their latency "
            f"(LoadGen needs at least {group(queries_needed(0))})"
        )
    if rule.name.startswith("early_stopping"):
        return (
            f"{rule.name}: {format_rule_value(rule.projected, rule)} queries projected over the latency "
            f"limit{f' at {rule.node}' if rule.node else ''}, early stopping allows "
            f"{format_rule_value(rule.limit, rule)}"
        )
    at = f" at {rule.node}" if rule.node else ""
    limit = format_rule_value(rule.limit, rule)
    return f"{rule.name} projected {rule_figure(rule.projected, rule)}{at}, limit {limit}"


@dataclass(frozen=True, slots=True)
class ForecastAccuracy:
    """How early the forecast was right about the final figure (run times in s, None: never)."""

    band_holds_from_s: float | None  # from here on every band stated held the final figure
    within_pct_from_s: float | None  # from here on every projection was within ``within_pct`` of it
    within_pct: float


def forecast_accuracy(history: VerdictHistory, final: float, within_pct: float = 1.0) -> ForecastAccuracy:
    """Checked against ``final`` (the run's LoadGen figure), tick by tick from the end backwards."""
    ok = np.isfinite(history.value)
    times = history.times[ok]
    if not times.size or not math.isfinite(final) or final <= 0:
        return ForecastAccuracy(None, None, within_pct)
    held = (history.low[ok] <= final) & (final <= history.high[ok])
    close = np.abs(history.value[ok] / final - 1.0) * 100.0 <= within_pct

    def settled(flags: np.ndarray) -> float | None:
        if not flags[-1]:
            return None
        misses = np.flatnonzero(~flags)
        return float(times[misses[-1] + 1]) if misses.size else float(times[0])

    return ForecastAccuracy(settled(held), settled(close), within_pct)


def check_cells(check: Check) -> tuple[str, str, str, str, str, str]:
    """A final check as every table shows it (the report's, the summary's): (mark, rule, node, value,
    limit, margin). The node is the one the rack's rule is read at, where it alone has that value; ``~``
    marks a value read from histograms' buckets (a limit is never one)."""
    return (
        "✓" if check.ok else "✗" if check.ok is False else "?",
        check.name,
        check.node,
        measured_text(check.value, check.name, check.unit, check.estimated),
        figure_text(check.limit, check.name, check.unit),
        f"{100 * check.margin:+,.1f} %" if check.margin is not None else "—",
    )
