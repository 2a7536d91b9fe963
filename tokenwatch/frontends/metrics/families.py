"""The metrics tokenwatch serves: a :class:`MetricsView` (read from the core) as metric families.

Names follow Prometheus conventions (base units: seconds, watts, hertz, bytes, ratios 0..1; counters
end in ``_total``). Per-node series carry ``node``, per-GPU series ``node`` and ``gpu``.
Missing telemetry (NaN) is left out rather than served as NaN, so Prometheus shows a gap.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from tokenwatch.base.events import GPU_METRICS, NODE_STATES, FloatArray, LatencyMetric
from tokenwatch.core.latency_buckets import NodeLatencyBuckets

if TYPE_CHECKING:
    from tokenwatch.core.rack import RackCore
    from tokenwatch.core.snapshot import RackSnapshot

PREFIX = "tokenwatch"

# (metric name, help, GPU_METRICS column, scale to base units)
GPU_FAMILIES: tuple[tuple[str, str, str, float], ...] = (
    ("gpu_power_watts", "GPU power draw (W).", "power_w", 1.0),
    ("gpu_power_limit_watts", "GPU power limit (W).", "power_limit_w", 1.0),
    ("gpu_sm_clock_hertz", "GPU SM clock (Hz).", "sm_clock_mhz", 1e6),
    ("gpu_memory_clock_hertz", "GPU memory clock (Hz).", "mem_clock_mhz", 1e6),
    ("gpu_hbm_used_bytes", "GPU HBM in use (bytes).", "hbm_used_mib", 1048576.0),
    ("gpu_hbm_total_bytes", "GPU HBM size (bytes).", "hbm_total_mib", 1048576.0),
    ("gpu_hbm_busy_ratio", "Share of time the HBM was busy (0..1).", "hbm_busy_pct", 0.01),
    ("gpu_utilization_ratio", "GPU utilisation (0..1).", "util_pct", 0.01),
    ("gpu_temperature_celsius", "GPU temperature (degrees C).", "temp_c", 1.0),
)
LATENCY_HELP: dict[LatencyMetric, str] = {
    "ttft": "Time to first token (s).",
    "tpot": "Time per output token (s).",
    "e2e": "End-to-end request latency (s).",
}


@dataclass(frozen=True, slots=True, eq=False)
class MetricsView:
    """Everything one scrape serves, taken at one instant (on the thread that feeds the core)."""

    snapshot: RackSnapshot
    latency: dict[LatencyMetric, NodeLatencyBuckets] = field(default_factory=dict)


def take_view(core: RackCore) -> MetricsView | None:
    """None before the run has started (then only the process is up, no run metrics)."""
    if not core.started:
        return None
    return MetricsView(core.snapshot(), core.latency_buckets())


@dataclass(frozen=True, slots=True, eq=False)
class Family:
    """One metric family. ``labels`` are pre-rendered label sets (``node="a",gpu="0"``, sorted by name,
    as the text format has them); ``values`` align with them. ``kind``: gauge, counter or histogram."""

    name: str
    help: str
    kind: str
    labels: Sequence[str]
    values: FloatArray
    histogram: NodeLatencyBuckets | None = None


def _f(values: Sequence[float] | np.ndarray) -> FloatArray:
    return np.asarray(values, dtype=np.float64)


def _with(rack: str, labels: str) -> str:
    """A rack's label set joined to others (``rack`` sorts before ``run``, ``stat``: names given here)."""
    return f"{rack},{labels}" if rack and labels else rack or labels


