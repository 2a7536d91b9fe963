"""Reads a fleet from Prometheus: instant queries every interval instead of one SSH connection per node.

Clusters of thousands of GPUs already scrape dcgm-exporter and their inference servers into
Prometheus; this collector asks Prometheus (``/api/v1/query``) for the latest value of each field,
maps the node label to the run's nodes, and emits the same events an SSH or NVML source would:
:class:`GpuBatch`, :class:`ProgressBatch` (cumulative counters) and :class:`LatencyBatch` (deltas of
the cumulative ``le`` buckets). An unreachable server or a bad query is a :class:`Notice`, once per
problem, never an exception; nodes with no data simply go stale in the core.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from tokenwatch.clock import Clock, MonotonicClock
from tokenwatch.collectors.prometheus_api import Sample, instant_query
from tokenwatch.collectors.prometheus_presets import GPU_FIELDS, LATENCY_FIELDS, build_queries
from tokenwatch.events import (
    GPU_METRICS,
    Emit,
    Event,
    GpuBatch,
    LatencyBatch,
    LatencyMetric,
    Notice,
    ProgressBatch,
)

MAX_NOTICES_PER_KIND = 20


class PrometheusQueryCollector:
    name = "prometheus"

    def __init__(
        self,
        *,
        url: str,
        nodes: Sequence[str],
        gpus_per_node: int,
        node_label: str = "node",
        interval_s: float = 5.0,
        gpu: bool = True,
        progress: bool = True,
        now: Callable[[], float],
        clock: Clock | None = None,
        gpu_label: str = "gpu",
        gpu_preset: str = "dcgm",
        progress_preset: str = "vllm",
        queries: Mapping[str, str] | None = None,
        timeout_s: float = 5.0,
        polls: int | None = None,
    ) -> None:
        """``now()`` gives run seconds for the events; ``queries`` overrides preset fields (see
        :mod:`tokenwatch.collectors.prometheus_presets`); ``polls`` stops after that many rounds."""
        self.url = url
        self.nodes = tuple(nodes)
        self.gpus_per_node = gpus_per_node
        self.interval_s = interval_s
        self.now = now
        self.clock = clock or MonotonicClock()
        self.timeout_s = timeout_s
        self.polls = polls
        self.queries = build_queries(
            gpu=gpu,
            progress=progress,
            gpu_preset=gpu_preset,
            progress_preset=progress_preset,
            overrides=queries or {},
            node_label=node_label,
            gpu_label=gpu_label,
        )
        self.node_label, self.gpu_label = node_label, gpu_label
        self._index = {n: i for i, n in enumerate(self.nodes)}
        self._last_counters = np.zeros((3, len(self.nodes)), np.int64)
        self._last_buckets: dict[tuple[str, int], tuple[tuple[float, ...], np.ndarray]] = {}
        self._failing: dict[str, str] = {}  # field -> current error (notice on change only)
        self._noticed: dict[str, set[str]] = {"unknown node": set(), "bad gpu": set()}
        self._reported: set[str] = set()

    # ----------------------------------------------------------------- loop
    async def run(self, emit: Emit) -> None:
        start = self.clock.time()
        done = 0
        while self.polls is None or done < self.polls:
            for event in await self.poll():
                await emit(event)
            done += 1
            if self.polls is not None and done >= self.polls:
                break
            await self.clock.sleep(max(0.0, start + done * self.interval_s - self.clock.time()))

    async def poll(self) -> list[Event]:
        """One round: every query at once (in threads), then the events they make."""
        t = self.now()
        fields = list(self.queries)
        answers = await asyncio.gather(
            *(asyncio.to_thread(self._query, field) for field in fields), return_exceptions=True
        )
        results: dict[str, list[Sample]] = {}
        events: list[Event] = []
        for field, answer in zip(fields, answers, strict=True):
            if isinstance(answer, BaseException):
                message = f"prometheus query {field!r} failed: {answer}"
                if self._failing.get(field) != message:
                    self._failing[field] = message
                    events.append(Notice(t, "warning", message, source=self.name))
                continue
            if field in self._failing:
                del self._failing[field]
                events.append(
                    Notice(t, "info", f"prometheus query {field!r} answers again", source=self.name)
                )
            results[field] = answer
        events += self._gpu_events(t, results)
        events += self._progress_events(t, results)
        events += self._latency_events(t, results)
        return events + self._pending_notices(t)

    def _query(self, field: str) -> list[Sample]:
        return instant_query(self.url, self.queries[field], self.timeout_s)

    # -------------------------------------------------------------- mapping
    def node_of(self, value: str | None) -> int | None:
        """The run's node for a label value: exact, then without ``:port``, then the short hostname."""
        if value is None:
            return None
        for candidate in (value, value.rsplit(":", 1)[0], value.split(".")[0]):
            i = self._index.get(candidate)
            if i is not None:
                return i
        self._noticed["unknown node"].add(value)
        return None

    def _gpu_of(self, value: str | None) -> int | None:
        try:
            g = int(value) if value is not None else -1
        except ValueError:
            g = -1
        if 0 <= g < self.gpus_per_node:
            return g
        self._noticed["bad gpu"].add(str(value))
        return None

    def _pending_notices(self, t: float) -> list[Event]:
        out: list[Event] = []
        for kind, values in self._noticed.items():
            fresh = sorted(values - self._reported)[:MAX_NOTICES_PER_KIND]
            if fresh:
                self._reported = self._reported | set(fresh)
                label = self.node_label if kind == "unknown node" else self.gpu_label
                out.append(
                    Notice(
                        t,
                        "warning",
                        f"prometheus: {label}={', '.join(fresh)} is not a node/GPU of this run; skipped",
                        source=self.name,
                    )
                )
            values.clear()
        return out

    # --------------------------------------------------------------- events
    def _gpu_events(self, t: float, results: Mapping[str, list[Sample]]) -> list[Event]:
        rows: dict[tuple[int, int], int] = {}
        cells: list[tuple[int, int, float]] = []  # row, column, value
        throttle: dict[int, int] = {}
        for field in GPU_FIELDS:
            for labels, value in results.get(field, ()):
                i, g = self.node_of(labels.get(self.node_label)), self._gpu_of(labels.get(self.gpu_label))
                if i is None or g is None:
                    continue
                row = rows.setdefault((i, g), len(rows))
                if field == "throttle_reasons":
                    throttle[row] = int(value) if math.isfinite(value) and 0 <= value < 2**63 else 0
                else:
                    cells.append((row, GPU_METRICS.index(field), value))
        if not rows:
            return []
        values = np.full((len(rows), len(GPU_METRICS)), np.nan)
        for row, col, value in cells:
            values[row, col] = value
        keys = list(rows)
        reasons = np.array([throttle.get(r, 0) for r in range(len(rows))], dtype=np.uint64)
        return [
            GpuBatch(
                t,
                np.array([k[0] for k in keys], np.int64),
                np.array([k[1] for k in keys], np.int64),
                values,
                reasons,
            )
        ]

    def _progress_events(self, t: float, results: Mapping[str, list[Sample]]) -> list[Event]:
        if "tokens" not in results:
            return []
        seen: dict[int, list[int | None]] = {}
        for slot, field in enumerate(("tokens", "samples", "prompt_tokens")):
            for labels, value in results.get(field, ()):
                i = self.node_of(labels.get(self.node_label))
                if i is None or not math.isfinite(value) or value < 0 or value >= 2**62:
                    continue
                seen.setdefault(i, [None, None, None])[slot] = round(value)
        nodes = sorted(i for i, v in seen.items() if v[0] is not None)
        if not nodes:
            return []
        counters = self._last_counters
        for i in nodes:
            for slot in range(3):
                counter = seen[i][slot]
                if counter is not None:
                    counters[slot, i] = counter  # a node missing samples keeps the last value it had
        index = np.array(nodes, np.int64)
        prompt = counters[2, index].copy() if "prompt_tokens" in results else None
        return [ProgressBatch(t, index, counters[1, index].copy(), counters[0, index].copy(), prompt)]

    def _latency_events(self, t: float, results: Mapping[str, list[Sample]]) -> list[Event]:
        events: list[Event] = []
        metric: LatencyMetric
        for metric in LATENCY_FIELDS:
            per_node: dict[int, list[tuple[float, float]]] = {}
            for labels, value in results.get(metric, ()):
                i = self.node_of(labels.get(self.node_label))
                try:
                    le = float(labels.get("le", "nan"))
                except ValueError:
                    continue
                if i is None or math.isnan(le) or not math.isfinite(value):
                    continue
                per_node.setdefault(i, []).append((le, value))
            for i, pairs in sorted(per_node.items()):
                batch = self._bucket_delta(t, i, metric, sorted(pairs))
                if batch is not None:
                    events.append(batch)
        return events

    def _bucket_delta(
        self, t: float, i: int, metric: LatencyMetric, pairs: list[tuple[float, float]]
    ) -> LatencyBatch | None:
        """Cumulative ``le`` counts -> the observations added since the last poll, one value per bucket."""
        bounds = tuple(le for le, _ in pairs)
        cumulative = np.maximum.accumulate(np.array([v for _, v in pairs], dtype=np.float64))
        per_bucket = np.diff(cumulative, prepend=0.0)
        key = (metric, i)
        last = self._last_buckets.get(key)
        self._last_buckets[key] = (bounds, per_bucket)
        delta = per_bucket
        if last is not None and last[0] == bounds and (per_bucket >= last[1]).all():
            delta = per_bucket - last[1]
        # (otherwise the source restarted or changed buckets: what it holds now is new)
        counts = np.rint(delta).astype(np.int64)
        if not (counts > 0).any():
            return None
        finite = [b for b in bounds if math.isfinite(b)]
        reps = []
        for k, upper in enumerate(bounds):
            lower = bounds[k - 1] if k else 0.0
            if not math.isfinite(upper):
                reps.append(finite[-1] if finite else math.nan)  # +Inf: at least the last bound
            elif lower > 0:
                reps.append(math.sqrt(lower * upper))  # geometric middle of a log-spaced bucket
            else:
                reps.append(upper / 2)
        keep = counts > 0
        return LatencyBatch(
            t,
            self.nodes[i],
            metric,
            np.array(reps, np.float64)[keep],
            counts[keep],
        )
