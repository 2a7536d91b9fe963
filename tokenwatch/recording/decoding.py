"""Parsed records to events, one decoder per record kind; :mod:`tokenwatch.recording.codec`'s
:class:`~tokenwatch.recording.codec.Decoder` routes a stream of records through them."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from tokenwatch.base.events import (
    GPU_METRICS,
    LATENCY_METRICS,
    MAX_RUN_GPUS,
    MAX_RUN_TIME_S,
    NODE_STATES,
    RACK_FIGURES,
    SCENARIOS,
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
from tokenwatch.recording.latency_buckets import FIRST_KEY, from_buckets, reference_values
from tokenwatch.recording.record_checks import (
    MAX_LATENCY_S,
    MAX_NAME_CHARS,
    CodecError,
    IndexArrays,
    check_counts,
    check_gpu_block,
    checked_count,
    checked_name,
    checked_text,
    gpu_value,
    number_array,
    number_or_nan,
    optional_int,
    record_time,
)


def _d_run_started(r: Mapping[str, Any]) -> RunStarted:
    nodes = r["nodes"]
    if not isinstance(nodes, list) or not 0 < len(nodes) <= MAX_RUN_GPUS:
        raise CodecError(f"nodes must be a list of 1 to {MAX_RUN_GPUS:,} names")
    if not all(isinstance(n, str) and len(n) <= MAX_NAME_CHARS for n in nodes) or len(set(nodes)) != len(
        nodes
    ):
        raise CodecError(f"nodes must be distinct names of at most {MAX_NAME_CHARS} characters")
    if r["scenario"] not in SCENARIOS:
        raise CodecError(f"scenario must be one of {SCENARIOS}")
    if r["source"] not in ("sim", "live", "replay"):
        raise CodecError("unknown source kind")
    gpus = optional_int(r["gpus_per_node"], "gpus_per_node")
    if gpus is None or not 0 < gpus <= 1024:
        raise CodecError("gpus_per_node must be between 1 and 1024")
    if len(nodes) * gpus > MAX_RUN_GPUS:
        raise CodecError(
            f"a run declares at most {MAX_RUN_GPUS:,} GPUs; this one {len(nodes):,} nodes x {gpus} = "
            f"{len(nodes) * gpus:,} GPUs"
        )
    nominal = r.get("nominal_duration_s")
    if nominal is not None and not 0 <= number_or_nan(nominal) <= MAX_RUN_TIME_S:
        raise CodecError(f"nominal_duration_s must be between 0 and {MAX_RUN_TIME_S:g} s")
    meta = r.get("meta") or {}
    if not isinstance(meta, dict):
        raise CodecError("meta must be a mapping")
    return RunStarted(
        t=record_time(r),
        name=checked_name(r["name"], "name"),
        scenario=r["scenario"],
        nodes=tuple(nodes),
        gpus_per_node=gpus,
        nominal_duration_s=None if nominal is None else number_or_nan(nominal),
        total_samples=checked_count(r.get("total_samples"), "total_samples"),
        source=r["source"],
        wall_epoch=number_or_nan(r["wall_epoch"]),
        meta=meta,
    )


def _d_gpu(r: Mapping[str, Any]) -> GpuSample:
    gpu = optional_int(r["gpu"], "gpu")
    reasons = optional_int(r.get("throttle_reasons", 0), "throttle_reasons") or 0
    if gpu is None or not 0 <= reasons < 2**64:
        raise CodecError("bad GPU index or throttle reasons")
    values = {m: gpu_value(r.get(m), m) for m in GPU_METRICS}
    return GpuSample(record_time(r), checked_name(r["node"], "node"), gpu, **values, throttle_reasons=reasons)


def decode_gpu_batch(r: Mapping[str, Any], index: IndexArrays, metrics: tuple[str, ...]) -> GpuBatch:
    node_index = index.array(r["node_index"], "gpu_batch.node_index")
    gpu = index.array(r["gpu"], "gpu_batch.gpu")
    columns = r["m"]
    if not isinstance(columns, dict):
        raise CodecError("m must map metrics to columns")
    wanted = [i for i, m in enumerate(GPU_METRICS) if m in metrics and m in columns]
    values = np.full((len(gpu), len(GPU_METRICS)), np.nan)
    if wanted:
        try:  # one conversion for all wanted columns: ~5x faster than one per column
            block = np.array([columns[GPU_METRICS[i]] for i in wanted], dtype=np.float64)
        except (TypeError, ValueError):
            raise CodecError("gpu_batch columns must be lists of numbers") from None
        if block.shape != (len(wanted), len(gpu)):
            raise CodecError("gpu_batch columns must all have one value per row")
        check_gpu_block(block)
        values[:, wanted] = block.T
    if "throttle_reasons" in r or metrics is GPU_METRICS:
        reasons = number_array(r["throttle_reasons"], np.uint64, "throttle_reasons")
    else:  # not asked for (see decode's gpu_metrics)
        reasons = np.zeros(len(gpu), np.uint64)
    if not len(node_index) == len(gpu) == len(values) == len(reasons):
        raise CodecError("batch columns differ in length")
    return GpuBatch(record_time(r), node_index, gpu, values, reasons)


def _d_progress(r: Mapping[str, Any]) -> Progress:
    return Progress(
        record_time(r),
        checked_name(r["node"], "node"),
        checked_count(r.get("samples"), "samples"),
        checked_count(r.get("tokens"), "tokens"),
        checked_count(r.get("prompt_tokens"), "prompt_tokens"),
        filled=r.get("filled") is True,
    )


def decode_progress_batch(r: Mapping[str, Any], index: IndexArrays) -> ProgressBatch:
    node_index = index.array(r["node_index"], "progress_batch.node_index")
    samples = check_counts(number_array(r["samples"], np.int64, "samples"), "samples")
    tokens = check_counts(number_array(r["tokens"], np.int64, "tokens"), "tokens")
    prompt = (
        check_counts(number_array(r["prompt_tokens"], np.int64, "prompt_tokens"), "prompt_tokens")
        if "prompt_tokens" in r
        else None
    )
    if not len(node_index) == len(samples) == len(tokens) or (
        prompt is not None and len(prompt) != len(tokens)
    ):
        raise CodecError("batch columns differ in length")
    return ProgressBatch(record_time(r), node_index, samples, tokens, prompt, filled=r.get("filled") is True)


def decode_latency(r: Mapping[str, Any], bucket_values: np.ndarray | None = None) -> LatencyBatch:
    if FIRST_KEY in r:  # a histogram written as bucket numbers (recording.latency_buckets)
        table = reference_values() if bucket_values is None else bucket_values
        return from_buckets(r, record_time(r), checked_name(r["node"], "node"), table)
    if r["metric"] not in LATENCY_METRICS:
        raise CodecError(f"latency metric must be one of {LATENCY_METRICS}")
    values = number_array(r["values_s"], np.float64, "values_s")
    if not ((values >= 0) & (values <= MAX_LATENCY_S)).all():
        raise CodecError(f"latencies must be between 0 and {MAX_LATENCY_S:g} s")
    counts = number_array(r["counts"], np.int64, "counts") if r.get("counts") is not None else None
    if counts is not None:
        check_counts(counts, "counts")
        if len(counts) != len(values):
            raise CodecError("counts and values differ in length")
    return LatencyBatch(record_time(r), checked_name(r["node"], "node"), r["metric"], values, counts)


def _d_limit_counts(r: Mapping[str, Any]) -> LatencyLimitCounts:
    if r["metric"] not in LATENCY_METRICS:
        raise CodecError(f"latency metric must be one of {LATENCY_METRICS}")
    limit = number_or_nan(r["limit_s"])
    if not (math.isfinite(limit) and limit > 0):
        raise CodecError("limit_s must be a positive number")
    node_index = number_array(r["node_index"], np.int64, "node_index")
    judged = number_array(r["judged"], np.int64, "judged")
    over = number_array(r["over"], np.int64, "over")
    if not len(node_index) == len(judged) == len(over):
        raise CodecError("batch columns differ in length")
    if (over < 0).any() or (over > judged).any():
        raise CodecError("over-limit counts must be between 0 and the samples judged")
    return LatencyLimitCounts(record_time(r), r["metric"], limit, node_index, judged, over)


def _texts(value: Any, what: str, length: int) -> tuple[str, ...]:
    if not isinstance(value, list) or len(value) != length or not all(isinstance(v, str) for v in value):
        raise CodecError(f"{what} must be a list of {length} names")
    return tuple(value)


def _places(value: Any) -> tuple[tuple[str, str, str], ...]:
    """A rack figures batch's ``places``: [rack, site, row] each (absent in older recordings)."""
    if not isinstance(value, list):
        raise CodecError("places must be a list of [rack, site, row]")
    out = []
    for place in value:
        rack, site, row = _texts(place, "a place", 3)
        out.append((rack, site, row))
    return tuple(out)


