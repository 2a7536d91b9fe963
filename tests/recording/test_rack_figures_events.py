"""Rack-level fleet figures in recordings: exact round trips (NaN kept), damaged records refused."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import orjson
import pytest

from tokenwatch.base.events import RACK_FIGURES, RackFiguresBatch, RunStarted
from tokenwatch.recording import RecordingWriter, read_events
from tokenwatch.recording.codec import CodecError, dumps, loads

START = RunStarted(0.0, "fleet", "Offline", ("rack01/a",), 4, None, None, "live", 1.7e9)
VALUES = np.arange(2 * len(RACK_FIGURES), dtype=np.float64).reshape(2, -1) * 1.5
VALUES[1, 3] = math.nan
BATCH = RackFiguresBatch(
    5.0, ("rack01", "rack02"), VALUES, np.array([False, True]), ("a", ""), ("throttling", "")
)


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.zst"])
def test_round_trip(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"r{suffix}"
    with RecordingWriter(path) as writer:
        writer.write(START)
        writer.write(BATCH)
    events, warnings = read_events(path)
    assert warnings == []
    got = events[1]
    assert isinstance(got, RackFiguresBatch)
    assert got.racks == BATCH.racks
    np.testing.assert_array_equal(got.values, VALUES)  # NaN where NaN
    assert got.down.tolist() == [False, True]
    assert (got.worst_node, got.worst_cause) == (("a", ""), ("throttling", ""))
    assert not got.values.flags.writeable
    assert dumps(got) == dumps(BATCH)


def test_a_figure_an_older_writer_did_not_know_reads_as_unknown() -> None:
    record = orjson.loads(dumps(BATCH))
    del record["f"]["projected_valid"]
    got = loads(orjson.dumps(record))
    assert isinstance(got, RackFiguresBatch)
    assert np.isnan(got.values[:, RACK_FIGURES.index("projected_valid")]).all()


def test_where_a_rack_that_appeared_later_stands_round_trips_and_is_left_out_when_none() -> None:
    placed = dataclasses.replace(BATCH, places=(("rack02", "hall-b", "r2"),))
    got = loads(dumps(placed))
    assert isinstance(got, RackFiguresBatch)
    assert got.places == (("rack02", "hall-b", "r2"),)
    assert "places" not in orjson.loads(dumps(BATCH))  # a batch of no new rack writes none
    unplaced = loads(dumps(BATCH))  # and reads as none, as an older recording's batch does
    assert isinstance(unplaced, RackFiguresBatch)
    assert unplaced.places == ()


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda r: r.update(racks=["a", "a"]), "distinct"),
        (lambda r: r["f"].update(tokens_per_s=[1.0]), "one value per rack"),
        (lambda r: r["f"].update(tokens_per_s=["x", 1.0]), "number"),
        (lambda r: r.update(down=[0, 1]), "true/false"),
        (lambda r: r.update(worst_node=["a"]), "worst_node"),
        (lambda r: r.pop("racks"), "without 'racks'"),
        (lambda r: r.update(places={"rack03": "hall-b"}), "places must be a list"),
        (lambda r: r.update(places=[["rack03", "hall-b"]]), "a place must be a list of 3 names"),
    ],
)
def test_damaged_records_are_refused_with_a_reason(change: object, why: str) -> None:
    record = orjson.loads(dumps(BATCH))
    change(record)  # type: ignore[operator]
    with pytest.raises(CodecError, match=why):
        loads(orjson.dumps(record))
