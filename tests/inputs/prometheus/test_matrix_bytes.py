"""A range answer's points read from its bytes give what the exact, element-by-element reading gives."""

from __future__ import annotations

import json
import math
import tracemalloc
from collections.abc import Sequence

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenwatch.inputs.prometheus.answers import PromApiError, parse_range_response
from tokenwatch.inputs.prometheus.matrix_bytes import RangeSeries, compact_matrix

# Label values that look like the structure the bytes are cut by.
_TRICKY = st.sampled_from(['"values":[[1,"2"]]', "]]", '[1,"2"]', "values", "\\", "rack01", ""])
_LABELS = st.dictionaries(
    st.text(min_size=1, max_size=8), st.one_of(_TRICKY, st.text(max_size=12)), max_size=4
)
_VALUE = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.sampled_from(["NaN", "+Inf", "-Inf", "0", "1e+06", "14123.456789012345", "-2.5e-07"]),
)
_TIME = st.one_of(
    st.integers(0, 2_000_000_000), st.floats(0, 2e9, allow_nan=False).map(lambda t: round(t, 3))
)
_SERIES = st.fixed_dictionaries(
    {"metric": _LABELS, "values": st.lists(st.tuples(_TIME, _VALUE).map(list), max_size=12)}
)


def _matrix(result: object) -> bytes:
    return orjson.dumps({"status": "success", "data": {"resultType": "matrix", "result": result}})


def _independent(body: bytes) -> list[tuple[dict[str, str], list[float], list[float]]]:
    """The answer read by the standard library, a float per point, NaN points left out."""
    out = []
    for item in json.loads(body)["data"]["result"]:
        points = [(float(t), float(v)) for t, v in item["values"] if not math.isnan(float(v))]
        labels = {str(k): str(v) for k, v in item["metric"].items()}  # as the exact reading copies them
        out.append((labels, [t for t, _ in points], [v for _, v in points]))
    return out


def _plain(series: Sequence[RangeSeries]) -> list[tuple[dict[str, str], list[float], list[float]]]:
    return [(labels, times.tolist(), values.tolist()) for labels, times, values in series]


@settings(max_examples=300, deadline=None)
@given(st.lists(_SERIES, max_size=6))
def test_a_compact_matrix_read_from_its_bytes_equals_the_standard_reading(
    result: list[dict[str, object]],
) -> None:
    body = _matrix(result)
    quick = compact_matrix(body)
    assert quick is not None  # orjson writes the compact shape Prometheus does
    assert _plain(quick) == _independent(body)
    assert _plain(parse_range_response(body)) == _independent(body)


_HEAD = b'{"status":"success","data":{"resultType":"matrix","result":[{"metric":'


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (_HEAD + b'{},"values":[[1, "2"]]}]}}', "a space"),
        (_HEAD + b'{},"values":[[1,"0x1p3"]]}]}}', "hex"),
        (_HEAD + b'{},"values":[[1,"2","3"],[4]]}]}}', "three numbers, then one"),
        (_HEAD + b'{},"values":[[1,"2,3"]]}]}}', "a comma in a value"),
        (_HEAD + b'{},"values":[[1,2]]}]}}', "a value unquoted"),
        (_HEAD.replace(b"matrix", b"vector") + b'{},"values":[[1,"2"]]}]}}', "a vector"),
        (b'{"status":"error","errorType":"bad_data","error":"parse error"}', "an error"),
        (_HEAD + b'{"a":1},"values":[[1,"2"]]}]}}', "a label value not a string"),
        (_HEAD + b'{},"values":[[1,"2"]', "cut short"),
    ],
)
def test_anything_else_goes_to_the_exact_reading(body: bytes, why: str) -> None:
    """Not the compact shape: the bytes reading declines, and the exact one reads it or says what is wrong."""
    assert compact_matrix(body) is None, why
    try:
        series = parse_range_response(body)
    except PromApiError as exc:
        error = str(exc)
    else:
        assert _plain(series) == _independent(body), why
        return
    assert error, why


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes_never_raise_from_the_bytes_reading(body: bytes) -> None:
    prefix = b'{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":['
    for candidate in (body, prefix + body):
        assert compact_matrix(candidate) is None or isinstance(compact_matrix(candidate), list)


def test_a_large_answer_is_read_without_a_python_object_per_point() -> None:
    """200 series x 1,000 points (what one field of a 200-rack backfill is): the reading's peak heap
    stays within a few times the answer's bytes. Read by orjson, each point was a list, a float and a
    string: ~18x the answer's bytes."""
    result = [
        {
            "metric": {"rack": f"rack{r:04d}"},
            "values": [[1_795_798_890 + 15 * k, f"{14_000 + r + k / 7:.12g}"] for k in range(1000)],
        }
        for r in range(200)
    ]
    body = _matrix(result)
    tracemalloc.start()
    try:
        series = parse_range_response(body)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert sum(len(times) for _, times, _ in series) == 200_000
    assert peak < 6 * len(body), (peak, len(body))
