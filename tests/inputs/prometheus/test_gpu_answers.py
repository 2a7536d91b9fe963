"""A GPU field's answer read from its bytes gives the core the same batches as the exact, sample by sample
reading, names the same unknown nodes and GPUs, and says the same one line about a bad answer."""

from __future__ import annotations

import json
import math
import tracemalloc
from collections.abc import Callable

import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenwatch.base.events import GPU_METRICS, Event, GpuBatch, Notice
from tokenwatch.inputs.prometheus.answers import PromApiError, parse_response
from tokenwatch.inputs.prometheus.gpu_answers import GpuColumn, compact_vector
from tokenwatch.inputs.prometheus.presets import GPU_FIELDS
from tokenwatch.inputs.prometheus.query import PrometheusQueryCollector

NODES = ("rack01/node01", "rack01/node02", "rack02/node01")
GPUS = 4
NODE_LABEL = "tokenwatch_fleet_node"

# Label values that look like the structure the bytes are cut by, and names that are no node or GPU.
_TRICKY = st.sampled_from(
    ['"]},{"metric":', ',"value":[1,"2"]', '"]}]', '{"metric":', "\\", '"', "]}]}}", "", "rack01/node01"]
)
_NODE = st.one_of(st.sampled_from(NODES), st.sampled_from(["rack09/node01", "rack01/node01:9400"]), _TRICKY)
_GPU = st.one_of(st.sampled_from(["0", "1", "2", "3"]), st.sampled_from(["4", "-1", "x", "03"]), _TRICKY)
_VALUE = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.sampled_from(["NaN", "+Inf", "-Inf", "0", "1050", "1.98e+09", "14123.456789012345", "-2.5e-07"]),
)
_TIME = st.one_of(
    st.integers(0, 2_000_000_000), st.floats(0, 2e9, allow_nan=False).map(lambda t: round(t, 3))
)


@st.composite
def _samples(draw: st.DrawFn) -> dict[str, object]:
    labels = {}
    if draw(st.integers(0, 9)):
        labels[NODE_LABEL] = draw(_NODE)
    if draw(st.integers(0, 9)):
        labels["gpu"] = draw(_GPU)
    labels.update(draw(st.dictionaries(st.sampled_from(["job", "instance", "value"]), _TRICKY, max_size=2)))
    return {"metric": labels, "value": [draw(_TIME), draw(_VALUE)]}


def _vector(result: object) -> bytes:
    """An instant query's answer as Prometheus writes it (compact, metric before value)."""
    return orjson.dumps({"status": "success", "data": {"resultType": "vector", "result": result}})


def _reader() -> PrometheusQueryCollector:
    return PrometheusQueryCollector(
        url="http://127.0.0.1:1", nodes=NODES, gpus_per_node=GPUS, node_label=NODE_LABEL, now=lambda: 0.0
    )


def _gpu_index(name: str | None) -> int:
    try:
        return int(name) if name is not None and 0 <= int(name) < GPUS else -1
    except ValueError:
        return -1


def _node_index(name: str | None) -> int:
    """The node a label names: exactly, without a ``:port``, or by its short hostname (-1: none)."""
    if name is None:
        return -1
    found = [c for c in (name, name.rsplit(":", 1)[0], name.split(".")[0]) if c in NODES]
    return NODES.index(found[0]) if found else -1


def _independent(body: bytes) -> tuple[list[int], list[float]]:
    """The GPU keys and values the answer means, read by the standard library: NaN samples and names
    that are no node or GPU of the run left out."""
    keys, values = [], []
    for item in json.loads(body)["data"]["result"]:
        value = float(item["value"][1])
        node, gpu = _node_index(item["metric"].get(NODE_LABEL)), _gpu_index(item["metric"].get("gpu"))
        if not math.isnan(value) and node >= 0 and gpu >= 0:
            keys.append(node * GPUS + gpu)
            values.append(value)
    return keys, values


def _plain(column: GpuColumn) -> tuple[list[int], list[float]]:
    return column.keys.tolist(), column.values.tolist()


