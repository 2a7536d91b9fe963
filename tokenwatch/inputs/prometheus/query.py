"""Reads a fleet from Prometheus: instant queries every interval instead of one SSH connection per node.

Clusters of thousands of GPUs already scrape dcgm-exporter and their inference servers into
Prometheus; this collector asks Prometheus (``/api/v1/query``) for the latest value of each field,
maps the node label to the run's nodes, and emits the same events an SSH or NVML source would:
:class:`GpuBatch`, :class:`ProgressBatch` (cumulative counters) and :class:`LatencyBatch` (deltas of
the cumulative ``le`` buckets, by the same rule as a scrape: :mod:`tokenwatch.sources.le_buckets`).
An unreachable server or a bad query is a :class:`Notice`, once per problem, never an exception; nodes
with no data simply go stale in the core. One pooled HTTP client serves the whole run.

Counters in Prometheus count since each server started, not since the watch did: a node's first reading
of a counter (and of a histogram's buckets) is its **baseline**, as ``rate()`` treats it, and what the run
is credited is the growth since (a counter that falls restarted: what it had counted is kept).

Prometheus keeps history, so a watch that attaches late fills in the run from its start
(:meth:`PrometheusQueryCollector.history`, ``/api/v1/query_range`` at the poll interval): the same
events, at the times Prometheus has them. Where no other source knows when the run began,
:meth:`~PrometheusQueryCollector.run_start` says: the first step in the last ``lookback`` (3 h) at which
the rack's generated-token counters grew.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Mapping, Sequence
from itertools import repeat
from typing import Any

import numpy as np

from tokenwatch.base.clock import Clock, MonotonicClock
from tokenwatch.base.events import (
    Emit,
    Event,
    LatencyBatch,
    LatencyMetric,
    Notice,
    ProgressBatch,
)
from tokenwatch.base.gc_pause import gc_paused
from tokenwatch.inputs.prometheus.answers import parse_response
from tokenwatch.inputs.prometheus.api import (
    MAX_RANGE_POINTS,
    PromApiError,
    PrometheusApi,
    RangeSeries,
    Sample,
    counters_start,
)
from tokenwatch.inputs.prometheus.gpu_answers import GpuColumn, GpuLabelKeys, compact_vector, gpu_batch
from tokenwatch.inputs.prometheus.presets import GPU_FIELDS, LATENCY_FIELDS, build_queries
from tokenwatch.sources.le_buckets import BucketRead, bucket_delta

MAX_NOTICES_PER_KIND = 20
DEFAULT_LOOKBACK_S = 3 * 3600.0


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
        baseline: bool = True,
        lookback_s: float = DEFAULT_LOOKBACK_S,
    ) -> None:
        """``now()`` gives run seconds for the events; ``queries`` overrides preset fields (see
        :mod:`tokenwatch.inputs.prometheus.presets`); ``polls`` stops after that many rounds."""
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
        self._gpu_names = {str(g): g for g in range(gpus_per_node)}
        # What the GPU answers' label sets mean, read once a series (room for each GPU's labels in a
        # few forms: a relabelled or restarted exporter's)
        self._gpu_labels = GpuLabelKeys(self._gpu_key, 4 * len(self.nodes) * gpus_per_node + 1024)
        self.baseline = baseline
        self.lookback_s = lookback_s
        # Per counter (tokens, samples, prompt tokens) and node: the last raw reading (-1 = none yet) and
        # what to add to a raw reading to get the run's count (minus the baseline, plus counts before resets).
        self._last_raw = np.full((3, len(self.nodes)), -1, np.int64)
        self._offsets = np.zeros((3, len(self.nodes)), np.int64)
        self._last_counters = np.zeros((3, len(self.nodes)), np.int64)
        self._last_buckets: dict[tuple[str, int], BucketRead] = {}
        self._failing: dict[str, str] = {}  # field -> current error (notice on change only)
        self._noticed: dict[str, set[str]] = {"unknown node": set(), "bad gpu": set()}
        self._reported: set[str] = set()
        self._bucket_problems: dict[str, None] = {}  # le-bucket problems of this poll, in order
        self._problems_said: set[str] = set()

    # ----------------------------------------------------------------- loop
    async def run(self, emit: Emit) -> None:
        start = self.clock.time()
        done = 0
        async with PrometheusApi(self.url, self.timeout_s) as api:
            while self.polls is None or done < self.polls:
                for event in await self.poll(api):
                    await emit(event)
                done += 1
                if self.polls is not None and done >= self.polls:
                    break
                await self.clock.sleep(max(0.0, start + done * self.interval_s - self.clock.time()))

    async def poll(self, api: PrometheusApi) -> list[Event]:
        """One round: every query at once (over the pooled client), then the events they make."""
        t = self.now()
        results, columns, failed = await self.ask(api, self.queries)
        events: list[Event] = []
        for field in self.queries:
            if field in failed:
                message = f"prometheus query {field!r} failed: {failed[field]}"
                if self._failing.get(field) != message:
                    self._failing[field] = message
                    events.append(Notice(t, "warning", message, source=self.name))
            elif field in self._failing:
                del self._failing[field]
                events.append(
                    Notice(t, "info", f"prometheus query {field!r} answers again", source=self.name)
                )
        with gc_paused():
            return events + self.node_events(t, results, columns)

    async def ask(
        self, api: PrometheusApi, queries: Mapping[str, str], at: float | None = None, prefix: str = ""
    ) -> tuple[dict[str, list[Sample]], dict[str, GpuColumn], dict[str, BaseException]]:
        """Every query at once (field -> PromQL; a GPU field is ``prefix`` + its name): the samples by
        field, the GPU fields' columns (read from their bytes, :meth:`read_gpu_answer`), and what failed,
        by field in the order asked."""
        gpu = {f: q for f, q in queries.items() if f.startswith(prefix) and f[len(prefix) :] in GPU_FIELDS}
        rest = {f: q for f, q in queries.items() if f not in gpu}
        (results, failed), (columns, gpu_failed) = await asyncio.gather(
            api.query_all(rest, at), api.read_all(gpu, at, self.read_gpu_answer)
        )
        errors = {**failed, **gpu_failed}
        return results, columns, {f: errors[f] for f in queries if f in errors}

    def node_events(
        self,
        t: float,
        results: Mapping[str, list[Sample]],
        gpu_columns: Mapping[str, GpuColumn] | None = None,
    ) -> list[Event]:
        """The events one instant's answers (field -> samples; the GPU fields as columns where they were
        read so, :meth:`read_gpu_answer`) make: GPU rows, counters, latency deltas, and notices of labels
        that name no node of the run."""
        columns = self.gpu_columns(results) if gpu_columns is None else gpu_columns
        return [
            *self._gpu_events(t, columns),
            *self.progress_events(t, results),
            *self.latency_events(t, results),
            *self._pending_notices(t),
        ]

    # -------------------------------------------------------------- history
    def _step(self, start: float, end: float) -> float:
        return max(self.interval_s, (end - start) / MAX_RANGE_POINTS)

    async def run_start(self, watch_wall: float) -> float | None:
        """When the run began (Unix time) as Prometheus can tell: the start of the first step in the last
        ``lookback_s`` at which any node's generated-token counter grew; None without a token query, with
        no growth, or when Prometheus cannot answer (a notice says why)."""
        tokens = self.queries.get("tokens")
        if tokens is None:
            return None
        try:
            return await counters_start(
                self.url, self.timeout_s, tokens, watch_wall, self.lookback_s, self.interval_s
            )
        except PromApiError as exc:
            self._failing["history"] = f"prometheus: no history: {exc}"
            return None

    async def history(self, start_wall: float, end_wall: float) -> list[Event]:
        """Every query's answers from ``start_wall`` to ``end_wall`` at the poll interval, as the events a
        poll makes, at Prometheus' own times (Unix time). The first point is each counter's baseline;
        live polls then go on from the last one."""
        step = self._step(start_wall, end_wall)
        async with PrometheusApi(self.url, self.timeout_s * 4) as api:
            answered, failed = await api.query_range_all(self.queries, start_wall, end_wall, step)
        events: list[Event] = [
            Notice(end_wall, "warning", f"prometheus: no history of {field!r}: {error}", source=self.name)
            for field, error in failed.items()
        ]
        with gc_paused():
            return events + self._history_events(answered, end_wall)

    def _history_events(self, answered: Mapping[str, list[RangeSeries]], end_wall: float) -> list[Event]:
        at: dict[float, dict[str, list[Sample]]] = {}
        events: list[Event] = []
        for field, answer in answered.items():
            for labels, times, values in answer:
                for stamp, value in zip(times.tolist(), values.tolist(), strict=True):
                    at.setdefault(stamp, {}).setdefault(field, []).append((labels, value))
        for stamp in sorted(at):
            results = at[stamp]
            events += self._gpu_events(stamp, self.gpu_columns(results))
            events += self.progress_events(stamp, results)
            events += self.latency_events(stamp, results)
        problem = self._failing.pop("history", None)
        if problem is not None:
            events.append(Notice(end_wall, "warning", problem, source=self.name))
        return events + self._pending_notices(end_wall)

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
        for problem in self._bucket_problems:
            if problem not in self._problems_said:
                self._problems_said.add(problem)
                out.append(Notice(t, "warning", problem, source=self.name))
        self._bucket_problems.clear()
        return out

    # --------------------------------------------------------------- events
    def _gpu_keys(self, samples: list[Sample]) -> np.ndarray:
        """Each sample's ``node * gpus_per_node + gpu`` (-1: not a node or GPU of the run), the exact
        names looked up a column at a time (~50,000 samples in a fleet's alerting pass); the others go
        through the slower matching, which also notes an unknown name."""
        node_names: list[Any] = [labels.get(self.node_label) for labels, _ in samples]  # str or None
        gpu_names: list[Any] = [labels.get(self.gpu_label) for labels, _ in samples]
        nodes = np.array(list(map(self._index.get, node_names, repeat(-1))), np.int64)
        gpus = np.array(list(map(self._gpu_names.get, gpu_names, repeat(-1))), np.int64)
        for k in np.flatnonzero(nodes < 0).tolist():
            i = self.node_of(node_names[k])
            nodes[k] = -1 if i is None else i
        for k in np.flatnonzero(gpus < 0).tolist():
            g = self._gpu_of(gpu_names[k])
            gpus[k] = -1 if g is None else g
        return np.where((nodes >= 0) & (gpus >= 0), nodes * self.gpus_per_node + gpus, -1)

    def _gpu_key(self, labels: Mapping[str, str]) -> int:
        """One label set's ``node * gpus_per_node + gpu`` (-1: not a node or GPU of the run), by the
        same matching as :meth:`_gpu_keys` (which notes an unknown name)."""
        node_name, gpu_name = labels.get(self.node_label), labels.get(self.gpu_label)
        node = self._index.get(node_name, -1) if node_name is not None else -1
        if node < 0:
            i = self.node_of(node_name)
            node = -1 if i is None else i
        gpu = self._gpu_names.get(gpu_name, -1) if gpu_name is not None else -1
        if gpu < 0:
            g = self._gpu_of(gpu_name)
            gpu = -1 if g is None else g
        return node * self.gpus_per_node + gpu if node >= 0 and gpu >= 0 else -1

    def gpu_column(self, samples: list[Sample]) -> GpuColumn:
        """A GPU field's samples (as :func:`parse_response` reads them) as one column."""
        keys = self._gpu_keys(samples)
        values = np.fromiter((value for _, value in samples), np.float64, len(samples))
        known = keys >= 0
        return GpuColumn(keys[known], values[known])

    def read_gpu_answer(self, body: bytes) -> GpuColumn:
        """A GPU field's answer (the bytes of an instant query's 200) as one column, read from its bytes
        where it is a compact vector (:mod:`.gpu_answers`), else the exact way: the same column either
        way, and a :class:`PromApiError` for an answer that is not a vector of samples."""
        cut = compact_vector(body)
        if cut is not None:
            column = self._gpu_labels.column(*cut)
            if column is not None:
                return column
        return self.gpu_column(parse_response(body))

    def _gpu_events(self, t: float, columns: Mapping[str, GpuColumn]) -> list[Event]:
        batch = gpu_batch(t, columns, self.gpus_per_node)
        return [] if batch is None else [batch]

    def gpu_columns(self, results: Mapping[str, list[Sample]]) -> dict[str, GpuColumn]:
        """The GPU fields of one instant's answers (field -> samples) as columns."""
        return {field: self.gpu_column(results[field]) for field in GPU_FIELDS if results.get(field)}

    def progress_events(self, t: float, results: Mapping[str, list[Sample]]) -> list[Event]:
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
        counters, last, offsets = self._last_counters, self._last_raw, self._offsets
        for i in nodes:
            for slot in range(3):
                counter = seen[i][slot]
                if counter is None:
                    continue  # a node missing samples keeps the last value it had
                if last[slot, i] < 0:
                    offsets[slot, i] = -counter if self.baseline else 0
                elif counter < last[slot, i]:
                    offsets[slot, i] += last[slot, i]  # restarted: keep what it had counted
                last[slot, i] = counter
                counters[slot, i] = offsets[slot, i] + counter
        index = np.array(nodes, np.int64)
        arrays = [index, counters[1, index], counters[0, index]]  # (fancy indexing copies)
        if "prompt_tokens" in results:
            arrays.append(counters[2, index])
        for array in arrays:
            array.flags.writeable = False
        return [ProgressBatch(t, *arrays)]

    def latency_events(self, t: float, results: Mapping[str, list[Sample]]) -> list[Event]:
        """The latency batches of one poll's answers (field -> samples): per node, the new observations."""
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
                if i is not None:
                    per_node.setdefault(i, []).append((le, value))
            for i, pairs in sorted(per_node.items()):
                batch = self.bucket_batch(t, i, metric, pairs)
                if batch is not None:
                    events.append(batch)
        return events

    def bucket_batch(
        self, t: float, i: int, metric: LatencyMetric, pairs: Sequence[tuple[float, float]]
    ) -> LatencyBatch | None:
        """Node ``i``'s cumulative ``(le, count)`` pairs -> the observations added since the last poll."""
        key = (metric, i)
        before = self._last_buckets.get(key)
        delta = bucket_delta(pairs, before)
        if delta.keep is not None:
            self._last_buckets[key] = delta.keep
        if delta.problem is not None:
            self._bucket_problems[f"prometheus {metric} of {self.nodes[i]}: {delta.problem}"] = None
        if not len(delta.counts) or (before is None and self.baseline):
            return None  # nothing new, or the first reading: the baseline
        return LatencyBatch(t, self.nodes[i], metric, delta.values_s, delta.counts)
