"""The GPU answers of a round read straight into arrays, without a Python object per sample.

A 1,000-rack alerting pass asks every GPU's ten fields: ten instant vectors of 72,000 samples. Read by
``orjson`` each sample is a dict, its labels' dict and strings, a list, a float and a string, and all ten
answers are held that way until the round's last query answers (~120-180 MB on top of the core, the
watch's peak). Prometheus and VictoriaMetrics write a vector compactly (``{"metric":{...},"value":[t,"v"]}``
one after another, no spaces), so the values are cut out of the bytes and converted by one numpy call,
and each sample's labels stay the bytes of their JSON object, looked up in what the same bytes meant in an
earlier answer: every GPU field names the same series, so a series' labels are read as JSON once, not
once a field and round. What a round holds of an answer is then two arrays (16 bytes a sample).

Anything else (spaces, another key order, a value numpy reads differently from Python's ``float``, labels
that are not a flat object of strings) is read the exact way (:func:`.answers.parse_response`), which
says what is wrong with an answer, and gives the same column.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from itertools import repeat

import numpy as np
import orjson

from tokenwatch.base.events import GPU_METRICS, FloatArray, GpuBatch, IntArray
from tokenwatch.sources.metric_catalogue import throttle_masks

_RESULT = b'"result":['
_FIRST = b'{"metric":'  # the first sample's start
_VALUE = b',"value":['  # between a sample's labels and its [time,"value"]
_NEXT = b'"]},{"metric":'  # between one sample's value and the next sample's labels
_LAST = b'"]}]'  # the last sample's value, then the result's end
# What a compact sample's [time,"value"] holds once its quote is taken out: numbers (decimal, exponent, NaN,
# +Inf, -Inf) and the comma between them.
_NUMBER_BYTES = b"0123456789.,eE+-NaInf"
_STR = frozenset({str})


@dataclass(frozen=True, slots=True)
class GpuColumn:
    """One GPU field's answer: sample i is the GPU ``keys[i]`` (``node * gpus_per_node + gpu``) with
    ``values[i]`` (the field's unit), in the answer's order; NaN samples and labels that name no GPU of
    the run are left out."""

    keys: IntArray
    values: FloatArray


def compact_vector(body: bytes) -> tuple[list[bytes], FloatArray] | None:
    """(each sample's labels, the bytes of their JSON object; the samples' values, NaN kept) of a
    successful, compact instant vector, or None for anything else. The labels are not read here: the
    caller reads each as JSON (or knows it already) and declines the answer where one is not an object."""
    head, found, rest = body.partition(_RESULT)
    if not found:
        return None
    labels: list[bytes] = []
    values = np.zeros(0)
    tail = rest
    if not rest.startswith(b"]"):
        # The last sample's end: the last such bytes, since a label value may hold them (its quote
        # escaped: \"]}]). Any after the result (in a key the API does not have) leave what is cut out
        # no series of samples, and the exact reading reads the answer.
        end = rest.rfind(_LAST)
        if not rest.startswith(_FIRST) or end < 0:
            return None
        tail = rest[end + len(_LAST) - 1 :]
        # L1,"value":[T1,"V1"]},{"metric":L2,"value":[T2,"V2 -> L1, T1,"V1, L2, T2,"V2 (neither separator
        # can be inside a JSON string: its inner quotes would be escaped)
        parts = rest[len(_FIRST) : end].replace(_NEXT, _VALUE).split(_VALUE)
        labels = parts[0::2]
        pairs = parts[1::2]
        del parts
        if len(labels) != len(pairs):
            return None
        parsed = _values(pairs)
        if parsed is None:
            return None
        values = parsed
    try:
        doc = orjson.loads(head + _RESULT + tail)
    except orjson.JSONDecodeError:
        return None
    data = doc.get("data") if isinstance(doc, dict) and doc.get("status") == "success" else None
    if not isinstance(data, dict) or data.get("resultType") != "vector" or data.get("result") != []:
        return None
    return labels, values


def without_gaps(labels: list[bytes], values: FloatArray) -> tuple[list[bytes], FloatArray]:
    """A compact answer's samples less its NaN ones (gaps, as the exact reading leaves them out)."""
    keep = ~np.isnan(values)
    if keep.all():
        return labels, values
    return [one for one, ok in zip(labels, keep.tolist(), strict=True) if ok], values[keep]


def label_sets(labels: list[bytes], which: list[int]) -> list[dict[str, str]] | None:
    """The label sets at ``which``, each read as JSON; None where one is not a JSON object of strings
    (the exact reading then reads the answer, or says what is wrong)."""
    read: list[dict[str, str]] = []
    for k in which:
        try:
            doc = orjson.loads(labels[k])
        except orjson.JSONDecodeError:
            return None
        if not isinstance(doc, dict) or not _STR.issuperset(map(type, doc.values())):
            return None
        read.append(doc)
    return read


def _values(pairs: list[bytes]) -> FloatArray | None:
    """The values of the samples' ``T,"V`` (each exactly one comma and one quote, numbers only), or None."""
    for mark in (b",", b'"', b',"'):
        if set(map(bytes.count, pairs, repeat(mark))) != {1}:
            return None
    text = b",".join(pairs).translate(None, b'"')
    if text.translate(None, _NUMBER_BYTES):
        return None
    try:
        numbers = np.fromstring(text, dtype=np.float64, sep=",")
    except ValueError:  # a token that is not a number
        return None
    if numbers.size != 2 * len(pairs):
        return None
    return numbers[1::2].copy()  # the times are the query's instant, which the caller knows


class GpuLabelKeys:
    """What each GPU series' labels mean (the bytes of their JSON object -> the GPU's key), learnt from
    the first answer that names them; ``key_of`` reads a label set the first time (and notes a name that
    is no node or GPU of the run). Only known GPUs are kept: a name that is none is read (and noted) each
    time, as the exact reading does. At most ``limit`` label sets are kept (labels that keep changing,
    such as a restarted exporter's, start the memory afresh rather than grow it)."""

    def __init__(self, key_of: Callable[[Mapping[str, str]], int], limit: int) -> None:
        self.key_of = key_of
        self.limit = limit
        self._known: dict[bytes, int] = {}

    def column(self, labels: list[bytes], values: FloatArray) -> GpuColumn | None:
        """The column of one compact answer's samples, or None where a label set is not a JSON object
        of strings (the exact reading then reads it, or says what is wrong)."""
        labels, values = without_gaps(labels, values)
        keys = np.fromiter(map(self._known.get, labels, repeat(-1)), np.int64, len(labels))
        missed = np.flatnonzero(keys < 0).tolist()
        # every label set read before any name is noted: a declined answer notes none
        read = label_sets(labels, missed)
        if read is None:
            return None
        if len(self._known) + len(missed) > self.limit:
            self._known.clear()
        for k, doc in zip(missed, read, strict=True):
            keys[k] = key = self.key_of(doc)
            if key >= 0:
                self._known[labels[k]] = key
        known = keys >= 0
        return GpuColumn(keys[known], values[known])


def gpu_batch(t: float, columns: Mapping[str, GpuColumn], gpus_per_node: int) -> GpuBatch | None:
    """One :class:`GpuBatch` of a round's GPU columns (field -> column): one row per GPU, in the order
    the GPUs first appear (fields in ``GPU_METRICS`` order, then the throttle reasons); a GPU named twice
    in one field keeps its last value. None where no column names a GPU."""
    fields = [f for f in (*GPU_METRICS, "throttle_reasons") if f in columns and len(columns[f].keys)]
    if not fields:
        return None
    every = np.concatenate([columns[f].keys for f in fields])
    unique, first = np.unique(every, return_index=True)
    appearance = np.argsort(first, kind="stable")
    ordered = unique[appearance]
    row_of = np.empty(len(ordered), np.int64)  # a key's place in ``unique`` -> its row
    row_of[appearance] = np.arange(len(ordered))
    values = np.full((len(ordered), len(GPU_METRICS)), np.nan)
    reasons = np.zeros(len(ordered), np.uint64)
    for field in fields:
        column = columns[field]
        rows = row_of[np.searchsorted(unique, column.keys)]
        if field == "throttle_reasons":
            reasons[rows] = throttle_masks(column.values)
        else:
            values[rows, GPU_METRICS.index(field)] = column.values
    node_index, gpu = np.divmod(ordered, gpus_per_node)
    for array in (node_index, gpu, values, reasons):
        array.flags.writeable = False
    return GpuBatch(t, node_index, gpu, values, reasons)
