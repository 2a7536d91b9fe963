"""A range answer's points read straight from its bytes, without a Python object per point.

A 1,000-rack backfill is 13 answers of 1,000 series x ~320 points: 4 million ``[time, "value"]`` pairs. Read
by ``orjson`` they are 4 million lists, strings and floats before numpy sees a number (the backfill's
largest cost, and ~150 bytes of Python heap a point while an answer is read). Prometheus and
VictoriaMetrics write a matrix compactly (``"values":[[1712345678.5,"12.5"],...]``, no spaces), so each
series' points are cut out of the answer as bytes, and all of them go through one numpy conversion; the
rest of the answer (the labels, the status) is small and goes to orjson as before.

Anything else, such as spaces, a value numpy reads differently from Python's ``float`` (hex, ``nan(...)``),
or counts that do not add up, gives None, and the caller reads the answer the exact way, which says what
is wrong with it.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import numpy as np
import orjson

from tokenwatch.base.events import FloatArray

# labels, the points' Unix times and their values (NaN points left out), as float64 arrays
RangeSeries = tuple[dict[str, str], FloatArray, FloatArray]

_VALUES = b'"values":['
# What a compact matrix's points hold once their brackets and quotes are taken out: numbers (decimal,
# exponent, NaN, +Inf, -Inf) and the commas between them.
_NUMBER_BYTES = b"0123456789.,eE+-NaInf"


def split_points(body: bytes) -> tuple[bytes, list[tuple[FloatArray, FloatArray]]] | None:
    """(the answer with each series' points taken out, ``"values":[]`` left in their place; each series'
    point times and values, in the order the series come, NaN values kept), or None where the answer is
    not a compact matrix."""
    skeleton: list[bytes] = []
    segments: list[bytes] = []  # each series' points without the outer brackets: [t,"v"],[t,"v"]
    pos = 0
    while (found := body.find(_VALUES, pos)) >= 0:
        begin = found + len(_VALUES)  # just inside the outer bracket
        if body.startswith(b"]", begin):
            end = begin
        else:
            close = body.find(b"]]", begin)
            if close < 0:
                return None
            end = close + 1
        skeleton.append(body[pos:begin])
        segments.append(body[begin:end])
        pos = end
    skeleton.append(body[pos:])
    counts = list(map(bytes.count, segments, [b"["] * len(segments)))
    total = sum(counts)
    joined = b",".join(segment for segment in segments if segment)
    del segments  # each copy of the points' bytes is let go once the next is made: ~2x the answer at most
    # One point is exactly one [, one ], one ," and one "] (a value's quotes): anything else is
    # another shape.
    shape = (joined.count(b"]"), joined.count(b',"'), joined.count(b'"]'))
    if shape != (total, total, total):
        return None
    text = joined.translate(None, b'[]"')
    del joined
    if text.translate(None, _NUMBER_BYTES):
        return None
    try:
        numbers = np.fromstring(text, dtype=np.float64, sep=",") if total else np.zeros(0)
    except ValueError:  # a token that is not a number
        return None
    del text
    if numbers.size != 2 * total:
        return None
    pairs = numbers.reshape(-1, 2).T.copy()  # one copy makes both columns contiguous
    del numbers
    times, values = pairs[0], pairs[1]
    bounds = np.concatenate([[0], np.cumsum(counts)]).tolist()
    points = [(times[a:b], values[a:b]) for a, b in pairwise(bounds)]
    return b"".join(skeleton), points


def compact_matrix(body: bytes) -> list[RangeSeries] | None:
    """The series of a successful, compact matrix answer (NaN points left out, as the exact reading
    does), or None for anything else: the exact reading then says what is wrong, if anything is."""
    split = split_points(body)
    if split is None:
        return None
    skeleton, points = split
    try:
        doc = orjson.loads(skeleton)
    except orjson.JSONDecodeError:
        return None
    data = doc.get("data") if isinstance(doc, dict) and doc.get("status") == "success" else None
    result = data.get("result") if isinstance(data, dict) and data.get("resultType") == "matrix" else None
    if not isinstance(result, list) or len(result) != len(points):
        return None
    series: list[RangeSeries] = []
    for item, (stamps, numbers) in zip(result, points, strict=True):
        metric = _metric(item)
        if metric is None:
            return None
        keep = ~np.isnan(numbers)
        series.append((metric, stamps, numbers) if keep.all() else (metric, stamps[keep], numbers[keep]))
    return series


def _metric(item: Any) -> dict[str, str] | None:
    """A series' labels, where it is ``{"metric": {name: "value"...}, "values": []}`` (its points cut
    out), else None."""
    if not isinstance(item, dict) or item.get("values") != [] or len(item) != 2:
        return None
    metric = item.get("metric")
    if not isinstance(metric, dict) or not all(type(v) is str for v in metric.values()):
        return None
    return metric
