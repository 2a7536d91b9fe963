"""Inference-server and dcgm-exporter Prometheus scrapes (text exposition) -> events.

Parsing is prometheus_client's own text parser. Series are matched by *sample* name (e.g.
``vllm:generation_tokens_total``, ``..._bucket``), so a scrape without ``# TYPE`` lines reads the same;
the names per preset come from :mod:`tokenwatch.sources.metric_catalogue`, the same table the
Prometheus-query collector builds its PromQL from.

* Counters (generated / prompt tokens, finished requests) become cumulative ``Progress``, with reset
  handling per series: a series that goes backwards restarted (server restart), so what it had counted
  is kept and the new value added; several series (engines, finish reasons) are summed per node. The
  core turns cumulative progress into rates.
* Histograms (TTFT, TPOT / inter-token latency, end-to-end) become per-scrape bucket deltas
  (:func:`tokenwatch.sources.le_buckets.bucket_delta`): one ``LatencyBatch`` per node and metric.
* Gauges (running / waiting requests, KV-cache usage) become one ``EngineQueue`` per node and scrape
  (the engine's queue, for the cause hints), and are kept in :attr:`MetricsScrapeParser.gauges`.
* GPU fields (dcgm-exporter) become one ``GpuBatch`` per scrape, a row per GPU (``gpu`` label). DCGM's
  "blank / not supported" sentinel values (e.g. 9223372036854775794 for a T4's NVLink counters) are
  missing values, never readings.

A server's counters count since it started, not since the watch did: by default each series' first
reading is its **baseline**, as Prometheus' ``rate()`` treats it, so attaching to a server that has run
for hours adds nothing at the first scrape, and every later figure is what it made since.
``baseline=False`` counts the first reading in full (a scrape of a server that started with the run), as
a preset whose counts start with the run does by default (AIPerf's live totals).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from tokenwatch.base.events import (
    GPU_METRICS,
    EngineQueue,
    Event,
    GpuBatch,
    LatencyBatch,
    LatencyMetric,
    Progress,
)
from tokenwatch.sources.le_buckets import BucketRead, bucket_delta
from tokenwatch.sources.lines import NoticeLog
from tokenwatch.sources.metric_catalogue import ServerNames, dcgm_blank, preset, throttle_mask
from tokenwatch.sources.prometheus_exposition import Series, parse_exposition

_MAX_GPU = 4095
_COLUMN = {name: k for k, name in enumerate(GPU_METRICS)}

SeriesKey = tuple[str, str, tuple[tuple[str, str], ...]]  # node, family, labels but le and the node's


@dataclass(slots=True)
class _Counter:
    last: float = 0.0
    offset: float = 0.0  # what earlier lives of this series counted (before resets), less its baseline

    @classmethod
    def first_reading(cls, value: float, baseline: bool) -> _Counter:
        """A series seen for the first time: its value is the baseline (counts 0), or counts in full."""
        return cls(value, -value) if baseline else cls(value, 0.0)

    def update(self, value: float) -> float:
        if value < self.last:
            self.offset += self.last
        self.last = value
        return self.offset + value


def _gpu_number(text: str) -> int | None:
    if text.isascii() and text.isdigit() and int(text) <= _MAX_GPU:
        return int(text)
    return None


class MetricsScrapeParser:
    """One scrape at a time: ``parse(text, t)`` -> events at run time ``t``.

    ``node`` names the node of every series; or ``node_label`` (e.g. ``Hostname``, ``instance``) reads
    it from each series' labels (``node`` then covers series without that label). With ``nodes`` (the
    run's nodes, in ``RunStarted`` order) given, series of other nodes are skipped (with one Notice
    per unknown name). GPU batches name nodes by index: from ``nodes``, or ``node_index`` for the one
    ``node`` of a node-local scrape.
    """

    def __init__(
        self,
        preset_name: str,
        node: str | None = None,
        node_label: str | None = None,
        nodes: Sequence[str] = (),
        node_index: int | None = None,
        *,
        baseline: bool | None = None,
    ) -> None:
        self.preset = preset(preset_name)
        # A client benchmark's totals start with its run: nothing before it to leave out.
        self.baseline = not self.preset.since_run_start if baseline is None else baseline
        if node is None and node_label is None:
            raise ValueError("metrics: give the node, or the label that names it (node_label)")
        if self.preset.gpu and not nodes and (node_label is not None or node_index is None):
            raise ValueError(
                "metrics: GPU batches name nodes by index: give the run's nodes, or node and node_index"
            )
        self.preset_name = preset_name
        self.node = node
        self.node_label = node_label
        self.nodes = tuple(nodes)
        self._index = {n: i for i, n in enumerate(self.nodes)}
        self.node_index = node_index
        self.source = f"metrics:{preset_name}"
        self.notices = NoticeLog(self.source, node)
        self.gauges: dict[str, dict[str, float]] = {}
        self._counters: dict[SeriesKey, _Counter] = {}
        self._buckets: dict[SeriesKey, BucketRead] = {}
        self._unknown_nodes: set[str] = set()
        self._warned_unplaced = False
        self._warned_no_gpu = False
        self._warned_mig = False
        self._said_once: set[tuple[str, str]] = set()  # (node, what): said once per node
        self._recognised_any = False  # some scrape held a family of the preset (else: said so, once)
        self._known_names = self.preset.sample_names

    # ------------------------------------------------------------------ parse
    def parse(self, text: str, t: float) -> list[Event]:
        out: list[Event] = []
        series, bad_lines = parse_exposition(text)
        for number, line in bad_lines:
            self.notices.warn(out, t, f"line {number}: not a metric line, skipped: {line}")
        by_node: dict[str, list[Series]] = {}
        unplaced = 0
        for item in series:
            node = self._node_of(item.labels, t, out)
            if node is not None:
                by_node.setdefault(node, []).append(item)
            elif item.labels.get(self.node_label or "") is None:
                unplaced += 1
        # A scrape of ``*_info`` gauges alone says what is there, not yet what it measures (AIPerf serves
        # only aiperf_info until its first stats interval): no verdict on the preset from it.
        if series and not self._recognised_any and not all(s.name.endswith("_info") for s in series):
            self._check_recognised(series, t, out)
        if unplaced and not self._warned_unplaced:
            self._warned_unplaced = True
            self.notices.warn(out, t, f"{unplaced} series without the {self.node_label!r} label skipped")
        server = self.preset.server
        if server is not None:
            for node, items in by_node.items():
                self._server(server, node, items, t, out)
        if self.preset.gpu:
            batch = self._gpu_batch(by_node, t, out)
            if batch is not None:
                out.append(batch)
        return out

    def _check_recognised(self, series: list[Series], t: float, out: list[Event]) -> None:
        """A scrape of another server (or a renamed release) shows nothing: say so, once, with what it has."""
        names = {item.name for item in series}
        self._recognised_any = True  # either way, once: later scrapes of the same server say the same
        if names & self._known_names:
            return
        families = sorted({_family(name) for name in names})
        shown = ", ".join(families[:8]) + (f" and {len(families) - 8} more" if len(families) > 8 else "")
        self.notices.warn(
            out, t, f"the {self.preset_name} preset recognises none of this scrape's metrics: {shown}"
        )

    def _node_of(self, labels: Mapping[str, str], t: float, out: list[Event]) -> str | None:
        node = labels.get(self.node_label) if self.node_label else None
        node = node or self.node
        if node is None:
            return None
        if self.nodes and node not in self._index:
            if node not in self._unknown_nodes:
                self._unknown_nodes.add(node)
                self.notices.warn(out, t, f"series of node {node!r}, not one of the run's nodes: skipped")
            return None
        return node

    def _key(self, node: str, family: str, labels: Mapping[str, str]) -> SeriesKey:
        rest = tuple(sorted((k, v) for k, v in labels.items() if k not in ("le", self.node_label)))
        return node, family, rest

    # ----------------------------------------------------------- inference server
    def _say_once(self, node: str, what: str, t: float, out: list[Event], message: str) -> None:
        if (node, what) not in self._said_once:
            self._said_once.add((node, what))
            self.notices.warn(out, t, message)

    def _server(self, names: ServerNames, node: str, items: list[Series], t: float, out: list[Event]) -> None:
        present = {s.name for s in items}
        recognised = not present.isdisjoint(self._known_names)
        totals: dict[str, float | None] = {}
        for role, wanted in (
            ("tokens", names.tokens),
            ("prompt", names.prompt_tokens),
            ("samples", names.samples),
        ):
            family = next((n for n in wanted if n in present), None)
            if family is not None:
                self._update_counters(node, family, items, t, out)
            # A family missing from this scrape (a bad line) keeps its last total: never backwards.
            totals[role] = self._counter_total(node, wanted)
            if wanted and recognised and totals[role] is None:
                # Unknown, not zero: a release without the family, or a page cut short.
                self._say_once(
                    node,
                    role,
                    t,
                    out,
                    f"no {' or '.join(wanted)} in this scrape: {_ROLE_WORDS[role]} unknown",
                )
        if any(v is not None for v in totals.values()):
            samples, tokens, prompt = totals["samples"], totals["tokens"], totals["prompt"]
            out.append(
                Progress(
                    t,
                    node,
                    None if samples is None else round(samples),
                    None if tokens is None else round(tokens),
                    None if prompt is None else round(prompt),
                )
            )
        for metric, families in names.latency.items():
            family = next((f for f in families if f + "_bucket" in present), None)
            if family is not None:
                batch = self._histogram_delta(node, metric, family, items, t, out)
                if batch is not None:
                    out.append(batch)
        now: dict[str, float] = {}
        for gauge, families in names.gauges.items():
            family = next((f for f in families if f in present), None)
            if family is not None:
                values = [s.value for s in items if s.name == family and math.isfinite(s.value)]
                if len(values) < sum(1 for s in items if s.name == family):
                    self._say_once(node, family, t, out, f"{family}: a value that is not a number, skipped")
                if values:
                    self.gauges.setdefault(node, {})[gauge] = float(sum(values))
                    # Requests add up over a node's engines; KV-cache use (a 0..1 fraction in every
                    # server's gauge, vLLM's "_perc" too) is their mean, in %.
                    kv = gauge == "kv_cache_usage"
                    now[gauge] = float(sum(values) / len(values) * 100.0 if kv else sum(values))
        if now:
            nan = math.nan
            out.append(
                EngineQueue(
                    t, node, now.get("running", nan), now.get("waiting", nan), now.get("kv_cache_usage", nan)
                )
            )

    def _update_counters(
        self, node: str, family: str, items: list[Series], t: float, out: list[Event]
    ) -> None:
        for item in items:
            if item.name != family:
                continue
            if not (math.isfinite(item.value) and item.value >= 0):
                self._say_once(node, family, t, out, f"{family}: {item.value!r} is not a count, skipped")
            else:
                key = self._key(node, family, item.labels)
                counter = self._counters.get(key)
                if counter is None:
                    self._counters[key] = _Counter.first_reading(item.value, self.baseline)
                else:
                    counter.update(item.value)

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
        per_series: dict[SeriesKey, list[tuple[float, float]]] = {}
        for item in items:
            if item.name == family + "_bucket":
                try:
                    bound = float(item.labels.get("le", ""))
                except ValueError:
                    continue
                per_series.setdefault(self._key(node, family, item.labels), []).append((bound, item.value))
        values: list[np.ndarray] = []
        counts: list[np.ndarray] = []
        for key, pairs in per_series.items():
            before = self._buckets.get(key)
            delta = bucket_delta(pairs, before)
            if delta.keep is not None:
                self._buckets[key] = delta.keep
            if delta.problem is not None:
                self.notices.warn(out, t, f"{family}: {delta.problem}")
            if before is None and self.baseline:
                continue  # the first reading is the baseline: observations made before we looked
            values.append(delta.values_s)
            counts.append(delta.counts)
        if not sum(len(c) for c in counts):
            return None
        all_values, all_counts = np.concatenate(values), np.concatenate(counts)
        all_values.flags.writeable = all_counts.flags.writeable = False
        return LatencyBatch(t, node, metric, all_values, all_counts)

    # --------------------------------------------------------------- GPUs
    def _gpu_batch(self, by_node: Mapping[str, list[Series]], t: float, out: list[Event]) -> GpuBatch | None:
        wanted = self.preset.gpu_families
        readings: dict[tuple[int, int], dict[str, list[float]]] = {}
        instance_only: dict[tuple[int, int], dict[str, list[float]]] = {}
        no_gpu = 0
        for node, items in by_node.items():
            index = self._index[node] if self.nodes else self.node_index
            assert index is not None  # the constructor insists on one or the other
            for item in items:
                if item.name not in wanted:
                    continue
                number = _gpu_number(item.labels.get("gpu", ""))
                if number is None:
                    no_gpu += 1
                elif math.isfinite(item.value) and not dcgm_blank(item.value):
                    # MIG: the GPU exports its own series, and each MIG instance its share of some
                    # fields (GPU_I_ID label). The GPU's row is the GPU's own series; the instances'
                    # are never mixed in (a mean of the two read 74.56 % HBM busy for a GPU at 69.08 %).
                    into = instance_only if item.labels.get("GPU_I_ID") else readings
                    into.setdefault((index, number), {}).setdefault(item.name, []).append(item.value)
        if no_gpu and not self._warned_no_gpu:
            self._warned_no_gpu = True
            self.notices.warn(out, t, f"{no_gpu} GPU series without a usable gpu label skipped")
        self._note_instance_only(readings, instance_only, t, out)
        if not readings:
            return None
        rows = sorted(readings)
        values = np.full((len(rows), len(GPU_METRICS)), np.nan)
        reasons = np.zeros(len(rows), np.uint64)
        for row, key in enumerate(rows):
            found = readings[key]
            # Several series of one field for one GPU (the same GPU labelled per pod) read as their mean.
            fields = {name: sum(v) / len(v) for name, v in found.items()}
            for column, reads in self.preset.gpu.items():
                value = next((v for read in reads if (v := read.read(fields)) is not None), None)
                if value is not None:
                    values[row, _COLUMN[column]] = value
            mask = next((found[f] for f in self.preset.throttle_reasons if f in found), None)
            if mask is not None:
                reasons[row] = throttle_mask(max(mask))
        node_index = np.array([i for i, _ in rows], dtype=np.int64)
        gpu = np.array([g for _, g in rows], dtype=np.int64)
        for array in (node_index, gpu, values, reasons):
            array.flags.writeable = False
        return GpuBatch(t, node_index, gpu, values, reasons)

    def _note_instance_only(
        self,
        whole: Mapping[tuple[int, int], Mapping[str, list[float]]],
        instances: Mapping[tuple[int, int], Mapping[str, list[float]]],
        t: float,
        out: list[Event],
    ) -> None:
        """Once: fields that only MIG instances report are unknown for their GPU (an instance's share
        is not the GPU's figure), said in one notice."""
        if self._warned_mig:
            return
        missing = sorted(
            {name for key, fields in instances.items() for name in fields if name not in whole.get(key, {})}
        )
        if missing:
            self._warned_mig = True
            self.notices.warn(
                out,
                t,
                f"{', '.join(missing)}: only per MIG instance (GPU_I_ID), not for the whole GPU: "
                "unknown for the GPU (instances are not read)",
            )


_ROLE_WORDS = {"tokens": "output tokens", "prompt": "prompt tokens", "samples": "finished requests"}


def _family(sample: str) -> str:
    """The family a sample belongs to, for messages (``x_bucket`` -> ``x``; counters keep ``_total``)."""
    for suffix in ("_bucket", "_count", "_sum", "_created"):
        if sample.endswith(suffix):
            return sample[: -len(suffix)]
    return sample
