"""The typed event model: the only thing collectors produce and the core consumes.

Every event is a frozen, slotted dataclass. ``t`` is always seconds since run start (float).
Missing numeric telemetry is ``math.nan`` (a GPU that reports ``[N/A]``), never ``None``,
so batches stay plain float64 arrays.

Batch events (:class:`GpuBatch`, :class:`ProgressBatch`, :class:`LatencyBatch`) carry numpy arrays so
that a whole rack's tick travels as one record: the simulator and replay use them to keep
80-minute, 72-GPU runs within a few seconds. Array-bearing events compare by identity
(``eq=False``): compare them through :mod:`tokenwatch.recording.codec` instead. Their arrays are
made read-only when the event is made: an event may sit in a queue, a recording and the core at
once, so nobody may write into it afterwards (a producer that tried would now fail loudly).

Node references: single events name their node (``node="node07"``); batch events carry
``node_index`` into :attr:`RunStarted.nodes`, because a batch always follows its run's start.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias

import numpy as np
import numpy.typing as npt

Scenario = Literal["Offline", "Server"]
SCENARIOS: tuple[Scenario, ...] = ("Offline", "Server")
SourceKind = Literal["sim", "live", "replay"]
RunMode = SourceKind  # what a session runs as (sim, replay, a live watch): the kind of its source
# "idle": the node's sources answer but say nothing (an engine with no requests logs nothing); "stale":
# a source stopped answering, or nothing vouches for a silent node.
NodeState = Literal["up", "stale", "down", "finished", "idle"]
NODE_STATES: tuple[NodeState, ...] = ("up", "stale", "down", "finished", "idle")
# RunStarted.meta key: the nodes whose sources a live watch supervises itself (it says "stale" or "down"
# the moment one stops answering), so their silence is an idle engine, not a lost one.
VOUCHED_NODES_META = "sources_vouched"
LatencyMetric = Literal["ttft", "tpot", "e2e"]
LATENCY_METRICS: tuple[LatencyMetric, ...] = ("ttft", "tpot", "e2e")
NoticeLevel = Literal["info", "warning", "error"]

FloatArray: TypeAlias = npt.NDArray[np.float64]
IntArray: TypeAlias = npt.NDArray[np.int64]
UIntArray: TypeAlias = npt.NDArray[np.uint64]

NAN = math.nan

# Bounds every reader enforces (a recording line beyond them is skipped, a config refused): what a run
# may declare and how far its clock may run. 100,000 GPUs is ~20x a 64-rack NVL72 fleet; a year of run
# time is far beyond any benchmark, and keeps every loop over run time bounded.
MAX_RUN_GPUS = 100_000
MAX_RUN_TIME_S = 366 * 86_400.0


def _read_only(*arrays: np.ndarray | None) -> None:
    """Freeze a batch's arrays. Done here, once, rather than at each construction site, so that no
    producer (simulator, decoder, parsers, tests) can forget it; it costs a flag write per array
    (``setflags``: half the time of assigning ``flags.writeable``, which builds a flags object)."""
    for array in arrays:
        if array is not None:
            array.setflags(write=False)


@dataclass(frozen=True, slots=True)
class RunStarted:
    """A run begins. ``wall_epoch`` is the Unix time of ``t == 0``."""

    t: float
    name: str
    scenario: Scenario
    nodes: tuple[str, ...]
    gpus_per_node: int
    nominal_duration_s: float | None
    total_samples: int | None
    source: SourceKind
    wall_epoch: float
    meta: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class GpuSample:
    """One GPU's telemetry at ``t``. Units are in the names; ``math.nan`` = not reported.

    ``throttle_reasons`` is NVML's clocks-event-reasons bitmask (see :mod:`tokenwatch.base.throttle`).
    ``energy_j`` is the GPU's cumulative energy counter (NVML ``nvmlDeviceGetTotalEnergyConsumption``,
    dcgm ``DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION``, both mJ at the source), counted from whenever the
    driver started it: only its growth means anything. ``xid`` is the last XID error the GPU reported
    (0 none); ``nvlink_errors`` the cumulative count of its NVLink CRC, replay and recovery errors.
    """

    t: float
    node: str
    gpu: int
    power_w: float = NAN
    power_limit_w: float = NAN
    sm_clock_mhz: float = NAN
    mem_clock_mhz: float = NAN
    hbm_used_mib: float = NAN
    hbm_total_mib: float = NAN
    hbm_busy_pct: float = NAN
    util_pct: float = NAN
    temp_c: float = NAN
    throttle_reasons: int = 0
    energy_j: float = NAN
    hbm_temp_c: float = NAN
    xid: float = NAN
    nvlink_errors: float = NAN


# GpuSample's numeric fields in a fixed order: the columns of GpuBatch and of the core's GPU tables.
GPU_METRICS: tuple[str, ...] = (
    "power_w",
    "power_limit_w",
    "sm_clock_mhz",
    "mem_clock_mhz",
    "hbm_used_mib",
    "hbm_total_mib",
    "hbm_busy_pct",
    "util_pct",
    "temp_c",
    # Read where a source has them (older recordings lack these columns: they read as missing).
    "energy_j",
    "hbm_temp_c",
    "xid",
    "nvlink_errors",
)
# Columns a recording writes only when some GPU of the batch has a value, so a source without them
# (and every recording made before they existed) keeps its bytes.
OPTIONAL_GPU_METRICS: frozenset[str] = frozenset({"energy_j", "hbm_temp_c", "xid", "nvlink_errors"})


@dataclass(frozen=True, slots=True, eq=False)
class GpuBatch:
    """Many GPUs' telemetry at one ``t``: row i is GPU ``gpu[i]`` of node ``node_index[i]``.

    ``values`` has shape (rows, len(GPU_METRICS)), columns in :data:`GPU_METRICS` order.
    """

    t: float
    node_index: IntArray
    gpu: IntArray
    values: FloatArray
    throttle_reasons: UIntArray

    def __post_init__(self) -> None:
        _read_only(self.node_index, self.gpu, self.values, self.throttle_reasons)


@dataclass(frozen=True, slots=True)
class Progress:
    """A node's cumulative work at ``t``.

    ``tokens_done`` counts generated (output) tokens, as MLPerf's "Tokens per second" does;
    prompt tokens are kept apart in ``prompt_tokens_done``. ``None`` means "this source does not
    know" (a LoadGen trace counts samples, not tokens; a vLLM log the reverse), so two sources can
    report on one node without fighting. A counter that goes backwards is treated by the core as a
    source restart, never as negative work.
    """

    t: float
    node: str
    samples_done: int | None
    tokens_done: int | None
    prompt_tokens_done: int | None = None
    # A point a backlog's history fills in between two of its records (sources/progress_spread.py): the
    # counts as they rose, but no arrival of the source (its cadence is its records', not a second).
    filled: bool = False


@dataclass(frozen=True, slots=True, eq=False)
class ProgressBatch:
    """Cumulative work of several nodes at one ``t`` (arrays aligned on ``node_index``)."""

    t: float
    node_index: IntArray
    samples_done: IntArray
    tokens_done: IntArray
    prompt_tokens_done: IntArray | None = None
    filled: bool = False  # the points a backlog's history fills in (see Progress.filled)

    def __post_init__(self) -> None:
        _read_only(self.node_index, self.samples_done, self.tokens_done, self.prompt_tokens_done)


@dataclass(frozen=True, slots=True, eq=False)
class LatencyBatch:
    """Latency observations of one node and metric, in seconds.

    ``counts`` is ``None`` for raw observations (each value seen once) or the weight of each
    value for histogram deltas (e.g. one value per bucket with its count), so raw samples and
    Prometheus/simulator bucket deltas travel as the same record and merge the same way.
    """

    t: float
    node: str
    metric: LatencyMetric
    values_s: FloatArray
    counts: IntArray | None = None

    def __post_init__(self) -> None:
        _read_only(self.values_s, self.counts)


@dataclass(frozen=True, slots=True, eq=False)
class LatencyLimitCounts:
    """Per node, cumulative: samples judged against a latency limit and how many exceeded it.

    "Exceeded" is ``latency > limit``, strictly, as LoadGen counts for its percentile and early-stopping
    rules. Sent by sources that see every sample but ship latencies as histograms (the simulator), so the
    MLPerf verdict's latency rules stay exact; arrays are aligned on ``node_index``; ``limit_s`` in seconds.
    """

    t: float
    metric: LatencyMetric
    limit_s: float
    node_index: IntArray
    judged: IntArray
    over: IntArray

    def __post_init__(self) -> None:
        _read_only(self.node_index, self.judged, self.over)


# The columns of RackFiguresBatch.values: what a fleet board needs of each rack, as a Prometheus server
# aggregates it from the rack's node series. Node counts and GPUs as floats (NaN = not known); rates in
# generated tokens/s (windowed: the rack exporters' own window, or rate() over the configured one);
# ``mean_*``: the largest and smallest measured mean (tokens / own duration) of the rack's healthy nodes,
# whose ratio is the rack's spread; ``worst_*`` / ``median_*`` over its running nodes' windowed rates;
# ``projected_*`` the rack's own MLPerf projection where its exporter serves one (valid: 1, 0 or NaN).
RACK_FIGURES: tuple[str, ...] = (
    "nodes_total",
    "nodes_up",
    "nodes_running",
    "gpus",
    "tokens_per_s",
    "power_w",
    "mean_max_tokens_per_s",
    "mean_min_tokens_per_s",
    "worst_tokens_per_s",
    "median_tokens_per_s",
    "projected_tokens_per_s",
    "projected_valid",
)


@dataclass(frozen=True, slots=True, eq=False)
class RackFiguresBatch:
    """Rack-level figures of a fleet at one ``t``, one row per rack (a fleet watched through the
    Prometheus server that already scrapes it, where the racks' nodes are not fetched one by one).

    ``values`` has shape (len(racks), len(RACK_FIGURES)), NaN = not known. ``down`` marks racks whose
    series are gone (their exporter stopped answering the server); ``worst_node`` is each rack's slowest
    running node ("" if none) and ``worst_cause`` a hint why ("" if none is known). ``places``: where
    racks that appeared since the run's start stand, ``(rack, site, row)`` ("" where a label is absent),
    said in the batch they first appear in (the run's start says where the others stand).
    """

    t: float
    racks: tuple[str, ...]
    values: FloatArray
    down: npt.NDArray[np.bool_]
    worst_node: tuple[str, ...]
    worst_cause: tuple[str, ...]
    places: tuple[tuple[str, str, str], ...] = ()

    def __post_init__(self) -> None:
        _read_only(self.values, self.down)


@dataclass(frozen=True, slots=True)
class LoadGenDetail:
    """Records of a node's LoadGen detail log (``mlperf_log_detail.txt``), key -> the log's own value.

    The settings (``requested_*``, ``effective_*``) and the queries LoadGen generated (``generated_*``) are
    sent as soon as the query plan is written, before the first query; the result (``result_*``,
    ``early_stopping_*``) once LoadGen has judged the run. Values are JSON scalars (seeds above 2**63
    stay exact). A simulated run sends its plan at t = 0. The MLPerf verdict is made from these.
    """

    t: float
    node: str
    values: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class EngineQueue:
    """An inference engine's queue on a node at ``t``: requests running and waiting, and its KV-cache use
    (%), as the server's gauges say (vLLM ``num_requests_running`` / ``num_requests_waiting``, SGLang
    ``num_running_reqs`` / ``num_queue_reqs``); summed over the node's engines; NaN = not reported."""

    t: float
    node: str
    running: float = NAN
    waiting: float = NAN
    kv_cache_pct: float = NAN


@dataclass(frozen=True, slots=True)
class NodeStatus:
    """A source's verdict on a node: up, stale, down or finished, with a human reason."""

    t: float
    node: str
    state: NodeState
    reason: str = ""


@dataclass(frozen=True, slots=True)
class LogLine:
    """A line of a node's harness log, kept for the node screen."""

    t: float
    node: str
    text: str


@dataclass(frozen=True, slots=True)
class Notice:
    """A message for the engineer: a skipped input line, a source error, a reconnect."""

    t: float
    level: NoticeLevel
    message: str
    node: str | None = None
    source: str | None = None


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """Run time passes with no data (live mode): lets the core notice stale nodes."""

    t: float


@dataclass(frozen=True, slots=True)
class RunEnded:
    t: float
    reason: str = "completed"


Event: TypeAlias = (
    RunStarted
    | GpuSample
    | GpuBatch
    | Progress
    | ProgressBatch
    | LatencyBatch
    | LatencyLimitCounts
    | LoadGenDetail
    | RackFiguresBatch
    | EngineQueue
    | NodeStatus
    | LogLine
    | Notice
    | Heartbeat
    | RunEnded
)

Emit: TypeAlias = Callable[[Event], Awaitable[None]]
"""How a collector hands an event to the stream (awaits when the bounded queue is full)."""


class Collector(Protocol):
    """A source of events. ``run`` returns when the source is exhausted; cancel it to stop early.

    A collector never raises for bad input or a lost source: it emits a ``Notice`` or a ``NodeStatus``
    and goes on (or returns), so one failing source never cancels its siblings.
    """

    name: str

    async def run(self, emit: Emit) -> None: ...


async def run_collector(collector: Collector, emit: Emit, now: Callable[[], float]) -> None:
    """Run ``collector`` to its end. Its failure becomes an error ``Notice`` ("NAME stopped: why", at
    run time ``now()``) in the stream, never an exception that cancels its siblings."""
    try:
        await collector.run(emit)
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # a failing source is news for the engineer, not a crash
        name = getattr(collector, "name", type(collector).__name__)
        await emit(Notice(now(), "error", f"{name} stopped: {exc}", source=name))