def rack_families(snap: RackSnapshot, rack: str = "") -> list[Family]:
    """The run-wide series; ``rack`` is the label set of the one rack the run is ("" for a fleet)."""
    agg, run, spread = snap.aggregate, snap.run, snap.node_spread

    def one(name: str, help_: str, value: float, kind: str = "gauge") -> Family:
        return Family(f"{PREFIX}_{name}", help_, kind, [rack], _f([value]))

    info_labels = _with(
        rack, f'run="{escape(run.name)}",scenario="{escape(run.scenario)}",source="{escape(run.source)}"'
    )
    families = [
        Family(f"{PREFIX}_run_info", "The run being watched (value 1).", "gauge", [info_labels], _f([1.0])),
        one("run_elapsed_seconds", "Run time so far (s).", snap.t),
        one("run_ended", "1 once the run has ended.", float(snap.ended)),
        one("rack_tokens_per_second", "Rack generated tokens/s over the core's window.", agg.tokens_per_s),
        one(
            "rack_measured_tokens_per_second",
            "Sum of the nodes' measured means (the published rack figure's method).",
            agg.tokens_per_s_cumulative,
        ),
        one("rack_per_gpu_tokens_per_second", "Rack tokens/s per GPU.", agg.per_gpu_tokens_per_s),
        one("rack_samples_per_second", "Rack samples/s over the window.", agg.samples_per_s),
        one("rack_power_watts", "Rack GPU power (W), running nodes.", agg.power_w),
        one("rack_power_limit_watts", "Sum of the GPUs' power limits (W).", agg.power_limit_w),
        one("rack_tokens_per_joule", "Windowed tokens/s per W of rack GPU power.", agg.tokens_per_joule),
        one("rack_energy_joules", "GPU energy since the run start (J).", agg.energy_j, "counter"),
        one(
            "rack_generated_tokens",
            "Generated tokens since the run start.",
            float(agg.tokens_done),
            "counter",
        ),
        one("rack_samples", "Samples completed since the run start.", float(agg.samples_done), "counter"),
        one("rack_nodes", "Nodes in the run.", float(agg.nodes)),
        one("rack_nodes_up", "Nodes running or finished (not down, not stale).", float(agg.nodes_up)),
        one("rack_gpus", "GPUs in the run.", float(agg.gpus)),
        one("rack_gpus_reporting", "GPUs reporting telemetry.", float(agg.gpus_reporting)),
        one(
            "rack_node_spread_percent",
            "(max - min) / min of the nodes' measured tokens/s (%).",
            spread.spread_pct,
        ),
        Family(
            f"{PREFIX}_rack_node_tokens_per_second",
            "Max, min, mean and median of the nodes' measured tokens/s.",
            "gauge",
            [_with(rack, f'stat="{k}"') for k in ("max", "mean", "median", "min")],
            _f([spread.max, spread.mean, spread.median, spread.min]),
        ),
        one("alerts_active", "Alerts active now.", float(len(snap.active_alerts))),
    ]
    forecast = snap.verdict.forecast if snap.verdict is not None else None
    if forecast is not None:  # the rack's own projection, for a fleet board to show per rack
        band = forecast.tokens_per_s
        families += [
            one(
                "rack_projected_tokens_per_second",
                "The MLPerf forecast: the rack's projected result (tokens/s).",
                band.value if band is not None else math.nan,
            ),
            one(
                "rack_projection_warming_up",
                "The MLPerf forecast: 1 while the pace still climbs (no projected figure is stated), else 0.",
                float(forecast.warming_up),
            ),
            one(
                "rack_projected_valid",
                "The MLPerf forecast: 1 projected VALID, 0 INVALID (absent while undecided).",
                math.nan if forecast.valid is None else float(forecast.valid),
            ),
        ]
    if snap.progress_pct is not None:
        families.insert(3, one("run_progress_ratio", "Run progress (0..1).", snap.progress_pct / 100.0))
    return families


def node_families(snap: RackSnapshot, node_labels: Sequence[str]) -> list[Family]:
    nodes = snap.nodes
    state = np.array([NODE_STATES.index(s) for s in nodes.state])
    status_labels = [f'{lab},status="{s}"' for lab in node_labels for s in NODE_STATES]
    status_values = (state[:, None] == np.arange(len(NODE_STATES))[None, :]).astype(np.float64).reshape(-1)

    def fam(name: str, help_: str, values: np.ndarray, kind: str = "gauge") -> Family:
        return Family(f"{PREFIX}_{name}", help_, kind, node_labels, _f(values))

    return [
        fam("node_tokens_per_second", "Node generated tokens/s over the window.", nodes.tokens_per_s),
        fam(
            "node_measured_tokens_per_second",
            "Node generated tokens / its own measured duration.",
            nodes.mean_tokens_per_s,
        ),
        fam(
            "node_generated_tokens",
            "Node generated tokens since the run start.",
            nodes.tokens_done,
            "counter",
        ),
        fam("node_samples", "Node samples completed since the run start.", nodes.samples_done, "counter"),
        fam(
            "node_up",
            "1 while the node is running, idle or finished.",
            np.isin(state, [NODE_STATES.index(s) for s in ("up", "finished", "idle")]),
        ),
        Family(
            f"{PREFIX}_node_status",
            "Node state (1 for the current one).",
            "gauge",
            status_labels,
            status_values,
        ),
        fam("node_straggler", "1 while the node is a straggler.", nodes.straggler),
        fam("node_throttling", "1 while a GPU of the node is throttling.", nodes.throttling),
        fam(
            "node_delta_vs_median_percent",
            "Windowed rate vs the median running node (%).",
            nodes.delta_vs_median_pct,
        ),
        fam("node_progress_ratio", "Node progress (0..1).", nodes.progress_pct / 100.0),
        fam("node_power_watts", "Node GPU power (W).", nodes.power_w),
        fam("node_gpus", "GPUs of the node.", np.full(len(nodes.names), float(snap.run.gpus_per_node))),
    ]


def gpu_families(snap: RackSnapshot, gpu_labels: Sequence[str]) -> list[Family]:
    values = snap.gpus.values.reshape(-1, len(GPU_METRICS))
    out = [
        Family(f"{PREFIX}_{name}", help_, "gauge", gpu_labels, values[:, GPU_METRICS.index(col)] * scale)
        for name, help_, col, scale in GPU_FAMILIES
    ]
    reporting = np.isfinite(values[:, GPU_METRICS.index("power_w")])
    reasons = np.where(reporting, snap.gpus.throttle_reasons.reshape(-1).astype(np.float64), np.nan)
    out.append(
        Family(
            f"{PREFIX}_gpu_throttle_reasons",
            "NVML clocks-event reasons bitmask.",
            "gauge",
            gpu_labels,
            reasons,
        )
    )
    return out


def latency_families(view: MetricsView, node_labels: Sequence[str]) -> list[Family]:
    return [
        Family(
            f"{PREFIX}_{metric}_seconds",
            LATENCY_HELP[metric],
            "histogram",
            node_labels,
            b.count.astype(float),
            b,
        )
        for metric, b in view.latency.items()
    ]


def escape(value: str) -> str:
    """A label value as the text format writes it (backslash, quote and newline escaped)."""
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")
