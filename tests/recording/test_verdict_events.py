"""The verdict's events in recordings: exact round trips, damaged records refused with a reason."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tokenwatch.base.events import LatencyLimitCounts, LoadGenDetail, RunStarted
from tokenwatch.recording import RecordingWriter, read_events
from tokenwatch.recording.codec import CodecError, dumps, loads

START = RunStarted(0.0, "r", "Server", ("a", "b"), 1, 60.0, None, "live", 1.7e9)
DETAIL = LoadGenDetail(
    0.25,
    "a",
    {
        "effective_scenario": "Server",
        "effective_schedule_rng_seed": 18209322760996052031,  # above 2**63
        "requested_server_ttft_latency": 2_000_000_000,
        "requested_use_token_latencies": True,
        "result_validity": "VALID",
        "effective_target_qps": 190.5,
        "result_invalid_reason": None,
    },
)
COUNTS = LatencyLimitCounts(5.0, "ttft", 2.0, np.array([0, 1]), np.array([900, 950]), np.array([3, 0]))


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.zst"])
def test_round_trip(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"r{suffix}"
    with RecordingWriter(path) as writer:
        for event in (START, DETAIL, COUNTS):
            writer.write(event)
    events, warnings = read_events(path)
    assert warnings == []
    assert [dumps(e) for e in events] == [dumps(e) for e in (START, DETAIL, COUNTS)]
    detail, counts = events[1], events[2]
    assert isinstance(detail, LoadGenDetail)
    assert detail.values == DETAIL.values
    assert isinstance(counts, LatencyLimitCounts)
    assert counts.over.tolist() == [3, 0]
    assert not counts.judged.flags.writeable


@pytest.mark.parametrize(
    ("line", "why"),
    [
        (
            b'{"k":"limit_counts","t":1,"metric":"ttft","limit_s":2,"node_index":[0],"judged":[5],"over":[6]}',
            "between 0 and the samples judged",
        ),
        (
            b'{"k":"limit_counts","t":1,"metric":"x","limit_s":2,"node_index":[0],"judged":[5],"over":[1]}',
            "latency metric",
        ),
        (
            b'{"k":"limit_counts","t":1,"metric":"ttft","limit_s":0,"node_index":[0],"judged":[5],"over":[1]}',
            "limit_s",
        ),
        (b'{"k":"loadgen_detail","t":1,"node":"a","values":[1,2]}', "values must map"),
    ],
)
def test_damaged_records_are_refused_with_a_reason(line: bytes, why: str) -> None:
    with pytest.raises(CodecError, match=why):
        loads(line)
