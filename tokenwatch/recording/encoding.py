"""Events to JSON-ready dicts, the recording's records: ``k`` (kind) and ``t`` in each.

Batches are columnar (one list per GPU metric) because columns of similar numbers compress far better
than rows. NaN is written as ``null``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import orjson

from tokenwatch.base.events import (
    GPU_METRICS,
    OPTIONAL_GPU_METRICS,
    RACK_FIGURES,
    EngineQueue,
    Event,
    GpuBatch,
    GpuSample,
    Heartbeat,
    LatencyBatch,
    LatencyLimitCounts,
    LoadGenDetail,
    LogLine,
    NodeStatus,
    Notice,
    Progress,
    ProgressBatch,
    RackFiguresBatch,
    RunEnded,
    RunStarted,
)

_DUMP_OPTIONS = orjson.OPT_SERIALIZE_NUMPY


def encode(event: Event) -> dict[str, Any]:
    return ENCODERS[type(event)](event)


def dumps(event: Event) -> bytes:
    """One recording line (with its newline)."""
    return orjson.dumps(encode(event), option=_DUMP_OPTIONS) + b"\n"


def _run_started(e: RunStarted) -> dict[str, Any]:
    return {
        "k": "run_started",
        "t": e.t,
        "name": e.name,
        "scenario": e.scenario,
        "nodes": list(e.nodes),
        "gpus_per_node": e.gpus_per_node,
        "nominal_duration_s": e.nominal_duration_s,
        "total_samples": e.total_samples,
        "source": e.source,
        "wall_epoch": e.wall_epoch,
        "meta": dict(e.meta),
    }


def _gpu(e: GpuSample) -> dict[str, Any]:
    out: dict[str, Any] = {"k": "gpu", "t": e.t, "node": e.node, "gpu": e.gpu}
    for m in GPU_METRICS:
        value = getattr(e, m)
        if math.isnan(value) and m in OPTIONAL_GPU_METRICS:
            continue  # a column the source does not have: the record reads as it did before it existed
        out[m] = None if math.isnan(value) else value
    out["throttle_reasons"] = e.throttle_reasons
    return out


_OPTIONAL_COLUMNS = np.array([i for i, m in enumerate(GPU_METRICS) if m in OPTIONAL_GPU_METRICS])


def _gpu_batch(e: GpuBatch) -> dict[str, Any]:
    # One transposed copy, whose rows are the columns (each contiguous, as orjson needs): a GPU batch is
    # written every tick, and a copy and a NaN test per column were most of its encoding.
    by_column = np.ascontiguousarray(e.values.T)
    absent = set(_OPTIONAL_COLUMNS[np.isnan(by_column[_OPTIONAL_COLUMNS]).all(axis=1)].tolist())
    columns = {m: by_column[i] for i, m in enumerate(GPU_METRICS) if i not in absent}
    return {
        "k": "gpu_batch",
        "t": e.t,
        "node_index": e.node_index,
        "gpu": e.gpu,
        "m": columns,
        "throttle_reasons": e.throttle_reasons,
    }


def _progress(e: Progress) -> dict[str, Any]:
    out = {
        "k": "progress",
        "t": e.t,
        "node": e.node,
        "samples": e.samples_done,
        "tokens": e.tokens_done,
        "prompt_tokens": e.prompt_tokens_done,
    }
    if e.filled:  # only then: recordings without history read and write as before
        out["filled"] = True
    return out


def _progress_batch(e: ProgressBatch) -> dict[str, Any]:
    out = {
        "k": "progress_batch",
        "t": e.t,
        "node_index": e.node_index,
        "samples": e.samples_done,
        "tokens": e.tokens_done,
    }
    if e.prompt_tokens_done is not None:
        out["prompt_tokens"] = e.prompt_tokens_done
    if e.filled:
        out["filled"] = True
    return out


def _latency(e: LatencyBatch) -> dict[str, Any]:
    out = {"k": "latency", "t": e.t, "node": e.node, "metric": e.metric, "values_s": e.values_s}
    if e.counts is not None:
        out["counts"] = e.counts
    return out


def _limit_counts(e: LatencyLimitCounts) -> dict[str, Any]:
    return {
        "k": "limit_counts",
        "t": e.t,
        "metric": e.metric,
        "limit_s": e.limit_s,
        "node_index": e.node_index,
        "judged": e.judged,
        "over": e.over,
    }


def _rack_figures(e: RackFiguresBatch) -> dict[str, Any]:
    """Columnar like a GPU batch: one list per figure, NaN as null; ``places`` only where it says any."""
    columns = {
        f: [None if math.isnan(v) else v for v in e.values[:, i].tolist()] for i, f in enumerate(RACK_FIGURES)
    }
    out = {
        "k": "rack_figures",
        "t": e.t,
        "racks": list(e.racks),
        "f": columns,
        "down": e.down.tolist(),
        "worst_node": list(e.worst_node),
        "worst_cause": list(e.worst_cause),
    }
    if e.places:
        out["places"] = [list(place) for place in e.places]
    return out


def _engine_queue(e: EngineQueue) -> dict[str, Any]:
    out: dict[str, Any] = {"k": "engine_queue", "t": e.t, "node": e.node}
    for key, value in (("running", e.running), ("waiting", e.waiting), ("kv_cache_pct", e.kv_cache_pct)):
        if not math.isnan(value):
            out[key] = value
    return out


ENCODERS: dict[type, Callable[[Any], dict[str, Any]]] = {
    RunStarted: _run_started,
    GpuSample: _gpu,
    GpuBatch: _gpu_batch,
    Progress: _progress,
    ProgressBatch: _progress_batch,
    LatencyBatch: _latency,
    LatencyLimitCounts: _limit_counts,
    RackFiguresBatch: _rack_figures,
    EngineQueue: _engine_queue,
    LoadGenDetail: lambda e: {"k": "loadgen_detail", "t": e.t, "node": e.node, "values": dict(e.values)},
    NodeStatus: lambda e: {"k": "status", "t": e.t, "node": e.node, "state": e.state, "reason": e.reason},
    LogLine: lambda e: {"k": "log", "t": e.t, "node": e.node, "text": e.text},
    Notice: lambda e: {
        "k": "notice",
        "t": e.t,
        "level": e.level,
        "message": e.message,
        "node": e.node,
        "source": e.source,
    },
    Heartbeat: lambda e: {"k": "heartbeat", "t": e.t},
    RunEnded: lambda e: {"k": "run_ended", "t": e.t, "reason": e.reason},
}
