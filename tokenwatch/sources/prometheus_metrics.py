"""Inference-server and dcgm-exporter Prometheus scrapes (text exposition) -> events.

Parsing is prometheus_client's own text parser. Series are matched by *sample* name (e.g.
``vllm:generation_tokens_total``, ``..._bucket``), so a scrape without ``# TYPE`` lines reads the same.

* Counters (generated / prompt tokens, finished requests) become cumulative ``Progress``, with reset
  handling per series: a series that goes backwards restarted (server restart), so what it had counted
  is kept and the new value added; several series (engines, finish reasons) are summed per node. The
  core turns cumulative progress into rates.
* Histograms (TTFT, TPOT / inter-token latency, end-to-end) become per-scrape bucket deltas: one
  ``LatencyBatch`` per node and metric whose values are the buckets' midpoints (the last finite bound
  for ``+Inf``) and whose counts are the new observations, so they merge into the core's log histograms.
* Gauges (running / waiting requests, KV-cache usage) are kept in :attr:`MetricsScrapeParser.gauges`.
* dcgm-exporter fields become one ``GpuSample`` per GPU (``gpu`` label).

The first scrape counts everything the server has counted since it started.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from tokenwatch.events import Event, GpuSample, LatencyBatch, LatencyMetric, Progress
from tokenwatch.sources.lines import NoticeLog
from tokenwatch.sources.prometheus_exposition import Series, parse_exposition

# Counts above 2**53 are not whole numbers as floats (and far beyond any real run): a damaged scrape.
_MAX_BUCKET_COUNT = float(2**53)


@dataclass(frozen=True, slots=True)
class ServerPreset:
    """Sample names per role; in each tuple the first family present in a scrape is used."""

    tokens: tuple[str, ...] = ()
    prompt_tokens: tuple[str, ...] = ()
    samples: tuple[str, ...] = ()
    histograms: Mapping[LatencyMetric, tuple[str, ...]] = field(default_factory=dict)
    gauges: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


PRESETS: dict[str, ServerPreset] = {
    "vllm": ServerPreset(
        tokens=("vllm:generation_tokens_total",),
        prompt_tokens=("vllm:prompt_tokens_total",),
        samples=("vllm:request_success_total",),
        histograms={
            "ttft": ("vllm:time_to_first_token_seconds",),
            # vLLM renamed TPOT to inter-token latency; newer servers export both (same data).
            "tpot": ("vllm:time_per_output_token_seconds", "vllm:inter_token_latency_seconds"),
            "e2e": ("vllm:e2e_request_latency_seconds",),
        },
        gauges={
            "running": ("vllm:num_requests_running",),
            "waiting": ("vllm:num_requests_waiting",),
            "kv_cache_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
        },
    ),
    "sglang": ServerPreset(
        tokens=("sglang:generation_tokens_total",),
        prompt_tokens=("sglang:prompt_tokens_total",),
        samples=("sglang:num_requests_total",),
        histograms={
            "ttft": ("sglang:time_to_first_token_seconds",),
            "tpot": ("sglang:time_per_output_token_seconds", "sglang:inter_token_latency_seconds"),
            "e2e": ("sglang:e2e_request_latency_seconds",),
        },
        gauges={
            "running": ("sglang:num_running_reqs",),
            "waiting": ("sglang:num_queue_reqs",),
            "kv_cache_usage": ("sglang:token_usage",),
        },
    ),
    # trtllm-serve's /prometheus/metrics has no token counters: tokens_done is None (samples only).
    "trtllm": ServerPreset(
        samples=("trtllm_request_success_total", "trtllm_num_requests_completed_total"),
        histograms={
            "ttft": ("trtllm_time_to_first_token_seconds",),
            "tpot": ("trtllm_time_per_output_token_seconds",),
            "e2e": ("trtllm_e2e_request_latency_seconds",),
        },
        gauges={
            "running": ("trtllm_num_requests_running",),
            "waiting": ("trtllm_num_requests_waiting",),
            "kv_cache_usage": ("trtllm_kv_cache_utilization",),
        },
    ),
    "dcgm": ServerPreset(),
}

# dcgm-exporter field -> (GpuSample attribute, scale). DRAM_ACTIVE is a 0..1 ratio: HBM busy in %.
DCGM_FIELDS: dict[str, tuple[str, float]] = {
    "DCGM_FI_DEV_POWER_USAGE": ("power_w", 1.0),
    "DCGM_FI_DEV_POWER_MGMT_LIMIT": ("power_limit_w", 1.0),
    "DCGM_FI_DEV_ENFORCED_POWER_LIMIT": ("power_limit_w", 1.0),
    "DCGM_FI_DEV_SM_CLOCK": ("sm_clock_mhz", 1.0),
    "DCGM_FI_DEV_MEM_CLOCK": ("mem_clock_mhz", 1.0),
    "DCGM_FI_DEV_FB_USED": ("hbm_used_mib", 1.0),
    "DCGM_FI_DEV_FB_TOTAL": ("hbm_total_mib", 1.0),
    "DCGM_FI_PROF_DRAM_ACTIVE": ("hbm_busy_pct", 100.0),
    "DCGM_FI_DEV_MEM_COPY_UTIL": ("hbm_busy_pct", 1.0),  # fallback: the same figure as nvidia-smi's
    "DCGM_FI_DEV_GPU_UTIL": ("util_pct", 1.0),
    "DCGM_FI_DEV_GPU_TEMP": ("temp_c", 1.0),
}
DCGM_REASON_FIELDS = ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS")
_FB_PARTS = ("DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_RESERVED")
_MAX_GPU = 4095


@dataclass(slots=True)
class _Counter:
    last: float = 0.0
    offset: float = 0.0  # what earlier lives of this series counted (before resets)

    def update(self, value: float) -> float:
        if value < self.last:
            self.offset += self.last
        self.last = value
        return self.offset + value


class MetricsScrapeParser:
    """One scrape at a time: ``parse(text, t)`` -> events at run time ``t``.

    ``node`` names the node of every series; or ``node_label`` (e.g. ``Hostname``, ``instance``) reads
    it from each series' labels (``node`` then covers series without that label). With ``nodes``
    given, series of other nodes are skipped (with one Notice per unknown name).
    """

    def __init__(
        self, preset: str, node: str | None = None, node_label: str | None = None, nodes: Sequence[str] = ()
    ) -> None:
        if preset not in PRESETS:
            raise ValueError(f"unknown metrics preset {preset!r} (known: {', '.join(sorted(PRESETS))})")
        if node is None and node_label is None:
            raise ValueError("metrics: give the node, or the label that names it (node_label)")
        self.preset_name = preset
        self.preset = PRESETS[preset]
        self.node = node
        self.node_label = node_label
        self.nodes = frozenset(nodes)
        self.source = f"metrics:{preset}"
        self.notices = NoticeLog(self.source, node)
        self.gauges: dict[str, dict[str, float]] = {}
        self._counters: dict[tuple[str, str, tuple[tuple[str, str], ...]], _Counter] = {}
        self._buckets: dict[tuple[str, str, tuple[tuple[str, str], ...]], np.ndarray] = {}
        self._unknown_nodes: set[str] = set()
        self._warned_unplaced = False
        self._warned_no_gpu = False
        self.scrapes = 0

    # ------------------------------------------------------------------ parse
    def parse(self, text: str, t: float) -> list[Event]:
        out: list[Event] = []
        series, bad_lines = parse_exposition(text)
        for number, line in bad_lines:
            self.notices.warn(out, t, f"line {number}: not a metric line, skipped: {line}")
        self.scrapes += 1
        by_node: dict[str, list[Series]] = {}
        unplaced = 0
        for item in series:
            node = self._node_of(item.labels, t, out)
            if node is not None:
                by_node.setdefault(node, []).append(item)
            elif item.labels.get(self.node_label or "") is None:
                unplaced += 1
        if unplaced and not self._warned_unplaced:
            self._warned_unplaced = True
            self.notices.warn(out, t, f"{unplaced} series without the {self.node_label!r} label skipped")
        for node, items in by_node.items():
            if self.preset_name == "dcgm":
                out += self._gpu_samples(node, items, t, out)
            else:
                self._server(node, items, t, out)
        return out

    def _node_of(self, labels: Mapping[str, str], t: float, out: list[Event]) -> str | None:
        node = labels.get(self.node_label) if self.node_label else None
        node = node or self.node
        if node is None:
            return None
        if self.nodes and node not in self.nodes:
            if node not in self._unknown_nodes:
                self._unknown_nodes.add(node)
                self.notices.warn(out, t, f"series of node {node!r}, not one of the run's nodes: skipped")
            return None
        return node

    def _key(self, labels: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
        return tuple(sorted((k, v) for k, v in labels.items() if k not in ("le", self.node_label)))

    # ----------------------------------------------------------- inference server
    def _server(self, node: str, items: list[Series], t: float, out: list[Event]) -> None:
        names = {s.name for s in items}
        totals: dict[str, float | None] = {}
        for role, wanted in (
            ("tokens", self.preset.tokens),
            ("prompt", self.preset.prompt_tokens),
            ("samples", self.preset.samples),
        ):
            family = next((n for n in wanted if n in names), None)
            if family is not None:
                self._update_counters(node, family, items)
            # A family missing from this scrape (a bad line) keeps its last total: never backwards.
            totals[role] = self._counter_total(node, wanted)
        if any(v is not None for v in totals.values()):
            samples, prompt = totals["samples"], totals["prompt"]
            out.append(
                Progress(
                    t,
                    node,
                    None if samples is None else round(samples),
                    None if totals["tokens"] is None else round(totals["tokens"]),
                    None if prompt is None else round(prompt),
                )
            )
        for metric, families in self.preset.histograms.items():
            family = next((f for f in families if f + "_bucket" in names), None)
            if family is not None:
                batch = self._histogram_delta(node, metric, family, items, t, out)
                if batch is not None:
                    out.append(batch)
        for gauge, families in self.preset.gauges.items():
            family = next((f for f in families if f in names), None)
            if family is not None:
                values = [s.value for s in items if s.name == family and math.isfinite(s.value)]
                if values:
                    self.gauges.setdefault(node, {})[gauge] = float(sum(values))

    def _update_counters(self, node: str, family: str, items: list[Series]) -> None:
        for item in items:
            if item.name == family and math.isfinite(item.value) and item.value >= 0:
                key = (node, family, self._key(item.labels))
                self._counters.setdefault(key, _Counter()).update(item.value)

    def _counter_total(self, node: str, families: tuple[str, ...]) -> float | None:
        """Sum of the node's series of the first of ``families`` ever seen (None: none seen yet)."""
        for family in families:
            parts = [
                c.offset + c.last for (n, f, _), c in self._counters.items() if n == node and f == family
            ]
            if parts:
                return float(sum(parts))
        return None

    def _histogram_delta(
        self, node: str, metric: LatencyMetric, family: str, items: list[Series], t: float, out: list[Event]
    ) -> LatencyBatch | None:
        per_series: dict[tuple[tuple[str, str], ...], list[tuple[float, float]]] = {}
        for item in items:
            if item.name == family + "_bucket" and math.isfinite(item.value) and item.value >= 0:
                try:
                    bound = float(item.labels.get("le", ""))
                except ValueError:
                    continue
                if not math.isnan(bound):
                    per_series.setdefault(self._key(item.labels), []).append((bound, item.value))
        values: list[float] = []
        counts: list[int] = []
        for labels, buckets in per_series.items():
            buckets.sort()
            bounds = np.array([b for b, _ in buckets], dtype=np.float64)
            cumulative = np.array([c for _, c in buckets], dtype=np.float64)
            key = (node, family, labels)
            previous = self._buckets.get(key)
            self._buckets[key] = cumulative
            if previous is not None and previous.shape == cumulative.shape and (cumulative >= previous).all():
                cumulative = cumulative - previous  # the usual case: new observations since last scrape
            per_bucket = np.diff(cumulative, prepend=0.0)
            if (per_bucket > _MAX_BUCKET_COUNT).any():
                self.notices.warn(
                    out, t, f"{family}: a bucket count beyond {_MAX_BUCKET_COUNT:.0e}, series skipped"
                )
                continue
            if (per_bucket < 0).any():
                self.notices.warn(out, t, f"{family}: bucket counts not increasing with le, clipped")
                per_bucket = np.maximum(per_bucket, 0.0)
            lower = np.concatenate(([0.0], bounds[:-1]))
            mids = np.where(np.isinf(bounds), lower, (lower + bounds) / 2.0)
            whole = np.round(per_bucket)  # bucket counts are whole observations; keep those that are some
            keep = whole > 0
            values += mids[keep].tolist()
            counts += whole[keep].astype(np.int64).tolist()
        if not values:
            return None
        return LatencyBatch(t, node, metric, np.array(values, np.float64), np.array(counts, np.int64))

    # --------------------------------------------------------------- dcgm
    def _gpu_samples(self, node: str, items: list[Series], t: float, out: list[Event]) -> list[Event]:
        readings: dict[int, dict[str, list[float]]] = {}
        no_gpu = 0
        for item in items:
            wanted = item.name in DCGM_FIELDS or item.name in DCGM_REASON_FIELDS or item.name in _FB_PARTS
            if not wanted:
                continue
            gpu_text = item.labels.get("gpu", "")
            if not (gpu_text.isascii() and gpu_text.isdigit()) or int(gpu_text) > _MAX_GPU:
                no_gpu += 1
                continue
            if math.isfinite(item.value):
                readings.setdefault(int(gpu_text), {}).setdefault(item.name, []).append(item.value)
        if no_gpu and not self._warned_no_gpu:
            self._warned_no_gpu = True
            self.notices.warn(out, t, f"{no_gpu} GPU series without a usable gpu label skipped")
        samples: list[Event] = []
        for gpu in sorted(readings):
            fields = {name: float(np.mean(v)) for name, v in readings[gpu].items()}  # MIG: mean of instances
            values: dict[str, float] = {}
            for name, (attribute, scale) in DCGM_FIELDS.items():
                if name in fields and attribute not in values:
                    values[attribute] = fields[name] * scale
            if (
                "hbm_total_mib" not in values
                and "DCGM_FI_DEV_FB_USED" in fields
                and "DCGM_FI_DEV_FB_FREE" in fields
            ):
                values["hbm_total_mib"] = sum(fields.get(part, 0.0) for part in _FB_PARTS)
            mask = next((int(fields[f]) for f in DCGM_REASON_FIELDS if f in fields), 0)
            mask = mask if 0 <= mask < 1 << 64 else 0
            samples.append(GpuSample(t, node, gpu, throttle_reasons=mask, **values))
        return samples
