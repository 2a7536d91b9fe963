"""What a Prometheus API answer says: an instant query's samples (:func:`parse_response`), a range
query's series (:func:`parse_range_response`), an HTTP error's one line; anything unexpected is a
:class:`PromApiError`, the error every query's failure becomes (:mod:`.api`).

A range answer is read straight into numpy (one vectorised conversion of the value strings per series),
not one Python tuple per point: a backfill of 64 racks is ~800,000 points.
"""

from __future__ import annotations

import math
from itertools import chain
from typing import Any

import numpy as np
import orjson

from tokenwatch.base.events import FloatArray
from tokenwatch.base.formatting import one_line, printable
from tokenwatch.inputs.prometheus.matrix_bytes import RangeSeries, compact_matrix

Sample = tuple[dict[str, str], float]


class PromApiError(Exception):
    """A query that failed: unreachable server, HTTP error, a PromQL error or an answer we cannot read."""


def status_error(status: int, body: bytes) -> PromApiError:
    """An answer other than 200, in one line: Prometheus' own JSON error (bad PromQL is a 400 with
    one), else the status and the start of what came."""
    try:
        parse_response(body)
    except PromApiError as inner:
        if not str(inner).startswith("not a Prometheus API answer"):
            return PromApiError(f"HTTP {status}: {inner}")
    said = printable(one_line(body[:120].decode("utf-8", "replace"))) or "no body"
    if status in (401, 403):
        why = "the server wants credentials, or refused the ones sent (fleet.auth)"
        return PromApiError(f"HTTP {status}: {why}: {said}")
    return PromApiError(f"HTTP {status}: {said}")


def _value(pair: Any) -> float:
    if not isinstance(pair, list) or len(pair) != 2 or not isinstance(pair[1], str):
        raise PromApiError(f'a sample value is not [time, "number"]: {str(pair)[:80]}')
    try:
        return float(pair[1])
    except ValueError:
        raise PromApiError(f"a sample value is not a number: {pair[1][:40]!r}") from None


_STR = frozenset({str})


def _labels(metric: dict[str, Any]) -> dict[str, str]:
    """The labels as they came (JSON keys are strings; Prometheus' values are too), copied as strings
    only where a value is not: an alerting round has ~50,000 samples, and copying each dict costs."""
    if _STR.issuperset(map(type, metric.values())):
        return metric
    return {str(k): str(v) for k, v in metric.items()}


def answer_data(body: bytes) -> dict[str, Any]:
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise PromApiError(f"not a Prometheus API answer (not JSON: {body[:60]!r})") from None
    if not isinstance(doc, dict) or doc.get("status") not in ("success", "error"):
        what = "a JSON object without a status" if isinstance(doc, dict) else "not a JSON object"
        raise PromApiError(f"not a Prometheus API answer ({what})")
    if doc.get("status") != "success":
        kind, error = doc.get("errorType", "error"), doc.get("error", "no error message")
        raise PromApiError(f"{kind}: {str(error)[:300]}")
    data = doc.get("data")
    if not isinstance(data, dict):
        raise PromApiError("the answer has no data object")
    return data


def _points(values: list[Any]) -> tuple[FloatArray, FloatArray]:
    """A series' ``[[time, "value"], ...]`` as two arrays, NaN points left out: one vectorised
    conversion of the value strings instead of a Python float and tuple per point."""
    if values:
        _value(values[0])  # the first pair's shape, for a precise message; numpy checks the rest
    try:
        # Every point a [time, value] list (checked a column at a time, in C), then the two columns by
        # one transposition: a 1,000-rack backfill is 4 million points, and a comprehension per column
        # cost a third more.
        if set(map(type, values)) - {list} or set(map(len, values)) - {2}:
            raise ValueError
        times, texts = zip(*values, strict=True) if values else ((), ())
        stamps = np.array(times, dtype=np.float64)
        numbers = np.array(texts, dtype=np.float64)
    except (TypeError, ValueError, IndexError, KeyError):
        raise PromApiError(f'a matrix point is not [time, "number"]: {str(values)[:80]}') from None
    if stamps.ndim != 1 or numbers.ndim != 1:
        raise PromApiError(f'a matrix point is not [time, "number"]: {str(values)[:80]}')
    keep = ~np.isnan(numbers)
    if not keep.all():
        stamps, numbers = stamps[keep], numbers[keep]
    return stamps, numbers


