"""Answers no real fleet gives, read through the same readers a watch uses: a rack's node count of +Inf
(a broken recording rule, a hostile server) and a range answer's point a million years on. Neither
crashes the watch or sizes its memory: the count is unknown (the rack keeps the size it was listed
with, and one line says which rack), the point is left out."""

from __future__ import annotations

import math

import numpy as np
import orjson

from tokenwatch.base.events import RACK_FIGURES
from tokenwatch.inputs.prometheus.answers import parse_range_response, parse_response, within_range
from tokenwatch.inputs.prometheus.fleet_figures import RackFigures

NODES_TOTAL, GPUS = RACK_FIGURES.index("nodes_total"), RACK_FIGURES.index("gpus")


def vector(values: dict[str, str]) -> bytes:
    """An instant-vector answer with one sample per rack, its value as the server writes it."""
    result = [{"metric": {"rack": rack}, "value": [1_800_000_000.0, value]} for rack, value in values.items()]
    return orjson.dumps({"status": "success", "data": {"resultType": "vector", "result": result}})


def test_a_node_count_of_infinity_is_unknown_and_said_once() -> None:
    figures = RackFigures("rack", "node")
    first = figures.figures(1.0, {"nodes_total": parse_response(vector({"rack01": "18", "rack02": "18"}))})
    assert first is not None
    assert first.values[:, NODES_TOTAL].tolist() == [18.0, 18.0]
    assert figures.newly_impossible() is None
    answers = {
        "nodes_total": parse_response(vector({"rack01": "+Inf", "rack02": "18", "rack03": "-5"})),
        "gpus": parse_response(vector({"rack01": "72", "rack02": "1e300", "rack03": "4"})),
    }
    batch = figures.figures(2.0, answers)
    assert batch is not None
    assert batch.racks == ("rack01", "rack02", "rack03")
    # rack01 keeps the 18 it was listed with; rack03, never listed with a count, has none
    assert batch.values[0, NODES_TOTAL] == 18.0
    assert batch.values[1, NODES_TOTAL] == 18.0
    assert math.isnan(batch.values[1, GPUS])
    assert math.isnan(batch.values[2, NODES_TOTAL])
    assert figures.rack_nodes == {"rack01": 18, "rack02": 18}
    line = figures.newly_impossible()
    assert line is not None
    assert line.startswith("rack01, rack02, rack03: a node or GPU count outside 0..1,000,000")
    assert figures.figures(3.0, answers) is not None
    assert figures.newly_impossible() is None  # each rack said once


def test_a_range_point_outside_the_asked_range_is_left_out() -> None:
    start, step = 1_800_000_000.0, 5.0
    points = [[start, "1"], [start + step, "2"], [1e300, "3"], [start - 3600, "4"], [start + 2 * step, "5"]]
    body = orjson.dumps(
        {"status": "success", "data": {"resultType": "matrix", "result": [{"metric": {}, "values": points}]}}
    )
    ((_, stamps, numbers),) = within_range(parse_range_response(body), start, start + 2 * step, step)
    assert stamps.tolist() == [start, start + step, start + 2 * step]
    assert numbers.tolist() == [1.0, 2.0, 5.0]
    # and a backfill of it sizes its steps by the range, not by the stray point
    figures = RackFigures("rack", "node")
    series = [({"rack": "rack01"}, stamps, np.full(len(stamps), 18.0))]
    batches = figures.from_history({"nodes_total": series}, start, step)
    assert [b.t for b in batches] == [start, start + step, start + 2 * step]
