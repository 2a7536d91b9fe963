"""Rack-level fleet figures in recordings: exact round trips (NaN kept), damaged records refused."""

from __future__ import annotations

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


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda r: r.update(racks=["a", "a"]), "distinct"),
        (lambda r: r["f"].update(tokens_per_s=[1.0]), "one value per rack"),
        (lambda r: r["f"].update(tokens_per_s=["x", 1.0]), "number"),
        (lambda r: r.update(down=[0, 1]), "true/false"),
        (lambda r: r.update(worst_node=["a"]), "worst_node"),
        (lambda r: r.pop("racks"), "without 'racks'"),
    ],
)
def test_damaged_records_are_refused_with_a_reason(change: object, why: str) -> None:
    record = orjson.loads(dumps(BATCH))
    change(record)  # type: ignore[operator]
    with pytest.raises(CodecError, match=why):
        loads(orjson.dumps(record))