def within_range(series: list[RangeSeries], start: float, end: float, step_s: float) -> list[RangeSeries]:
    """``series`` with only the points a range query from ``start`` to ``end`` can have (to half a step
    either side): a broken or hostile server's point at 1e300 s (or +Inf) made a backfill size its
    arrays to that many steps."""
    low, high = start - step_s / 2, end + step_s / 2
    kept: list[RangeSeries] = []
    for labels, stamps, numbers in series:
        inside = (stamps >= low) & (stamps <= high)  # NaN compares False
        kept.append((labels, stamps, numbers) if inside.all() else (labels, stamps[inside], numbers[inside]))
    return kept


def parse_range_response(body: bytes) -> list[RangeSeries]:
    """Parses an /api/v1/query_range answer (a matrix); anything unexpected is a :class:`PromApiError`.
    A compact answer's points are read from its bytes (:mod:`.matrix_bytes`), the rest the exact way."""
    quick = compact_matrix(body)
    if quick is not None:
        return quick
    data = answer_data(body)
    if data.get("resultType") != "matrix":
        raise PromApiError(f"expected a range matrix, got {str(data.get('resultType'))[:20]!r}")
    result = data.get("result")
    if not isinstance(result, list):
        raise PromApiError("the matrix result is not a list")
    series: list[RangeSeries] = []
    for item in result:
        if not isinstance(item, dict) or not isinstance(item.get("metric"), dict):
            raise PromApiError("a matrix element has no metric labels")
        values = item.get("values")
        if not isinstance(values, list):
            raise PromApiError("a matrix element has no values")
        stamps, numbers = _points(values)
        series.append((_labels(item["metric"]), stamps, numbers))
    return series


def _vector_columns(result: list[Any]) -> list[Sample] | None:
    """A well-formed vector (what Prometheus sends) read a column at a time: its labels as they came,
    its values in one vectorised conversion, NaN left out. None where anything is off: the element by
    element reading below then says what (an alerting round is ~50,000 samples; this is ~4x quicker).
    The shape checks run over whole columns in C (``map``), not per sample in Python."""
    try:
        metrics = [item["metric"] for item in result]
        pairs = [item["value"] for item in result]
        if set(map(type, metrics)) - {dict} or set(map(type, pairs)) - {list} or set(map(len, pairs)) - {2}:
            return None
        texts = [pair[1] for pair in pairs]
        if set(map(type, texts)) - {str}:
            return None
        if set(map(type, chain.from_iterable(map(dict.values, metrics)))) - {str}:
            return None
        values = np.array(texts, dtype=np.float64)
    except (TypeError, KeyError, IndexError, ValueError):
        return None
    keep = ~np.isnan(values)
    if not keep.all():
        metrics = [m for m, ok in zip(metrics, keep.tolist(), strict=True) if ok]
        values = values[keep]
    return list(zip(metrics, values.tolist(), strict=True))


def parse_response(body: bytes) -> list[Sample]:
    """Parses an /api/v1/query answer; anything unexpected is a :class:`PromApiError`."""
    data = answer_data(body)
    kind = data.get("resultType")
    result = data.get("result")
    if kind == "scalar":
        return [({}, _value(result))]
    if kind != "vector":
        raise PromApiError(f"expected an instant vector, got {str(kind)[:20]!r} (use an instant query)")
    if not isinstance(result, list):
        raise PromApiError("the vector result is not a list")
    fast = _vector_columns(result)
    if fast is not None:
        return fast
    samples: list[Sample] = []
    for item in result:
        if not isinstance(item, dict) or not isinstance(item.get("metric"), dict):
            raise PromApiError("a vector element has no metric labels")
        labels = _labels(item["metric"])
        value = _value(item.get("value"))
        if not math.isnan(value):
            samples.append((labels, value))
    return samples
