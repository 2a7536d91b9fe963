"""What the MLPerf verdict needs that the rest of the core does not keep.

Per node: the records of its LoadGen detail log (settings, the query plan, at the end the result) and,
for each latency metric LoadGen judges against a limit (TTFT, TPOT), how many samples were judged and
how many exceeded the limit (``latency > limit``, strictly, in whole nanoseconds, as LoadGen counts).
Counts are exact where raw latencies arrive (a LoadGen trace) or a source sends exact counters (the
simulator), and bounds where only histogram deltas arrive (Prometheus): the 1 % log buckets entirely
above the limit count for sure, the one straddling it only perhaps. Plus what the verdict remembers
between its ticks: the forecast over time (a bounded series) and its alert conditions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tokenwatch.base.events import FloatArray, IntArray, LatencyMetric, RunStarted
from tokenwatch.core._ring import DownsampledSeries
from tokenwatch.core.config import CoreConfig
from tokenwatch.core.histogram import N_BUCKETS, LogHistogram, bucket_index, bucket_upper
from tokenwatch.core.verdict._joined_memo import JoinedMemo
from tokenwatch.core.verdict._node_quantiles import NodeQuantileMemo
from tokenwatch.core.verdict._pace_memo import PaceMemo
from tokenwatch.core.verdict.view import HISTORY_COLUMNS
from tokenwatch.mlperf.figures import RunSettings
from tokenwatch.mlperf.forecast import Forecast, NodeProgress, OverLimit
from tokenwatch.mlperf.rules import BenchmarkRef, latency_limits, normalize_benchmark
from tokenwatch.mlperf.settings_check import SettingCheck

LIMIT_METRICS: tuple[LatencyMetric, ...] = ("ttft", "tpot")
_HISTORY_POINTS = 512
# Lower and upper edges of the core's log buckets: a bucket counts surely over a limit when its lower
# edge is at or above it, perhaps when only its upper edge is.
_UPPER = bucket_upper(np.arange(N_BUCKETS))
_LOWER = np.concatenate(([0.0], _UPPER[:-1]))


def whole_ns(seconds: float | FloatArray) -> Any:
    """Seconds as whole nanoseconds (LoadGen's unit): float noise must not move a latency across a limit."""
    return np.round(np.asarray(seconds, np.float64) * 1e9)


@dataclass(slots=True, eq=False)
class LimitCounts:
    """One metric's samples against its limit, per node (arrays indexed like the run's nodes)."""

    limit_s: FloatArray  # the limit counted against (NaN: none known)
    loadgen_limit: np.ndarray  # bool: the limit is the node's LoadGen's own (its detail log)
    exact_judged: IntArray  # raw latencies, counted one by one
    exact_over: IntArray
    hist_judged: IntArray  # histogram deltas: bounds
    hist_low: IntArray
    hist_high: IntArray
    counter_limit_s: FloatArray  # the latest exact counters a source sent, and their limit
    counter_judged: IntArray
    counter_over: IntArray

    @classmethod
    def empty(cls, n: int, limit_s: float) -> LimitCounts:
        def zeros() -> IntArray:
            return np.zeros(n, np.int64)

        return cls(
            np.full(n, limit_s),
            np.zeros(n, bool),
            zeros(),
            zeros(),
            zeros(),
            zeros(),
            zeros(),
            np.full(n, np.nan),
            zeros(),
            zeros(),
        )

    def totals(self) -> tuple[IntArray, IntArray, IntArray]:
        """(judged, over low, over high) per node: a source's exact counters where they are for the
        limit in force, else raw counts plus histogram bounds."""
        counted = np.isfinite(self.counter_limit_s) & (
            whole_ns(self.counter_limit_s) == whole_ns(self.limit_s)
        )
        judged = np.where(counted, self.counter_judged, self.exact_judged + self.hist_judged)
        low = np.where(counted, self.counter_over, self.exact_over + self.hist_low)
        high = np.where(counted, self.counter_over, self.exact_over + self.hist_high)
        return judged, low, high

    def add_raw(self, i: int, values_s: FloatArray) -> None:
        values = whole_ns(values_s[np.isfinite(values_s)])
        self.exact_judged[i] += values.size
        if math.isfinite(self.limit_s[i]):
            self.exact_over[i] += int(np.count_nonzero(values > whole_ns(self.limit_s[i])))

    def add_histogram(self, i: int, values_s: FloatArray, counts: IntArray) -> None:
        ok = np.isfinite(values_s) & (counts > 0)
        index, weight = bucket_index(values_s[ok]), counts[ok]
        self.hist_judged[i] += int(weight.sum())
        limit = self.limit_s[i]
        if math.isfinite(limit):
            self.hist_low[i] += int(weight[_LOWER[index] >= limit].sum())
            self.hist_high[i] += int(weight[_UPPER[index] > limit].sum())

    def set_limit(self, i: int, limit_s: float, histogram: LogHistogram, loadgen: bool) -> None:
        """A new limit for node ``i``: what was counted against the old one is recounted from the node's
        histogram (bounds at its 1 % resolution; exact again for every sample from now on)."""
        self.loadgen_limit[i] = loadgen
        if whole_ns(limit_s) == whole_ns(self.limit_s[i]):
            return
        self.limit_s[i] = limit_s
        counts = histogram.counts
        self.exact_judged[i] = self.exact_over[i] = 0
        self.hist_judged[i] = histogram.total
        self.hist_low[i] = int(counts[limit_s <= _LOWER].sum())
        self.hist_high[i] = int(counts[limit_s < _UPPER].sum())


@dataclass(slots=True, eq=False)
class VerdictState:
    """Everything the verdict reads beyond counters and series (see the module docstring)."""

    benchmark: BenchmarkRef | None
    benchmark_named: str  # as it was named ("" when none was): an unknown name is said, never guessed
    limit_origin: str  # where limits come from before a node's detail log says: "benchmark" or "sla"
    details: list[dict[str, Any]]  # per node: its detail log's records so far
    plan_t: FloatArray  # run time each node's query plan arrived (its LoadGen start); NaN: not yet
    plan_samples: FloatArray  # samples (Offline) or queries (Server) each node's LoadGen issues; NaN unknown
    plan_schedule_s: FloatArray  # each node's query schedule length (generated_query_duration); NaN unknown
    settings: list[RunSettings | None]  # per node, from its detail log
    # Each node's figures as its LoadGen wrote them in its result (tokens/s, samples/s; NaN: none yet):
    # once there, they are the node's figures on every surface, in place of the core's measurement.
    result_tokens_per_s: FloatArray
    result_samples_per_s: FloatArray
    counts: dict[LatencyMetric, LimitCounts]
    history: DownsampledSeries
    interval_s: float
    next_due_s: float = 0.0
    # The start-of-run check of each node (made once its settings arrive) and, per setting, each node's
    # rank (0 fails, 1 undecided, 2 passes, 3 not checked): the view shows each setting's worst node.
    setting_checks: list[dict[str, SettingCheck]] = field(default_factory=list)
    setting_rank: dict[str, np.ndarray] = field(default_factory=dict)
    # One object for the settings and checks nodes share (by repr): a fleet's 1,152 nodes hold one
    # RunSettings and one check dict, not 5,760 objects each replay keyframe pickles and restores.
    shared: dict[str, Any] = field(default_factory=dict)
    last_valid: bool | None = None  # the latest decided projection, for the "verdict turned" alert
    margin_alerted: set[str] = field(default_factory=set)
    settings_alerted: set[str] = field(default_factory=set)
    # The latest forecast and the (run time, state version) it was made at: the verdict tick and the
    # snapshot at the same boundary ask for the same forecast, which costs most of a tick.
    forecast_memo: tuple[tuple[float, int], Forecast] | None = None
    # The latest projection of some of the nodes, keyed by run time, state version and which nodes
    # (core/verdict/_inputs.projection): the tick's forecast and a decided verdict's rest share it.
    projection_memo: tuple[tuple[float, int, bytes], Forecast] | None = None
    # The projection's inputs (progress, latency counts) made already, under the same key: a fleet's
    # racks' views, projected together at a verdict tick (core/verdict/_together.py), are each handed
    # their own this way.
    progress_memo: tuple[tuple[float, int, bytes], NodeProgress, list[OverLimit]] | None = None
    # Each node's verdict from its LoadGen result, judged once per change of the detail records (judging
    # one takes ~0.5 ms: a fleet's 1,152 nodes must not be judged again at every snapshot).
    details_version: int = 0
    loadgen_memo: tuple[int, list[Any]] | None = None
    # Each node's latency quantiles the forecast reads, once per state version
    # (core/verdict/_node_quantiles.py).
    node_quantiles: NodeQuantileMemo = field(default_factory=NodeQuantileMemo)
    # A fleet's pace of every node at its latest forecast, which its racks' forecasts at the same tick
    # slice instead of measuring again (core/verdict/_pace_memo.py).
    pace_memo: PaceMemo = field(default_factory=PaceMemo)
    # ...and its joined token series and starts, through its racks' forecasts at that tick
    # (core/verdict/_joined_memo.py).
    joined_memo: JoinedMemo = field(default_factory=JoinedMemo)

    @property
    def scenario_label(self) -> str:
        return "Interactive" if self.benchmark is not None and self.benchmark.interactive else ""


def new_verdict_state(ev: RunStarted, config: CoreConfig) -> VerdictState:
    """The empty verdict state of the run ``ev`` starts. The benchmark is the config's (``--benchmark``)
    or the run's own (``RunStarted.meta["benchmark"]``: a simulator profile's, a watch config's)."""
    named = config.benchmark or ev.meta.get("benchmark") or ""
    named = named if isinstance(named, str) else ""
    ref = normalize_benchmark(named) if named else None
    limits = latency_limits(ref, ev.scenario) if ref is not None else None
    n = len(ev.nodes)
    if limits is not None:
        counts = {
            "ttft": LimitCounts.empty(n, limits.ttft_s),
            "tpot": LimitCounts.empty(n, limits.tpot_s),
        }
    else:
        counts = {
            "ttft": LimitCounts.empty(n, config.ttft_sla_s),
            "tpot": LimitCounts.empty(n, config.tpot_sla_s),
        }
    return VerdictState(
        benchmark=ref,
        benchmark_named=named,
        limit_origin="benchmark" if limits is not None else "sla",
        details=[{} for _ in range(n)],
        plan_t=np.full(n, np.nan),
        plan_samples=np.full(n, np.nan),
        plan_schedule_s=np.full(n, np.nan),
        settings=[None] * n,
        result_tokens_per_s=np.full(n, np.nan),
        result_samples_per_s=np.full(n, np.nan),
        counts=counts,  # type: ignore[arg-type]
        history=DownsampledSeries(
            _HISTORY_POINTS, (len(HISTORY_COLUMNS),), config.verdict_interval_s, "last"
        ),
        interval_s=config.verdict_interval_s,
        setting_checks=[{} for _ in range(n)],
    )


def loadgen_in_progress(verdict: VerdictState) -> np.ndarray:
    """Per node: its LoadGen run is under way, its query plan written and its result not yet."""
    judged = np.array(["result_validity" in values for values in verdict.details], dtype=bool)
    return np.asarray(~np.isnan(verdict.plan_t) & ~judged, dtype=bool)


# The keys of LoadGen's figures in its result: Offline's, then Server's (completed queries only).
_RESULT_TOKENS = ("result_tokens_per_second", "result_completed_tokens_per_second")
_RESULT_SAMPLES = ("result_samples_per_second", "result_completed_samples_per_sec")


def result_figures(values: dict[str, Any], scenario: str) -> tuple[float, float]:
    """(tokens/s, samples/s) as LoadGen wrote them in a node's result; NaN where it wrote none (a figure
    that is not a finite number >= 0 is none)."""
    if "result_validity" not in values:
        return math.nan, math.nan
    order = slice(None, None, -1) if scenario == "Server" else slice(None)

    def first(keys: tuple[str, ...]) -> float:
        for key in keys[order]:
            value = values.get(key)
            if isinstance(value, int | float) and not isinstance(value, bool):
                number = float(value)
                return number if math.isfinite(number) and number >= 0 else math.nan
        return math.nan

    return first(_RESULT_TOKENS), first(_RESULT_SAMPLES)