def _d_rack_figures(r: Mapping[str, Any]) -> RackFiguresBatch:
    racks = r["racks"]
    if (
        not isinstance(racks, list)
        or not all(isinstance(n, str) for n in racks)
        or len(set(racks)) != len(racks)
    ):
        raise CodecError("racks must be a list of distinct names")
    columns = r["f"]
    if not isinstance(columns, dict):
        raise CodecError("f must map figures to columns")
    values = np.full((len(racks), len(RACK_FIGURES)), np.nan)
    for i, name in enumerate(RACK_FIGURES):
        if name in columns:  # a figure an older writer did not know reads as not known
            column = columns[name]
            if not isinstance(column, list) or len(column) != len(racks):
                raise CodecError(f"rack figure {name} must have one value per rack")
            values[:, i] = [number_or_nan(v) for v in column]
    down = r["down"]
    if not isinstance(down, list) or len(down) != len(racks) or not all(isinstance(d, bool) for d in down):
        raise CodecError("down must be a list of one true/false per rack")
    return RackFiguresBatch(
        record_time(r),
        tuple(racks),
        values,
        np.array(down, dtype=bool),
        _texts(r["worst_node"], "worst_node", len(racks)),
        _texts(r["worst_cause"], "worst_cause", len(racks)),
        _places(r.get("places", [])),
    )


