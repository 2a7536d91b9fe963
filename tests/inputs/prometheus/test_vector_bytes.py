"""The rack figures' instant vectors read from their bytes (:class:`VectorReader`) are what the exact
reading (:func:`parse_response`) makes of the same answers, round after round: the labels parsed again
whenever they change, any answer it cannot read by bytes read the exact way (errors included)."""

from __future__ import annotations

import math

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenwatch.inputs.prometheus.answers import PromApiError, parse_response
from tokenwatch.inputs.prometheus.vector_bytes import VectorReader

labels = st.dictionaries(st.text(min_size=1, max_size=8), st.text(max_size=12), max_size=3)
values = st.floats(allow_nan=True, allow_infinity=True)


def as_go(value: float) -> str:
    """A value as Prometheus writes it (Go's strconv)."""
    if math.isnan(value):
        return "NaN"
    return "+Inf" if value == math.inf else ("-Inf" if value == -math.inf else repr(value))


def vector(samples: list[tuple[dict[str, str], float]], at: float = 1_800_000_000.5) -> bytes:
    result = [{"metric": m, "value": [at, as_go(v)]} for m, v in samples]
    return orjson.dumps({"status": "success", "data": {"resultType": "vector", "result": result}})


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.tuples(labels, values), max_size=12), min_size=1, max_size=4), st.booleans())
def test_round_after_round_the_reader_reads_what_the_exact_reading_does(
    rounds: list[list[tuple[dict[str, str], float]]], same_labels: bool
) -> None:
    reader = VectorReader()
    first_labels = [m for m, _ in rounds[0]]
    for k, samples in enumerate(rounds):
        if same_labels and len(samples) == len(first_labels):  # the same series with new values
            samples = [(m, v) for m, (_, v) in zip(first_labels, samples, strict=True)]
        body = vector(samples, 1_800_000_000.0 + 5 * k)
        assert reader(body) == parse_response(body)


def test_labels_that_change_between_rounds_are_read_again() -> None:
    reader = VectorReader()
    one = vector([({"rack": "rack01"}, 1.0), ({"rack": "rack02"}, 2.0)])
    two = vector([({"rack": "rack01"}, 3.0), ({"rack": "rack03"}, 4.0)])
    assert reader(one) == [({"rack": "rack01"}, 1.0), ({"rack": "rack02"}, 2.0)]
    assert reader(two) == [({"rack": "rack01"}, 3.0), ({"rack": "rack03"}, 4.0)]


@pytest.mark.parametrize(
    "body",
    [
        b'{"status":"error","errorType":"bad_data","error":"parse error"}',
        b'{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"x"]}]}}',
        b'{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"1","2"]}]}}',
        b"<html>",
    ],
)
def test_what_it_cannot_read_is_the_exact_readings_error(body: bytes) -> None:
    with pytest.raises(PromApiError) as exact:
        parse_response(body)
    with pytest.raises(PromApiError, match=str(exact.value)[:20]):
        VectorReader()(body)


@pytest.mark.parametrize(
    "body",
    [
        b'{"status":"success","data":{"resultType":"vector","result":[{"metric":{"a":1},"value":[1,"2"]}]}}',
        b'{"status":"success","data":{"resultType":"vector","result":[{"metric":{}, "value": [1, "2"]}]}}',
        b'{"status":"success","data":{"resultType":"vector","result":[]}}',
        b'{"status":"success","data":{"resultType":"scalar","result":[1,"7"]}}',
        b'{"status":"success","data":{"resultType":"vector","result":[{"metric":{"r":"\\"value\\":["},'
        b'"value":[1,"2"]}]}}',
    ],
)
def test_answers_off_the_common_shape_are_read_the_exact_way(body: bytes) -> None:
    assert VectorReader()(body) == parse_response(body)
