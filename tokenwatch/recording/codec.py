"""Events to and from JSON-ready dicts: the recording format, one record per line.

Every record has ``k`` (kind) and ``t``. Batches are columnar (one list per GPU metric) because
columns of similar numbers compress far better than rows. NaN is written as ``null``.
Decoding validates shape and types: a record that does not fit raises :class:`CodecError`,
which readers turn into a skipped line with a warning.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import orjson

from tokenwatch.base.events import (
    GPU_METRICS,
    LATENCY_METRICS,
    MAX_RUN_GPUS,
    MAX_RUN_TIME_S,
    NODE_STATES,
    OPTIONAL_GPU_METRICS,
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
from tokenwatch.recording.counter_deltas import CounterDeltaReader
from tokenwatch.recording.energy_deltas import DELTA_KEY, EnergyDeltaReader
from tokenwatch.recording.latency_buckets import FIRST_KEY, from_buckets, reference_values

SCHEMA_VERSION = 1
# Bounds on what one record may hold (the run's size and clock are bounded in tokenwatch.base.events). A value
# beyond them is damage or hostility, never a reading, and would otherwise reach loops and allocations.
MAX_COUNTER = 2**63 - 1  # counters are int64 in the core
MAX_GPU_VALUE = 1e9  # above every GPU metric's plausible range (MiB of HBM are the largest)
MAX_LATENCY_S = 1e6
MAX_NAME_CHARS = 1024  # run, node, source names
MAX_TEXT_CHARS = 65_536  # log lines, notices, reasons
_DUMP_OPTIONS = orjson.OPT_SERIALIZE_NUMPY


class CodecError(ValueError):
    """A record that is not a valid event; the message says why."""


def encode(event: Event) -> dict[str, Any]:
    return _ENCODERS[type(event)](event)


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


_ENCODERS: dict[type, Callable[[Any], dict[str, Any]]] = {
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


# ----------------------------------------------------------------------------- decoding
def _time(r: Mapping[str, Any]) -> float:
    t = r["t"]
    if isinstance(t, bool) or not isinstance(t, int | float) or not math.isfinite(t) or t < 0:
        raise CodecError(f"bad time {t!r}")
    if t > MAX_RUN_TIME_S:
        raise CodecError(f"run time {t:g} s is beyond the limit of {MAX_RUN_TIME_S:,.0f} s (366 days)")
    return float(t)


def _text(value: Any, what: str, limit: int = MAX_TEXT_CHARS) -> str:
    if not isinstance(value, str):
        raise CodecError(f"{what} must be text")
    if len(value) > limit:
        raise CodecError(f"{what} is longer than {limit:,} characters")
    return value


def _name(value: Any, what: str) -> str:
    return _text(value, what, MAX_NAME_CHARS)


def _opt_int(value: Any, what: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise CodecError(f"{what} must be a whole number")
    return value


def _count(value: Any, what: str) -> int | None:
    """A counter: a whole number in 0..2^63-1 (or missing)."""
    number = _opt_int(value, what)
    if number is not None and not 0 <= number <= MAX_COUNTER:
        raise CodecError(f"{what} must be a whole number from 0 to 2^63-1")
    return number


def _float(value: Any) -> float:
    if value is None:
        return math.nan
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise CodecError(f"expected a number, got {value!r}")
    return float(value)


def _gpu_value(value: Any, metric: str) -> float:
    number = _float(value)
    if not abs(number) <= MAX_GPU_VALUE and not math.isnan(number):
        raise CodecError(f"{metric} {number:g} is beyond any reading (|value| <= {MAX_GPU_VALUE:g})")
    return number


def _check_gpu_block(block: np.ndarray) -> None:
    if not (np.isnan(block) | (np.abs(block) <= MAX_GPU_VALUE)).all():
        raise CodecError(f"gpu_batch holds a value beyond any reading (|value| <= {MAX_GPU_VALUE:g})")


def _check_counts(arr: np.ndarray, what: str) -> np.ndarray:
    if len(arr) and arr.min() < 0:
        raise CodecError(f"{what} must not be negative")
    return arr


class _IndexArrays:
    """Batches repeat the same node/GPU index lists tick after tick: the converted array of the last
    list of each kind is handed out again (read-only, so sharing it is safe) when the next list equals
    it. Faster, and the core recognises repeated index arrays by identity (its batch fast paths)."""

    __slots__ = ("_last",)

    def __init__(self) -> None:
        self._last: dict[str, tuple[list[Any], np.ndarray]] = {}

    def array(self, value: Any, what: str) -> np.ndarray:
        """``value`` as node or GPU numbers: whole numbers from 0 to below :data:`MAX_RUN_GPUS` (no run has
        more nodes or GPUs), so 1e9 or -1 is refused here, with the line, not passed on to the core."""
        cached = self._last.get(what)
        if cached is not None and cached[0] == value:
            return cached[1]
        if not isinstance(value, list):
            raise CodecError(f"{what} must be a list")
        try:
            found: np.ndarray = np.array(value)  # its own type: 1e9 is a float, not cast to a number
        except (TypeError, ValueError):
            raise CodecError(f"{what} holds a value that is not a number") from None
        if found.ndim != 1 or (len(found) and found.dtype.kind not in "iu"):
            raise CodecError(f"{what} must be a flat list of whole numbers")
        arr = found.astype(np.int64)
        if len(arr) and not (arr.min() >= 0 and arr.max() < MAX_RUN_GPUS):
            raise CodecError(f"{what} must be numbers from 0 to {MAX_RUN_GPUS - 1:,}")
        arr.flags.writeable = False
        self._last[what] = (value, arr)
        return arr


def _array(value: Any, dtype: type, what: str) -> np.ndarray:
    if not isinstance(value, list):
        raise CodecError(f"{what} must be a list")
    try:
        arr: np.ndarray = np.array(value, dtype=dtype)
    except (TypeError, ValueError, OverflowError):
        raise CodecError(f"{what} holds a value that is not a number") from None
    if arr.ndim != 1:
        raise CodecError(f"{what} must be a flat list")
    return arr


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
    gpus = _opt_int(r["gpus_per_node"], "gpus_per_node")
    if gpus is None or not 0 < gpus <= 1024:
        raise CodecError("gpus_per_node must be between 1 and 1024")
    if len(nodes) * gpus > MAX_RUN_GPUS:
        raise CodecError(
            f"a run declares at most {MAX_RUN_GPUS:,} GPUs; this one {len(nodes):,} nodes x {gpus} = "
            f"{len(nodes) * gpus:,} GPUs"
        )
    nominal = r.get("nominal_duration_s")
    if nominal is not None and not 0 <= _float(nominal) <= MAX_RUN_TIME_S:
        raise CodecError(f"nominal_duration_s must be between 0 and {MAX_RUN_TIME_S:g} s")
    meta = r.get("meta") or {}
    if not isinstance(meta, dict):
        raise CodecError("meta must be a mapping")
    return RunStarted(
        t=_time(r),
        name=_name(r["name"], "name"),
        scenario=r["scenario"],
        nodes=tuple(nodes),
        gpus_per_node=gpus,
        nominal_duration_s=None if nominal is None else _float(nominal),
        total_samples=_count(r.get("total_samples"), "total_samples"),
        source=r["source"],
        wall_epoch=_float(r["wall_epoch"]),
        meta=meta,
    )


def _d_gpu(r: Mapping[str, Any]) -> GpuSample:
    gpu = _opt_int(r["gpu"], "gpu")
    reasons = _opt_int(r.get("throttle_reasons", 0), "throttle_reasons") or 0
    if gpu is None or not 0 <= reasons < 2**64:
        raise CodecError("bad GPU index or throttle reasons")
    values = {m: _gpu_value(r.get(m), m) for m in GPU_METRICS}
    return GpuSample(_time(r), _name(r["node"], "node"), gpu, **values, throttle_reasons=reasons)


def _d_gpu_batch(r: Mapping[str, Any], index: _IndexArrays, metrics: tuple[str, ...]) -> GpuBatch:
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
        _check_gpu_block(block)
        values[:, wanted] = block.T
    if "throttle_reasons" in r or metrics is GPU_METRICS:
        reasons = _array(r["throttle_reasons"], np.uint64, "throttle_reasons")
    else:  # not asked for (see decode's gpu_metrics)
        reasons = np.zeros(len(gpu), np.uint64)
    if not len(node_index) == len(gpu) == len(values) == len(reasons):
        raise CodecError("batch columns differ in length")
    return GpuBatch(_time(r), node_index, gpu, values, reasons)


def _d_progress(r: Mapping[str, Any]) -> Progress:
    return Progress(
        _time(r),
        _name(r["node"], "node"),
        _count(r.get("samples"), "samples"),
        _count(r.get("tokens"), "tokens"),
        _count(r.get("prompt_tokens"), "prompt_tokens"),
        filled=r.get("filled") is True,
    )


def _d_progress_batch(r: Mapping[str, Any], index: _IndexArrays) -> ProgressBatch:
    node_index = index.array(r["node_index"], "progress_batch.node_index")
    samples = _check_counts(_array(r["samples"], np.int64, "samples"), "samples")
    tokens = _check_counts(_array(r["tokens"], np.int64, "tokens"), "tokens")
    prompt = (
        _check_counts(_array(r["prompt_tokens"], np.int64, "prompt_tokens"), "prompt_tokens")
        if "prompt_tokens" in r
        else None
    )
    if not len(node_index) == len(samples) == len(tokens) or (
        prompt is not None and len(prompt) != len(tokens)
    ):
        raise CodecError("batch columns differ in length")
    return ProgressBatch(_time(r), node_index, samples, tokens, prompt, filled=r.get("filled") is True)


def _d_latency(r: Mapping[str, Any], bucket_values: np.ndarray | None = None) -> LatencyBatch:
    if FIRST_KEY in r:  # a histogram written as bucket numbers (recording.latency_buckets)
        table = reference_values() if bucket_values is None else bucket_values
        return from_buckets(r, _time(r), _name(r["node"], "node"), table)
    if r["metric"] not in LATENCY_METRICS:
        raise CodecError(f"latency metric must be one of {LATENCY_METRICS}")
    values = _array(r["values_s"], np.float64, "values_s")
    if not ((values >= 0) & (values <= MAX_LATENCY_S)).all():
        raise CodecError(f"latencies must be between 0 and {MAX_LATENCY_S:g} s")
    counts = _array(r["counts"], np.int64, "counts") if r.get("counts") is not None else None
    if counts is not None:
        _check_counts(counts, "counts")
        if len(counts) != len(values):
            raise CodecError("counts and values differ in length")
    return LatencyBatch(_time(r), _name(r["node"], "node"), r["metric"], values, counts)


def _d_limit_counts(r: Mapping[str, Any]) -> LatencyLimitCounts:
    if r["metric"] not in LATENCY_METRICS:
        raise CodecError(f"latency metric must be one of {LATENCY_METRICS}")
    limit = _float(r["limit_s"])
    if not (math.isfinite(limit) and limit > 0):
        raise CodecError("limit_s must be a positive number")
    node_index = _array(r["node_index"], np.int64, "node_index")
    judged = _array(r["judged"], np.int64, "judged")
    over = _array(r["over"], np.int64, "over")
    if not len(node_index) == len(judged) == len(over):
        raise CodecError("batch columns differ in length")
    if (over < 0).any() or (over > judged).any():
        raise CodecError("over-limit counts must be between 0 and the samples judged")
    return LatencyLimitCounts(_time(r), r["metric"], limit, node_index, judged, over)


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
            values[:, i] = [_float(v) for v in column]
    down = r["down"]
    if not isinstance(down, list) or len(down) != len(racks) or not all(isinstance(d, bool) for d in down):
        raise CodecError("down must be a list of one true/false per rack")
    return RackFiguresBatch(
        _time(r),
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
    return LoadGenDetail(_time(r), _text(r["node"], "node"), values)


def _d_engine_queue(r: Mapping[str, Any]) -> EngineQueue:
    values = [_float(r.get(key)) for key in ("running", "waiting", "kv_cache_pct")]
    if any(v < 0 for v in values):  # NaN compares False: a gauge not reported is fine
        raise CodecError("engine queue gauges must not be negative")
    return EngineQueue(_time(r), _text(r["node"], "node"), *values)


def _d_status(r: Mapping[str, Any]) -> NodeStatus:
    if r["state"] not in NODE_STATES:
        raise CodecError(f"state must be one of {NODE_STATES}")
    return NodeStatus(_time(r), _name(r["node"], "node"), r["state"], _text(r.get("reason", ""), "reason"))


def _d_notice(r: Mapping[str, Any]) -> Notice:
    if r["level"] not in ("info", "warning", "error"):
        raise CodecError("notice level must be info, warning or error")
    node, source = r.get("node"), r.get("source")
    return Notice(
        _time(r),
        r["level"],
        _text(r["message"], "message"),
        None if node is None else _name(node, "node"),
        None if source is None else _name(source, "source"),
    )


_DECODERS: dict[str, Callable[[Mapping[str, Any]], Event]] = {
    "run_started": _d_run_started,
    "gpu": _d_gpu,
    "progress": _d_progress,
    "latency": _d_latency,
    "limit_counts": _d_limit_counts,
    "rack_figures": _d_rack_figures,
    "loadgen_detail": _d_loadgen_detail,
    "engine_queue": _d_engine_queue,
    "status": _d_status,
    "log": lambda r: LogLine(_time(r), _name(r["node"], "node"), _text(r["text"], "text")),
    "notice": _d_notice,
    "heartbeat": lambda r: Heartbeat(_time(r)),
    "run_ended": lambda r: RunEnded(_time(r), _text(r.get("reason", ""), "reason")),
}


class Decoder:
    """Records of one recording -> events. Make one per recording read: it keeps the last index
    arrays it built (see :class:`_IndexArrays`), which are worth keeping exactly as long as one
    stream of records repeats them.

    ``gpu_metrics`` limits which GPU batch columns are decoded (the others read as missing;
    ``"throttle_reasons"`` may be named too, else they read as none): a summary needs power alone,
    and decoding one column of nine is most of its speed.
    """

    __slots__ = ("_counts", "_decoders", "_energy", "_index", "bucket_values", "gpu_metrics")

    def __init__(self, gpu_metrics: tuple[str, ...] = GPU_METRICS) -> None:
        self.gpu_metrics = gpu_metrics
        # The values of the log buckets as the recording's writer had them (recording.latency_buckets:
        # the reader sets them from the header); the reference table until then.
        self.bucket_values = reference_values()
        self._index = index = _IndexArrays()
        self._energy = energy = EnergyDeltaReader()
        self._counts = counts = CounterDeltaReader()
        if "energy_j" in gpu_metrics:
            gpu_batch: Callable[[Mapping[str, Any]], Event] = lambda r: _d_gpu_batch(  # noqa: E731
                energy.restore(r), index, gpu_metrics
            )
        else:
            gpu_batch = lambda r: _d_gpu_batch(r, index, gpu_metrics)  # noqa: E731
        self._decoders: dict[str, Callable[[Mapping[str, Any]], Event]] = {
            **_DECODERS,
            "gpu_batch": gpu_batch,
            "progress_batch": lambda r: _d_progress_batch(counts.restore(r), index),
            "latency": lambda r: _d_latency(r, self.bucket_values),
        }

    def new_frame(self) -> None:
        """The records that follow begin a zstd frame: energy and counter differences start afresh there."""
        self._energy.new_frame()
        self._counts.new_frame()

    def decode(self, record: Any) -> Event:
        """The event in a parsed record; :class:`CodecError` says what is wrong with it."""
        if not isinstance(record, dict):
            raise CodecError("record is not a JSON object")
        kind = record.get("k")
        decoder = self._decoders.get(kind)  # type: ignore[arg-type]
        if decoder is None:
            raise CodecError(f"unknown record kind {kind!r}")
        try:
            return decoder(record)
        except KeyError as exc:
            raise CodecError(f"{record['k']} record without {exc.args[0]!r}") from None
        except CodecError as exc:
            raise CodecError(f"bad {record['k']} record: {exc}") from None
        except (TypeError, ValueError, OverflowError) as exc:
            raise CodecError(f"bad {record['k']} record: {exc}") from None

    def loads(self, line: bytes) -> Event:
        """The event on one recording line."""
        record = None
        if self.gpu_metrics is not GPU_METRICS and line.startswith(_GPU_BATCH_PREFIX):
            try:
                record = _some_gpu_columns(line, self.gpu_metrics)
            except orjson.JSONDecodeError:
                record = None  # not our layout after all: the full parse below says what is wrong
        if record is None:
            try:
                record = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                raise CodecError(f"not JSON ({exc.msg})") from None
        return self.decode(record)


def decode(record: Any, gpu_metrics: tuple[str, ...] = GPU_METRICS) -> Event:
    """One record on its own (a stream of them reads faster through one :class:`Decoder`)."""
    return Decoder(gpu_metrics).decode(record)


_GPU_BATCH_PREFIX = b'{"k":"gpu_batch",'
_COLUMNS_KEY = b',"m":{'
_THROTTLE_KEY = b'},"throttle_reasons":'


def _some_gpu_columns(line: bytes, gpu_metrics: tuple[str, ...]) -> dict[str, Any] | None:
    """The record of a GPU batch line with only ``gpu_metrics`` parsed (None: not our usual layout).

    GPU batches are ~90 % of a recording's bytes and a summary needs one column of nine: parsing only
    the head, the wanted columns and the tail makes reading 4x faster. It relies on the layout this
    module writes (head, then ``"m"``, then ``throttle_reasons`` last); anything else takes the full path.
    """
    columns_at = line.find(_COLUMNS_KEY)
    throttle_at = line.rfind(_THROTTLE_KEY)
    if columns_at < 0 or throttle_at < columns_at or not line.endswith(b"]}"):
        return None
    record = orjson.loads(line[:columns_at] + b"}")
    columns = {}
    for name in (*gpu_metrics, DELTA_KEY) if "energy_j" in gpu_metrics else gpu_metrics:
        key = b'"' + name.encode() + b'":['
        start = line.find(key, columns_at, throttle_at)
        if start >= 0:
            end = line.find(b"]", start)
            columns[name] = orjson.loads(line[start + len(key) - 1 : end + 1])
    record["m"] = columns
    if "throttle_reasons" in gpu_metrics:
        record["throttle_reasons"] = orjson.loads(line[throttle_at + len(_THROTTLE_KEY) : -1])
    return record if isinstance(record, dict) else None


def loads(line: bytes, gpu_metrics: tuple[str, ...] = GPU_METRICS) -> Event:
    """One recording line on its own (a stream of them reads faster through one :class:`Decoder`)."""
    return Decoder(gpu_metrics).loads(line)
