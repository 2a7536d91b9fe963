"""Immutable snapshots of the core: what every front end reads. Front ends compute no statistics.

Arrays inside a snapshot are private copies (or read-only views of data that is never mutated
afterwards), so a snapshot stays valid while the core keeps ingesting.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from tokenwatch.base.events import FloatArray, IntArray, LatencyMetric, NodeState
from tokenwatch.core._power_limits import PowerLimitChange
from tokenwatch.core._run_info import RunInfo
from tokenwatch.core.alerts import Alert
from tokenwatch.core.baseline.view import BaselineView
from tokenwatch.core.causes._cause import Cause
from tokenwatch.core.fleet.groups import FleetGroups
from tokenwatch.core.fleet.table import FleetTable
from tokenwatch.core.node_spread import NodeSpread
from tokenwatch.core.run_clock import RunClock
from tokenwatch.core.summary import RunSummary
from tokenwatch.core.verdict.view import VerdictView

# Why a GPU's telemetry is (not) shown, per GPU: the codes of GpuTable.freshness.
GPU_FRESHNESS: tuple[str, ...] = ("fresh", "stale", "down", "never")
FRESH, STALE_GPU, DOWN_GPU, NEVER_REPORTED = range(4)


@dataclass(frozen=True, slots=True)
class Aggregate:
    """Rack-wide figures at the snapshot time.

    ``tokens_per_s`` is over the last window; ``tokens_per_s_cumulative`` is the sum of the
    nodes' measured means (generated tokens / own duration), the published rack figure's method.
    """

    tokens_per_s: float
    tokens_per_s_cumulative: float
    per_gpu_tokens_per_s: float
    samples_per_s: float
    nodes: int
    nodes_up: int  # healthy: running or finished (not down, not stale)
    gpus: int
    gpus_reporting: int
    power_w: float
    power_limit_w: float
    tokens_per_joule: float
    energy_j: float  # GPU energy so far: from the GPUs' energy counters where they have them
    tokens_done: int
    samples_done: int
    prompt_tokens_done: int
    # Where energy_j comes from (core/energy.py): "counter", "power" (integrated), "mixed", "" (none yet).
    energy_source: str = ""
    run_tokens_per_joule: float = math.nan  # generated tokens so far / energy_j


@dataclass(frozen=True, slots=True)
class RunFigures:
    """The run's result once it has ended: what the headline shows beside the final tokens/s instead of
    the last window's figures (which, at the end, are the drain: a few nodes finishing their last
    samples). The same figures as the run summary's.

    ``tokens_per_s`` is the final aggregate (the sum of the nodes' measured means, the published rack
    figure); ``per_gpu_tokens_per_s`` divides it by the GPUs that took part (``gpus``: those of the
    nodes that did work); ``power_mean_w`` is the energy over the run time; ``tokens_per_joule`` the
    generated tokens over that energy. Power figures are NaN when no GPU reported power.
    """

    tokens_per_s: float
    per_gpu_tokens_per_s: float
    gpus: int | None  # None only where a node's GPU count is unknown (result folders)
    power_mean_w: float
    tokens_per_joule: float
    duration_s: float
    nodes_finished: int
    complete: bool  # False: the run was interrupted
    note: str = ""  # the nodes MLPerf's figure has no result for (core/final_figure.py); "" when none


@dataclass(frozen=True, slots=True)
class StoppedNode:
    """A node that is down or stale: listed apart from the running ones, with its last figures and why.

    ``since_s`` is the run time it went down (or last reported, for a stale node; NaN if it never did);
    ``mean_tokens_per_s`` its measured mean up to then (NaN if it did no work).
    """

    name: str
    state: NodeState  # "down" | "stale"
    since_s: float
    reason: str
    mean_tokens_per_s: float
    progress_pct: float


@dataclass(frozen=True, slots=True, eq=False)
class NodeColumns:
    """The node table's columns no fleet board draws: made when first read (:class:`Later`), from private
    copies taken with the snapshot, so they are the figures of its time whenever they are read. The
    sparklines are one of them: at 18,000 nodes their rates were ~4 ms of a board refresh; the copy of the
    ring rows they are made from ~1 ms."""

    state: tuple[NodeState, ...]
    delta_vs_median_pct: FloatArray
    sm_clock_mhz: FloatArray
    hbm_used_mib: FloatArray
    temp_c: FloatArray
    energy_source: tuple[str, ...]
    cause_text: tuple[str, ...]
    # (nodes, points) recent per-tick rates, oldest first; NaN while the node was down or stale
    sparkline_tokens_per_s: FloatArray


class Later:
    """:class:`NodeColumns` made on first read by ``make`` (which reads only what the snapshot holds, never
    the core's state: that goes on changing). At 1,000 racks a snapshot's 18,000 nodes' labels and GPU
    columns were ~8 ms of a board refresh that draws none of them. Safe to read from two threads (each
    may make them; both get the same figures)."""

    __slots__ = ("_columns", "_make")

    def __init__(self, make: Callable[[], NodeColumns]) -> None:
        self._make: Callable[[], NodeColumns] | None = make
        self._columns: NodeColumns | None = None

    @classmethod
    def now(cls, columns: NodeColumns) -> Later:
        later = cls(lambda: columns)
        later._columns, later._make = columns, None
        return later

    @property
    def made(self) -> bool:
        return self._make is None

    def get(self) -> NodeColumns:
        make = self._make
        if make is None:
            assert self._columns is not None
            return self._columns
        columns = make()
        self._columns = columns  # before _make is dropped: a reader that finds it dropped finds these
        self._make = None
        return columns


@dataclass(frozen=True, slots=True, eq=False)
class NodeTable:
    """One row per node, columnar. Throughput in tokens/s, power in W, clocks in MHz. The columns of
    :class:`NodeColumns` (state, delta, SM clock, HBM, temperature, energy source, cause text,
    sparklines) are made when first read (``later``)."""

    names: tuple[str, ...]
    reason: tuple[str, ...]
    tokens_per_s: FloatArray  # over the window; NaN for a down or stale node (no live figure)
    mean_tokens_per_s: FloatArray  # generated tokens / own measured duration (a stopped node's last)
    mean_samples_per_s: FloatArray
    progress_pct: FloatArray
    samples_done: IntArray
    tokens_done: IntArray
    power_w: FloatArray  # sum over the node's fresh GPUs (NaN when none is fresh: down, stale)
    straggler: np.ndarray  # bool
    throttling: np.ndarray  # bool
    later: Later
    # Generated tokens so far over the node's GPU energy so far (core/energy.py).
    tokens_per_joule: FloatArray = field(default_factory=lambda: np.zeros(0))
    # A straggler's cause hint (None: nothing to explain; core/causes/_judge.py), and its text ("" none): what
    # the node table, the JSONL and the fleet table's worst_cause show.
    causes: tuple[Cause | None, ...] = ()

    @property
    def state(self) -> tuple[NodeState, ...]:
        return self.later.get().state

    @property
    def delta_vs_median_pct(self) -> FloatArray:
        """The windowed rate vs the median of running nodes (negative = slower)."""
        return self.later.get().delta_vs_median_pct

    @property
    def sm_clock_mhz(self) -> FloatArray:
        """Mean over fresh GPUs."""
        return self.later.get().sm_clock_mhz

    @property
    def hbm_used_mib(self) -> FloatArray:
        """Sum over fresh GPUs."""
        return self.later.get().hbm_used_mib

    @property
    def temp_c(self) -> FloatArray:
        """The hottest fresh GPU."""
        return self.later.get().temp_c

    @property
    def energy_source(self) -> tuple[str, ...]:
        """Where each node's energy comes from: "counter" / "power", "" none (core/energy.py)."""
        return self.later.get().energy_source

    @property
    def cause_text(self) -> tuple[str, ...]:
        return self.later.get().cause_text

    @property
    def sparkline_tokens_per_s(self) -> FloatArray:
        """(nodes, points) recent per-tick rates, oldest first; NaN while the node was down or stale."""
        return self.later.get().sparkline_tokens_per_s

    def index(self, name: str) -> int:
        return self.names.index(name)


@dataclass(frozen=True, slots=True, eq=False)
class GpuTable:
    """Latest telemetry as (nodes, gpus_per_node, len(GPU_METRICS)).

    Only fresh readings are values: a GPU whose latest sample is older than the staleness limit, or
    whose node is down, or that never reported, is NaN here, and ``freshness`` (codes into
    :data:`GPU_FRESHNESS`) says which of those it is.
    """

    values: FloatArray
    throttle_reasons: np.ndarray  # (nodes, gpus) uint64
    freshness: np.ndarray  # (nodes, gpus) int8 codes: 0 fresh, 1 stale, 2 down, 3 never reported

    def metric(self, name: str) -> FloatArray:
        from tokenwatch.base.events import GPU_METRICS

        return self.values[:, :, GPU_METRICS.index(name)]


@dataclass(frozen=True, slots=True, eq=False)
class LatencyStats:
    """One latency metric over the run so far (rack-wide), in seconds."""

    metric: LatencyMetric
    count: int
    p50: float
    p90: float
    p99: float
    mean: float
    max: float
    bucket_values_s: FloatArray  # non-empty log buckets' representative values
    bucket_counts: IntArray
    # The percentiles, mean and max are LoadGen's exact figures (a one-node run whose LoadGen wrote its
    # result, core/_loadgen_latency.py), not estimates from the histogram's buckets ("~" on screen).
    exact: bool = False


@dataclass(frozen=True, slots=True, eq=False)
class Timeline:
    """Aggregate tokens/s over the whole run (downsampled points) and its steady-state mean."""

    times: FloatArray
    tokens_per_s: FloatArray
    power_w: FloatArray
    steady_mean_tokens_per_s: float


@dataclass(frozen=True, slots=True, eq=False)
class RackSnapshot:
    """Everything a front end draws at run time ``t``.

    ``node_spread`` is over the nodes that are running or finished; down and stale nodes are in
    ``stopped_nodes`` instead, with their last figures. Once the run has ended, ``run_figures`` holds
    the run's headline figures, ``summary`` the table and ``banner`` what happened.
    """

    t: float
    run: RunInfo
    ended: bool
    end_reason: str
    progress_pct: float | None
    clock: RunClock  # the run's one clock: nominal length, projected (or actual) end, ETA
    aggregate: Aggregate
    node_spread: NodeSpread
    stragglers: tuple[str, ...]
    nodes: NodeTable
    gpus: GpuTable
    latency: Mapping[LatencyMetric, LatencyStats]
    timeline: Timeline
    alerts: tuple[Alert, ...]  # newest first, bounded
    active_alerts: tuple[Alert, ...]
    sla_s: Mapping[LatencyMetric, float]
    summary: RunSummary | None = None  # the run's result in the published-table form, once it has ended
    banner: str = ""  # what happened, once it has ended ("ended: 17 of 18 nodes finished, ...")
    stopped_nodes: tuple[StoppedNode, ...] = ()  # down and stale nodes, in node order
    run_figures: RunFigures | None = None  # once ended: the headline figures over the whole run
    verdict: VerdictView | None = None  # the MLPerf verdict: forecast, rules, start-of-run check
    fleet: FleetTable | None = None  # one row per rack, for a run of more than one rack
    # The fleet's racks by site and row, where the run places them (core/fleet/groups.py).
    fleet_groups: FleetGroups | None = None
    # The GPUs' power-limit changes so far, oldest first (core/_power_limits.py): the timelines mark them.
    power_limit_changes: tuple[PowerLimitChange, ...] = ()
    baseline: BaselineView | None = None  # the run against its reference run (--baseline)

    @property
    def eta_s(self) -> float | None:
        """Run time left until the run's end, as its clock says (0 once ended, None when unknown)."""
        return self.clock.eta_s
