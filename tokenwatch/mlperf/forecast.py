"""The MLPerf forecast: where the run will land (LoadGen's figure and verdict), from its first minutes.

**What is projected.** Each node is its own LoadGen run; the rack figure is the sum of the nodes' figures
(the published rack method). A node's figure is LoadGen's: Offline ``tokens / time of its last
completion``, Server ``tokens / completion time of its final query``. So, per node:

* tokens at the end: Offline ``tokens so far + samples still to do x tokens per sample`` (the sample count
  is LoadGen's ``generated_samples_per_query``; tokens per sample known, or the running mean of the samples
  done); Server the same over ``generated_query_count``; a run that ends at a fixed time (the simulator's
  Server) extends its token count at the current pace instead;
* the end: Offline ``now + remaining tokens / current pace + half the drain tail`` (the batch empties over
  the last few seconds, which lowers the figure below the steady rate; the tail lasts twice the engine's
  e2e p50 where a source states it, up to ``drain_s``); Server the end of LoadGen's query
  schedule plus one typical end-to-end latency, or later if the node cannot keep up with the schedule;
* the current pace is the node's rate over its last minute, counted from its last pause if it paused (a
  stall, or a silence that its next report made up for: no progress for ``stall_after_s`` or three of its
  sources' intervals between reports, whichever is longer).

**The band** combines, per node: the noise of the node's pace (measured from 10-s blocks of its own run,
shrinking as the rest of the run gets shorter; the larger of how much neighbouring blocks differ and how
widely the blocks spread, so a wandering pace widens it; one standard error high, as few blocks read it
noisily), the spread of tokens per sample when only their
mean is known, the drain tail (0 to ``drain_s``), the work done unheard since the node's last report, a
change of pace that may end now (a node slower than its usual pace, or far slower than its peers, may return
to that pace; the band reaches to both), and for a stalled node an outage that may last ``outage_s`` more,
or that lasts for good (its figure is then that of its work so far, as the rack's figure counts it; stalled
past ``outage_s`` that is its projection, a resume the low side). Random parts add in quadrature across
nodes, the systematic ones add up across nodes, and the two, with one running node's unforeseen loss of
``future_share`` of the work of its time left (a fault still to come), combine in quadrature. Assumed: a
node's noise stays what it has been; a slowdown either persists or ends, it does not get worse; a fault
still to come costs one node at most a fifth of its remaining work. A fault beyond that is not foreseen: the
band then moves at the next interval.

**Warm-up**: until the rack's pace has stopped climbing (:mod:`tokenwatch.mlperf.warm_up`) no figure and
no end is projected, and no VALID (``Forecast.warming_up``).

**Rules** are projected node by node and the rack passes when every node does
(:mod:`tokenwatch.mlperf.rules_forecast`): minimum duration from the projected end (Offline) or the
query schedule (Server), minimum queries from the sample counts LoadGen generated, TTFT/TPOT p99 and early
stopping from the counts of samples over each limit. The verdict is VALID when every rule is projected to
pass, INVALID when one is projected to fail, undecided otherwise; a rule whose source is missing says so.

Cost: a handful of numpy operations on (points x nodes) arrays; well under a millisecond per interval for a
72-GPU rack (measured in ``benchmarks/bench_forecast_coverage.py``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tokenwatch.base.events import FloatArray
from tokenwatch.mlperf.figures import RunSettings
from tokenwatch.mlperf.pace import Assumptions
from tokenwatch.mlperf.rules_forecast import (
    OverLimit,
    RuleForecast,
    combine,
    latency_rules,
    missing_rule,
    worst_node,
)
from tokenwatch.mlperf.throughput_forecast import NodeProgress, project_nodes, rack_band
from tokenwatch.mlperf.warm_up import steady_from

_Z_COUNT = 3.0  # a time-bounded run's final query count: the pace so far, +- this many Poisson SDs

__all__ = [
    "Assumptions",
    "Band",
    "Forecast",
    "NodeProgress",
    "OverLimit",
    "RuleForecast",
    "forecast",
    "honest_band",
]


@dataclass(frozen=True, slots=True)
class Band:
    """A figure and the range it may land in. ``low``/``high`` are NaN where no honest range can be
    stated (see :func:`honest_band`); ``value`` is NaN where the figure itself is unknown."""

    value: float
    low: float
    high: float

    @property
    def known(self) -> bool:
        """Whether the band states a range (finite bounds no wider apart than the figure)."""
        return math.isfinite(self.low) and math.isfinite(self.high)

    @property
    def width_pct(self) -> float:
        """The band's full width as a share of the value, in percent (inf when the band is unknown)."""
        if not self.known or not self.value:
            return math.inf
        return 100.0 * (self.high - self.low) / self.value

    def contains(self, x: float) -> bool:
        return self.low <= x <= self.high


