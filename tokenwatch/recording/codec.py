"""Events to and from JSON-ready dicts: the recording format, one record per line.

Every record has ``k`` (kind) and ``t``. Batches are columnar (one list per GPU metric) because
columns of similar numbers compress far better than rows. NaN is written as ``null``.
Decoding validates shape and types: a record that does not fit raises :class:`CodecError`,
which readers turn into a skipped line with a warning.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import orjson

from tokenwatch.base.events import GPU_METRICS, Event
from tokenwatch.recording.counter_deltas import CounterDeltaReader
from tokenwatch.recording.decoding import DECODERS, decode_gpu_batch, decode_latency, decode_progress_batch
from tokenwatch.recording.encoding import dumps, encode
from tokenwatch.recording.energy_deltas import EnergyDeltaReader
from tokenwatch.recording.gpu_columns_fast import GPU_BATCH_PREFIX, some_gpu_columns
from tokenwatch.recording.gpu_int_columns import GpuIntColumnReader
from tokenwatch.recording.latency_buckets import reference_values
from tokenwatch.recording.record_checks import CodecError, IndexArrays

__all__ = ["SCHEMA_VERSION", "CodecError", "Decoder", "decode", "dumps", "encode", "loads"]

SCHEMA_VERSION = 1


class Decoder:
    """Records of one recording -> events. Make one per recording read: it keeps the last index
    arrays it built (see :class:`IndexArrays`), which are worth keeping exactly as long as one
    stream of records repeats them.

    ``gpu_metrics`` limits which GPU batch columns are decoded (the others read as missing;
    ``"throttle_reasons"`` may be named too, else they read as none): a summary needs power alone,
    and decoding one column of nine is most of its speed.
    """

    __slots__ = ("_counts", "_decoders", "_energy", "_gpu_ints", "_index", "bucket_values", "gpu_metrics")

    def __init__(self, gpu_metrics: tuple[str, ...] = GPU_METRICS) -> None:
        self.gpu_metrics = gpu_metrics
        # The values of the log buckets as the recording's writer had them (recording.latency_buckets:
        # the reader sets them from the header); the reference table until then.
        self.bucket_values = reference_values()
        self._index = index = IndexArrays()
        self._energy = energy = EnergyDeltaReader()
        self._counts = counts = CounterDeltaReader()
        self._gpu_ints = ints = GpuIntColumnReader()
        if "energy_j" in gpu_metrics:
            gpu_batch: Callable[[Mapping[str, Any]], Event] = lambda r: decode_gpu_batch(  # noqa: E731
                energy.restore(ints.restore(r)), index, gpu_metrics
            )
        else:
            gpu_batch = lambda r: decode_gpu_batch(ints.restore(r), index, gpu_metrics)  # noqa: E731
        self._decoders: dict[str, Callable[[Mapping[str, Any]], Event]] = {
            **DECODERS,
            "gpu_batch": gpu_batch,
            "progress_batch": lambda r: decode_progress_batch(counts.restore(r), index),
            "latency": lambda r: decode_latency(r, self.bucket_values),
        }

    def new_frame(self) -> None:
        """The records that follow begin a zstd frame: energy and counter differences start afresh there."""
        self._energy.new_frame()
        self._counts.new_frame()
        self._gpu_ints.new_frame()

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
        if self.gpu_metrics is not GPU_METRICS and line.startswith(GPU_BATCH_PREFIX):
            try:
                record = some_gpu_columns(line, self.gpu_metrics)
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


def loads(line: bytes, gpu_metrics: tuple[str, ...] = GPU_METRICS) -> Event:
    """One recording line on its own (a stream of them reads faster through one :class:`Decoder`)."""
    return Decoder(gpu_metrics).loads(line)
