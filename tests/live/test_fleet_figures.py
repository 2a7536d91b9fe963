"""The backfill's batches built from whole range answers (``RackFigures.from_history``) equal the batches
the live path (``RackFigures.figures``) makes of the same answers fed one instant at a time, and the range
parser reads Prometheus' matrix into arrays (NaN points left out, bad points one error). No server: the
answers are made here as Prometheus writes them. Costs well under a second."""

from __future__ import annotations

import math

import numpy as np
import orjson
import pytest

from tokenwatch.base.events import RackFiguresBatch
from tokenwatch.inputs.prometheus.answers import parse_range_response
from tokenwatch.inputs.prometheus.api import PromApiError, RangeSeries, Sample
from tokenwatch.inputs.prometheus.fleet_figures import RackFigures

FIRST, STEP, STEPS = 1_700_000_000.0, 10.0, 12


def _point(k: int, value: float) -> list[object]:
    return [FIRST + k * STEP, "NaN" if math.isnan(value) else repr(value)]


def _matrix(series: list[tuple[dict[str, str], dict[int, float]]]) -> bytes:
    result = [
        {"metric": labels, "values": [_point(k, v) for k, v in sorted(points.items())]}
        for labels, points in series
    ]
    return orjson.dumps({"status": "success", "data": {"resultType": "matrix", "result": result}})


def _answers() -> dict[str, list[tuple[dict[str, str], dict[int, float]]]]:
    """Three racks: rackB appears at step 4, rack10 goes away at step 8 (down, then its size kept);
    rack2's slowest node changes at step 6 (two series of ``worst``); a NaN point; one series with no
    rack label; rack2 throttles at steps 3-5."""
    up = dict.fromkeys(range(STEPS), 18.0)
    return {
        "nodes_total": [
            ({"rack": "rack2"}, up),
            ({"rack": "rack10"}, dict.fromkeys(range(8), 18.0)),
            ({"rack": "rackB"}, dict.fromkeys(range(4, STEPS), 9.0)),
            ({}, {0: 3.0}),
        ],
        "tokens_per_s": [
            ({"rack": "rack2"}, {k: 1000.0 + k for k in range(STEPS)}),
            ({"rack": "rack10"}, {k: math.nan if k == 2 else 900.0 - k for k in range(8)}),
            ({"rack": "rackB"}, dict.fromkeys(range(5, STEPS), 500.0)),
        ],
        "worst": [
            ({"rack": "rack2", "node": "node03"}, {k: 40.0 + k for k in range(6)}),
            ({"rack": "rack2", "node": "node07"}, {k: 30.0 + k for k in range(6, STEPS)}),
            ({"rack": "rack10", "node": "node01"}, dict.fromkeys(range(8), 20.0)),
        ],
        "worst_throttling": [({"rack": "rack2", "node": "node03"}, {3: 40.0, 4: 41.0, 5: 42.0})],
    }


def _instant(
    answers: dict[str, list[tuple[dict[str, str], dict[int, float]]]], k: int
) -> dict[str, list[Sample]]:
    """What the live path gets at step ``k``: each field's samples there (a field with no sample at that
    instant is absent, as when it is grouped from a range answer)."""
    out: dict[str, list[Sample]] = {}
    for field, series in answers.items():
        for labels, points in series:
            if k in points and not math.isnan(points[k]):
                out.setdefault(field, []).append((labels, points[k]))
    return out


def _same(a: RackFiguresBatch, b: RackFiguresBatch) -> None:
    assert (a.t, a.racks, a.worst_node, a.worst_cause) == (b.t, b.racks, b.worst_node, b.worst_cause)
    np.testing.assert_array_equal(a.values, b.values)
    np.testing.assert_array_equal(a.down, b.down)


def test_history_batches_equal_the_live_batches_step_by_step() -> None:
    answers = _answers()
    parsed: dict[str, list[RangeSeries]] = {f: parse_range_response(_matrix(s)) for f, s in answers.items()}
    live, backfill = RackFigures("rack", "node"), RackFigures("rack", "node")
    for board in (live, backfill):  # discovered before the history: two racks
        board.racks[:] = ["rack2", "rack10"]
        board.rack_nodes.update({"rack2": 18, "rack10": 18})
    expected = []
    for k in range(STEPS):
        batch = live.figures(FIRST + k * STEP, _instant(answers, k))
        if batch is not None:
            expected.append(batch)
    got = backfill.from_history(parsed, FIRST, STEP)
    assert len(got) == len(expected) == STEPS
    for a, b in zip(got, expected, strict=True):
        _same(a, b)
    assert (backfill.racks, backfill.rack_nodes) == (live.racks, live.rack_nodes)
    # The independent facts the data was made with, read off the batches.
    assert got[3].racks == ("rack2", "rack10")
    assert got[4].racks == ("rack2", "rack10", "rackB")
    assert got[5].worst_node[0] == "node03"
    assert got[6].worst_node[0] == "node07"
    assert [b.worst_cause[0] for b in got[2:7]] == ["", "throttling", "throttling", "throttling", ""]
    assert math.isnan(got[2].values[1, 4])
    assert got[3].values[1, 4] == 897.0
    assert bool(got[8].down[1])
    assert got[8].values[1, 0] == 18.0


def test_range_answers_become_arrays_without_nan_points() -> None:
    body = _matrix([({"rack": "r"}, {0: 1.5, 1: math.nan, 2: 2e3})])
    ((labels, times, values),) = parse_range_response(body)
    assert labels == {"rack": "r"}
    assert times.tolist() == [FIRST, FIRST + 2 * STEP]
    assert values.tolist() == [1.5, 2000.0]
    # Prometheus writes Inf as "+Inf": kept, as the instant parser keeps it.
    ((_, _, inf),) = parse_range_response(_matrix([({}, {0: math.inf})]).replace(b'"inf"', b'"+Inf"'))
    assert inf.tolist() == [math.inf]


@pytest.mark.parametrize(
    "values",
    [
        '[[1, "x"]]',
        '[[1, "2"], [2]]',
        '[[1, "2"], "3"]',
        '[{"a": 1}]',
        '[[1, "2"], [[3], "4"]]',
    ],
)
def test_bad_range_points_are_one_error(values: str) -> None:
    matrix = f'{{"resultType":"matrix","result":[{{"metric":{{}},"values":{values}}}]}}'
    body = f'{{"status":"success","data":{matrix}}}'
    with pytest.raises(PromApiError, match="not"):
        parse_range_response(body.encode())