def honest_band(value: float, low: float, high: float) -> Band:
    """A tokens/s band that is never wider than its figure, never below 0 and never inf or NaN.

    A throughput cannot fall below 0 (the low side is clamped there); a band wider than the figure itself
    says nothing (a node whose end the forecast puts a nanosecond away after a gap in its data made the
    high side 10^15 tok/s: ``±404,686,426,725 %``), so it is not stated: NaN bounds, shown as unknown. A
    figure that is not finite and positive is unknown too.
    """
    if not (math.isfinite(value) and value > 0):
        return Band(math.nan, math.nan, math.nan)
    if not (math.isfinite(low) and math.isfinite(high)):
        return Band(value, math.nan, math.nan)
    low, high = min(max(low, 0.0), value), max(high, value)  # and it holds its own figure
    if high - low > value:
        return Band(value, math.nan, math.nan)
    return Band(value, low, high)


@dataclass(frozen=True, slots=True)
class Forecast:
    t: float
    tokens_per_s: Band | None  # None until every running node has made progress
    end_s: Band | None
    rules: tuple[RuleForecast, ...]
    valid: bool | None  # projected VALID / INVALID / undecided
    # Why the verdict can no longer change, as a sentence ("" while it is a projection): a state that
    # makes VALID impossible (a node down for good) decides it before the run ends.
    decided: str = ""
    # The rack's pace is still climbing (mlperf/warm_up.py): no figure, no end, and no VALID is projected
    # from it (tokens_per_s and end_s are None; a rule already failing still says INVALID).
    warming_up: bool = False
    # Why the data behind it stopped ("" while it flows): a rack whose source went silent or down is not
    # extrapolated from its last figures (tokens_per_s and end_s are None, valid is undecided).
    stale: str = ""

    def rule(self, name: str) -> RuleForecast:
        for r in self.rules:
            if r.name == name:
                return r
        raise KeyError(name)


def forecast(
    progress: NodeProgress,
    settings: RunSettings | None = None,
    latency: Sequence[OverLimit] = (),
    assumptions: Assumptions | None = None,
) -> Forecast:
    """The forecast at ``progress.now_s``. ``settings``: LoadGen's (one for every node); ``latency``: Server
    over-limit counts per metric. Without them the rules they need say what is missing."""
    a = assumptions or Assumptions()
    nodes = project_nodes(progress, a)
    band: Band | None = None
    end: Band | None = None
    if nodes.projectable:
        band = honest_band(*rack_band(nodes))
    # An end needs something to end by: a sample count, a schedule, or every node done. Without one the
    # work left is unknown (judged on what is done), and "now" is no projection of the end.
    ends_by = progress.total_samples is not None or progress.schedule_end_s is not None
    if nodes.projectable and (ends_by or bool(progress.finished.all())):
        # A node gone is projected at its work so far (it may never finish), and the run then ends with its
        # peers: the end is theirs, as the figure is, and its resume the band's late side (a node silent from
        # 2:00 put a 15-minute run's end at 25:14, its low end at 15:54; it ended at 15:47 with its peers).
        bounding = ~nodes.gone if not nodes.gone.all() else np.ones(len(nodes.gone), bool)
        end = Band(
            float(nodes.end_s[bounding].max()),
            float((nodes.end_s - nodes.end_early_s)[bounding].max()),
            float((nodes.end_s + nodes.end_late_s).max()),
        )
    rules = _duration_and_count_rules(
        progress, settings, nodes.end_s, nodes.end_early_s, nodes.end_late_s, nodes.projectable
    )
    if progress.scenario != "Offline":
        rules += _latency_rules(progress, latency)
    warming = warming_up(progress, a)
    if warming:
        # Offline's duration is projected from the end, which a climbing pace does not yet give: a pass
        # read from it is no projection. A fail is: the pace only rises, so the end only comes sooner.
        rules = [_warming_duration(r) if _from_the_pace(r, progress) else r for r in rules]
    flags = [r.ok for r in rules]
    valid = False if any(f is False for f in flags) else None if any(f is None for f in flags) else True
    if warming:
        band, end, valid = None, None, False if valid is False else None
    return Forecast(progress.now_s, band, end, tuple(rules), valid, warming_up=warming)


def _from_the_pace(rule: RuleForecast, p: NodeProgress) -> bool:
    return (
        p.scenario == "Offline"
        and rule.name == "min_duration"
        and rule.projected is not None
        and rule.ok is not False
    )


def _warming_duration(rule: RuleForecast) -> RuleForecast:
    """The duration rule while the pace still climbs: its time so far and limit, no projection."""
    return dataclasses.replace(
        rule, projected=None, margin=None, ok=None, missing="a steady pace (warming up)"
    )


def warming_up(p: NodeProgress, a: Assumptions) -> bool:
    """Whether the rack's pace is still on its start-up ramp (:mod:`tokenwatch.mlperf.warm_up`); a rack
    whose every node has finished is past it whatever its series says."""
    if bool(p.finished.all()) or not p.times_s.size:
        return False
    start = float(np.min(p.start_s))
    rack = p.tokens.sum(axis=1) if p.tokens.ndim == 2 else p.tokens
    return steady_from(p.times_s, rack, start, p.now_s, a.warm_window_s, a.warm_rise, a.warm_max_s) is None