def _batch(events: list[Event]) -> tuple[list[int], list[int], list[list[float | None]], list[int]] | None:
    batches = [e for e in events if isinstance(e, GpuBatch)]
    assert len(batches) <= 1
    if not batches:
        return None
    b = batches[0]
    # NaN as None: two batches are equal where their missing cells are
    cells = [[None if math.isnan(v) else v for v in row] for row in b.values.tolist()]
    return b.node_index.tolist(), b.gpu.tolist(), cells, b.throttle_reasons.tolist()


def _notices(events: list[Event]) -> list[str]:
    return [e.message for e in events if isinstance(e, Notice)]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(_samples(), max_size=8), min_size=1, max_size=len(GPU_FIELDS)), st.integers(1, 2))
def test_gpu_answers_read_from_their_bytes_give_the_batches_of_the_exact_reading(
    fields: list[list[dict[str, object]]], rounds: int
) -> None:
    """Each round, each GPU field's answer read both ways: the same columns (and the ones the standard
    library reads), the same batch into the core, the same notices of names that are no node or GPU;
    a second round reads the labels the first one learnt."""
    by_bytes, exact = _reader(), _reader()
    for k in range(rounds):
        bodies = {field: _vector(result) for field, result in zip(GPU_FIELDS, fields, strict=False)}
        columns = {field: by_bytes.read_gpu_answer(body) for field, body in bodies.items()}
        samples = {field: parse_response(body) for field, body in bodies.items()}
        for field, body in bodies.items():
            assert compact_vector(body) is not None  # orjson writes what Prometheus does
            assert _plain(columns[field]) == _plain(exact.gpu_column(samples[field]))
            assert _plain(columns[field]) == _independent(body)
        quick = by_bytes.node_events(float(k), {}, columns)
        slow = exact.node_events(float(k), samples)
        assert _batch(quick) == _batch(slow)
        assert _notices(quick) == _notices(slow)


def test_a_batch_holds_each_field_in_its_column() -> None:
    """Two fields of two GPUs, the throttle reasons too: the batch's rows and cells, computed here."""
    reader = _reader()
    power = _vector(
        [
            {"metric": {NODE_LABEL: NODES[2], "gpu": "3"}, "value": [1, "1050.5"]},
            {"metric": {NODE_LABEL: NODES[0], "gpu": "1"}, "value": [1, "990"]},
        ]
    )
    temp = _vector([{"metric": {"gpu": "1", NODE_LABEL: NODES[0]}, "value": [1, "71"]}])
    reasons = _vector([{"metric": {NODE_LABEL: NODES[2], "gpu": "3"}, "value": [1, "4"]}])
    columns = {
        "power_w": reader.read_gpu_answer(power),
        "temp_c": reader.read_gpu_answer(temp),
        "throttle_reasons": reader.read_gpu_answer(reasons),
    }
    (batch,) = reader.node_events(5.0, {}, columns)
    assert isinstance(batch, GpuBatch)
    assert batch.t == 5.0
    assert batch.node_index.tolist() == [2, 0]
    assert batch.gpu.tolist() == [3, 1]
    power_col, temp_col = GPU_METRICS.index("power_w"), GPU_METRICS.index("temp_c")
    assert batch.values[:, power_col].tolist() == [1050.5, 990.0]
    assert math.isnan(batch.values[0, temp_col])
    assert batch.values[1, temp_col] == 71.0
    assert batch.throttle_reasons[1] == 0
    assert batch.throttle_reasons[0] != 0


