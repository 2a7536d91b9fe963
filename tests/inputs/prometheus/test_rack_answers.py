"""The rack figures' answers read from their bytes (``RackAnswerReader``) give the columns the exact
reading gives (``parse_response``), and the batches made of them are the batches made of the exact
samples; a node count no rack can have (``+Inf``, huge, negative) is an unknown count of a rack that
answered, never a crash. No server: the answers are made here as Prometheus writes them (compact JSON)."""

from __future__ import annotations

import math

import numpy as np
import orjson

from tokenwatch.base.events import RACK_FIGURES
from tokenwatch.inputs.prometheus.answers import parse_range_response, parse_response
from tokenwatch.inputs.prometheus.fleet_figures import RackFigures
from tokenwatch.inputs.prometheus.rack_answers import RackAnswerReader, RackColumn

T = 1_700_000_000.0
TOTAL = RACK_FIGURES.index("nodes_total")


def _vector(samples: list[tuple[dict[str, str], str]], indent: bool = False) -> bytes:
    result = [{"metric": labels, "value": [T, value]} for labels, value in samples]
    doc = {"status": "success", "data": {"resultType": "vector", "result": result}}
    return orjson.dumps(doc, option=orjson.OPT_INDENT_2 if indent else 0)


def _same_column(a: RackColumn, b: RackColumn) -> None:
    assert (a.racks, a.nodes) == (b.racks, b.nodes)
    np.testing.assert_array_equal(a.values, b.values)


ANSWERS = {
    "nodes_total": [({"rack": "rack2"}, "18"), ({"rack": "rack10"}, "17"), ({}, "3")],
    "tokens_per_s": [
        ({"rack": "rack2"}, "952086.4140625"),
        ({"rack": "rack10"}, "NaN"),
        ({"rack": "rack2"}, "1e-07"),  # a rack twice: its last sample counts
    ],
    "worst": [
        ({"rack": "rack2", "node": "node07", "gpu": "3"}, "30.5"),
        ({"rack": "rack10", "node": "n"}, "-2"),
    ],
    "worst_throttling": [({"rack": "rack10", "node": "n"}, "1")],
}


def test_the_bytes_give_the_exact_readings_columns_and_batches() -> None:
    reader = RackAnswerReader("rack", "node")
    for _ in range(2):  # the second round from the label sets remembered
        quick = {field: reader.read(_vector(samples)) for field, samples in ANSWERS.items()}
        exact = {field: parse_response(_vector(samples)) for field, samples in ANSWERS.items()}
        for field in ANSWERS:
            _same_column(quick[field], RackColumn.of_samples(exact[field], "rack", "node"))
            # Spaced JSON is not compact: read the exact way, the same column.
            _same_column(reader.read(_vector(ANSWERS[field], indent=True)), quick[field])
        a = RackFigures("rack", "node").figures(T, quick)
        b = RackFigures("rack", "node").figures(T, exact)
        assert a is not None
        assert b is not None
        assert (a.racks, a.worst_node, a.worst_cause) == (b.racks, b.worst_node, b.worst_cause)
        np.testing.assert_array_equal(a.values, b.values)
        np.testing.assert_array_equal(a.down, b.down)
        assert a.racks == ("rack2", "rack10")
        assert a.values[0, RACK_FIGURES.index("tokens_per_s")] == 1e-07
        assert a.worst_node == ("node07", "n")
        assert a.worst_cause == ("", "throttling")


def test_a_node_count_no_rack_can_have_is_unknown_not_a_crash() -> None:
    reader = RackAnswerReader("rack", "node")
    board = RackFigures("rack", "node")
    first = {"nodes_total": reader.read(_vector([({"rack": "r1"}, "18"), ({"rack": "r2"}, "18")]))}
    assert board.figures(T, first) is not None
    for bad in ("+Inf", "-Inf", "1e300", "-4"):
        answer = _vector([({"rack": "r1"}, bad), ({"rack": "r2"}, "18"), ({"rack": "r3"}, bad)])
        batch = board.figures(T, {"nodes_total": reader.read(answer)})
        assert batch is not None
        assert batch.racks == ("r1", "r2", "r3")
        assert batch.down.tolist() == [False, False, False]  # each answered: none is down
        counts = batch.values[:, TOTAL]
        assert counts[0] == 18.0
        assert counts[1] == 18.0
        assert math.isnan(counts[2])  # r3 never had one: unknown
        assert board.rack_nodes == {"r1": 18, "r2": 18}  # no count remembered from a bad one
    # A real count again is taken as ever.
    batch = board.figures(T, {"nodes_total": reader.read(_vector([({"rack": "r3"}, "9")]))})
    assert batch is not None
    assert board.rack_nodes["r3"] == 9
    assert batch.down.tolist() == [True, True, False]  # r1 and r2's series gone


def test_a_history_with_an_infinite_count_is_read_too() -> None:
    """The backfill's batches go through the same judgement: an +Inf count at one step is unknown."""
    body = orjson.dumps(
        {
            "status": "success",
            "data": {
                "resultType": "matrix",
                "result": [
                    {"metric": {"rack": "r1"}, "values": [[T, "18"], [T + 10, "+Inf"], [T + 20, "18"]]}
                ],
            },
        }
    )
    board = RackFigures("rack", "node")
    batches = board.from_history({"nodes_total": parse_range_response(body)}, T, 10.0)
    assert [b.values[0, TOTAL] for b in batches] == [18.0, 18.0, 18.0]
    assert [b.down.tolist() for b in batches] == [[False]] * 3