def _d_loadgen_detail(r: Mapping[str, Any]) -> LoadGenDetail:
    values = r["values"]
    if not isinstance(values, dict) or not all(isinstance(k, str) for k in values):
        raise CodecError("values must map record keys to values")
    return LoadGenDetail(record_time(r), checked_text(r["node"], "node"), values)


def _d_engine_queue(r: Mapping[str, Any]) -> EngineQueue:
    values = [number_or_nan(r.get(key)) for key in ("running", "waiting", "kv_cache_pct")]
    if any(v < 0 for v in values):  # NaN compares False: a gauge not reported is fine
        raise CodecError("engine queue gauges must not be negative")
    return EngineQueue(record_time(r), checked_text(r["node"], "node"), *values)


def _d_status(r: Mapping[str, Any]) -> NodeStatus:
    if r["state"] not in NODE_STATES:
        raise CodecError(f"state must be one of {NODE_STATES}")
    return NodeStatus(
        record_time(r),
        checked_name(r["node"], "node"),
        r["state"],
        checked_text(r.get("reason", ""), "reason"),
    )


def _d_notice(r: Mapping[str, Any]) -> Notice:
    if r["level"] not in ("info", "warning", "error"):
        raise CodecError("notice level must be info, warning or error")
    node, source = r.get("node"), r.get("source")
    return Notice(
        record_time(r),
        r["level"],
        checked_text(r["message"], "message"),
        None if node is None else checked_name(node, "node"),
        None if source is None else checked_name(source, "source"),
    )


DECODERS: dict[str, Callable[[Mapping[str, Any]], Event]] = {
    "run_started": _d_run_started,
    "gpu": _d_gpu,
    "progress": _d_progress,
    "latency": decode_latency,
    "limit_counts": _d_limit_counts,
    "rack_figures": _d_rack_figures,
    "loadgen_detail": _d_loadgen_detail,
    "engine_queue": _d_engine_queue,
    "status": _d_status,
    "log": lambda r: LogLine(
        record_time(r), checked_name(r["node"], "node"), checked_text(r["text"], "text")
    ),
    "notice": _d_notice,
    "heartbeat": lambda r: Heartbeat(record_time(r)),
    "run_ended": lambda r: RunEnded(record_time(r), checked_text(r.get("reason", ""), "reason")),
}