_HEAD = b'{"status":"success","data":{"resultType":"vector","result":[{"metric":'
_ONE = b'{"tokenwatch_fleet_node":"rack01/node02","gpu":"1"}'


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (_HEAD + _ONE + b',"value":[1, "2"]}]}}', "a space"),
        (_HEAD + _ONE + b',"value":[1,"0x1p3"]}]}}', "hex"),
        (_HEAD + _ONE + b',"value":[1,"2,3"]}]}}', "a comma in a value"),
        (_HEAD + _ONE + b',"value":[1,2]}]}}', "a value unquoted"),
        (_HEAD + _ONE + b',"value":[1,"2","3"]}]}}', "three items"),
        (_HEAD + _ONE + b',"value":[1,""]}]}}', "an empty value"),
        (_HEAD + _ONE + b',"value":[1,"nan(0)"]}]}}', "a NaN's payload"),
        (_HEAD + b'{"gpu":1,"tokenwatch_fleet_node":"n"},"value":[1,"2"]}]}}', "a label a number"),
        (_HEAD + b'["gpu"],"value":[1,"2"]}]}}', "labels not an object"),
        (_HEAD.replace(b"vector", b"matrix") + _ONE + b',"value":[1,"2"]}]}}', "a matrix"),
        (b'{"status":"success","data":{"resultType":"scalar","result":[1,"2"]}}', "a scalar"),
        (b'{"status":"success","data":{"resultType":"vector","result":[{"value":[1,"2"],"metric":'
         + _ONE + b"}]}}", "value before metric"),
        (b'{"status":"error","errorType":"bad_data","error":"parse error"}', "an error"),
        (_HEAD + _ONE + b',"value":[1,"2"]', "cut short"),
        (_HEAD + _ONE + b',"value":[1,"2"]}]}}trailing', "bytes after the answer"),
        (b"<html>502 Bad Gateway</html>", "not JSON"),
    ],
)  # fmt: skip
def test_any_other_answer_is_read_the_exact_way(body: bytes, why: str) -> None:
    """Not the compact shape: read as the exact reading reads it, or the one line it says is wrong."""
    try:
        want: object = _plain(_reader().gpu_column(parse_response(body)))
    except PromApiError as exc:
        want = str(exc)
    try:
        got: object = _plain(_reader().read_gpu_answer(body))
    except PromApiError as exc:
        got = str(exc)
    assert got == want, why
    if isinstance(want, str):
        assert "\n" not in want, why
        assert want, why


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes_are_a_column_or_a_one_line_error(body: bytes) -> None:
    for candidate in (body, _HEAD + body):
        try:
            column = _reader().read_gpu_answer(candidate)
        except PromApiError as exc:
            said = str(exc)
        else:
            said = ""
            assert len(column.keys) == len(column.values)
        assert "\n" not in said


def test_an_alerting_pass_s_answer_is_read_without_a_python_object_per_sample() -> None:
    """7,200 GPUs (a 100-rack fleet's field; 1,000 racks are ten times as many): once the labels are
    known (the first field of the first pass), reading an answer peaks within a few times its bytes.
    Read the exact way, each sample was a dict, a labels dict and strings, a list, a float and a string:
    ~18x the answer's bytes."""
    nodes = tuple(f"rack{r:03d}/node{n:02d}" for r in range(100) for n in range(18))
    reader = PrometheusQueryCollector(
        url="http://127.0.0.1:1", nodes=nodes, gpus_per_node=GPUS, node_label=NODE_LABEL, now=lambda: 0.0
    )
    result = [
        {"metric": {"gpu": str(g), NODE_LABEL: node}, "value": [1_795_798_890, f"{1000 + k % 97:.6g}"]}
        for k, (node, g) in enumerate((node, g) for node in nodes for g in range(GPUS))
    ]
    body = _vector(result)
    reader.read_gpu_answer(body)  # the labels learnt
    readings: dict[str, Callable[[], GpuColumn]] = {
        "bytes": lambda: reader.read_gpu_answer(body),
        "exact": lambda: reader.gpu_column(parse_response(body)),
    }
    peaks = {}
    for name, read in readings.items():
        tracemalloc.start()
        try:
            column = read()
            _, peaks[name] = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert column.keys.tolist() == list(range(len(nodes) * GPUS))
        assert np.array_equal(column.values, [1000 + k % 97 for k in range(len(nodes) * GPUS)])
    assert peaks["bytes"] < 5 * len(body), (peaks, len(body))
    assert peaks["exact"] > 3 * peaks["bytes"], (peaks, len(body))  # what the bytes reading saves