def _duration_and_count_rules(
    p: NodeProgress,
    settings: RunSettings | None,
    end: np.ndarray,
    early: np.ndarray,
    late: np.ndarray,
    projectable: bool,
) -> list[RuleForecast]:
    if settings is None:
        return [
            missing_rule(
                "min_duration", "s", "LoadGen settings (the detail log's effective_min_duration_ms)"
            ),
            missing_rule("min_queries", "queries", "LoadGen settings (effective_min_query_count)"),
        ]
    limit = settings.min_duration_s
    if p.scenario == "Offline" and not projectable:
        return [missing_rule("min_duration", "s", "progress on every node", limit), *_count_rule(p, settings)]
    if p.scenario == "Offline":
        basis, low, high = end - p.start_s, end - early - p.start_s, end + late - p.start_s
    elif p.schedule_end_s is not None:  # the final query's scheduled time is known from the start
        basis = low = high = p.schedule_end_s - p.start_s
    else:
        return [
            missing_rule("min_duration", "s", "the query schedule (generated_query_duration)", limit),
            *_count_rule(p, settings),
        ]
    flags = np.where(low >= limit, 1, np.where(high < limit, -1, 0))
    worst = int(np.argmin(basis))
    # The duration so far of the node the rule is read at, as LoadGen will count it: a finished node's is
    # its own (at the end the row read the run's time beside the shortest node's duration).
    so_far = basis[worst] if p.finished[worst] else np.minimum(p.now_s - p.start_s[worst], basis[worst])
    rule = RuleForecast(
        "min_duration",
        float(so_far),
        float(basis[worst]),
        limit,
        float((basis[worst] - limit) / limit) if limit else None,
        combine(flags),
        "s",
        configured=p.scenario != "Offline",  # the final query's scheduled time: set by the settings
        node=worst_node(p.nodes, basis, worst),
    )
    return [rule, *_count_rule(p, settings)]


def _count_rule(p: NodeProgress, settings: RunSettings) -> list[RuleForecast]:
    # Offline: one query of ``total`` samples vs min_sample_count; Server: queries vs min_query_count.
    need = settings.min_sample_count if p.scenario == "Offline" else settings.min_query_count
    unit = "samples" if p.scenario == "Offline" else "queries"
    if p.total_samples is not None:
        total = p.total_samples
        flags = np.where(total >= need, 1, -1)
    elif p.scenario != "Offline" and p.schedule_end_s is not None:
        # A time-bounded run (queries arrive until a fixed end): the count at the pace so far, and as
        # Poisson arrivals may land within _Z_COUNT standard deviations of it.
        elapsed = np.maximum(p.now_s - p.start_s, 1e-9)
        total = np.where(
            p.finished,
            p.samples_done,
            p.samples_done * np.maximum(p.schedule_end_s - p.start_s, elapsed) / elapsed,
        )
        spread = np.where(p.finished, 0.0, _Z_COUNT * np.sqrt(np.maximum(total - p.samples_done, 0.0)))
        flags = np.where(total - spread >= need, 1, np.where(total + spread < need, -1, 0))
    else:
        return [missing_rule("min_queries", unit, "the generated query count (generated_query_count)")]
    worst = int(np.argmin(total))
    return [
        RuleForecast(
            "min_queries",
            float(p.samples_done[worst]),
            float(total[worst]),
            float(need),
            float((total[worst] - need) / need) if need else None,
            combine(flags),
            unit,
            configured=p.total_samples is not None,  # the count LoadGen was told to issue
            node=worst_node(p.nodes, total, worst),
        )
    ]


def latency_sample_totals(p: NodeProgress) -> FloatArray:
    """Each node's samples at the end, which its latency rules count over: its sample count, a
    time-bounded run's at its average pace so far, else those done."""
    if p.total_samples is not None:
        return p.total_samples.astype(np.float64)
    if p.schedule_end_s is not None:  # a time-bounded run: samples at the average pace so far
        elapsed = np.maximum(p.now_s - p.start_s, 1e-9)
        return np.asarray(p.samples_done * np.maximum(p.schedule_end_s - p.start_s, elapsed) / elapsed)
    return p.samples_done.astype(np.float64)


def _latency_rules(p: NodeProgress, latency: Sequence[OverLimit]) -> list[RuleForecast]:
    total = latency_sample_totals(p)
    rules: list[RuleForecast] = []
    given = {o.metric: o for o in latency}
    for metric in ("ttft", "tpot"):
        over = given.get(metric)
        if over is None:
            source = f"per-sample {metric.upper()} over-limit counts"
            rules += [
                missing_rule(f"{metric}_p99", "s", source),
                missing_rule(f"early_stopping_{metric}", "samples", source),
            ]
            continue
        rules += latency_rules(over, total, p.nodes)
    return rules
