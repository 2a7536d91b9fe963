"""The detail log's records the MLPerf verdict reads, sent live as ``LoadGenDetail`` events."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tokenwatch.base.events import LoadGenDetail
from tokenwatch.sources.loadgen_detail import VERDICT_PREFIXES, DetailLogParser

from .conftest import LOADGEN, feed_in_chunks

SERVER = LOADGEN / "generated" / "server-short" / "mlperf_log_detail.txt"
OFFLINE = LOADGEN / "generated" / "offline-short" / "mlperf_log_detail.txt"


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line.removeprefix(":::MLLOG ")) for line in path.read_text().splitlines()]


def _details(path: Path, chunk: int) -> list[LoadGenDetail]:
    parser = DetailLogParser("node01")
    events = feed_in_chunks(lambda data: parser.feed(data, 1.0), path.read_bytes(), chunk)
    events += parser.close(2.0)
    return [e for e in events if isinstance(e, LoadGenDetail)]


@pytest.mark.parametrize("path", [SERVER, OFFLINE], ids=["server", "offline"])
def test_line_by_line_the_plan_comes_before_the_first_query_and_the_result_at_the_end(path: Path) -> None:
    records = _records(path)
    keys = [r["key"] for r in records]
    parser = DetailLogParser("node01")
    sent_after: list[str] = []
    for record, line in zip(records, path.read_bytes().splitlines(keepends=True), strict=True):
        if any(isinstance(e, LoadGenDetail) for e in parser.feed(line, 0.0)):
            sent_after.append(record["key"])
    first_effective = next(k for k in keys if k.startswith("effective_"))
    assert sent_after[:2] == [first_effective, "generated_query_duration"]
    # From LoadGen's judgement on, each of its result records is sent as it is read (its exact figures
    # replace the estimates at once), and the log's last record too.
    result = keys[keys.index("result_validity") :]
    assert sent_after[sent_after.index("result_validity") :] == [
        k for k in result if k.startswith(VERDICT_PREFIXES) or k == "num_errors"
    ]
    assert keys.index("generated_query_duration") < keys.index("power_begin")  # before the timed part


@pytest.mark.parametrize("chunk", [64, 4096, 1 << 20])
def test_the_last_event_holds_every_verdict_record_exactly(chunk: int) -> None:
    details = _details(SERVER, chunk)
    assert details
    expected = {
        r["key"]: r["value"]
        for r in _records(SERVER)
        if r["key"].startswith(VERDICT_PREFIXES) and not isinstance(r["value"], dict | list)
    }
    last = dict(details[-1].values)
    assert {k: v for k, v in last.items() if k.startswith(VERDICT_PREFIXES)} == expected
    assert last["effective_scenario"] == "Server"
    assert "loaded_qsl_set" not in last  # the bulk stays in the log
    # Seeds above 2**63 stay exact.
    assert last["effective_schedule_rng_seed"] == expected["effective_schedule_rng_seed"]
    assert all(d.node == "node01" for d in details)


def test_escapes_that_are_not_unicode_never_reach_a_recording_as_such() -> None:
    """JSON lets ``\\ud800`` through (a lone surrogate); a recording cannot hold it: left out or replaced."""
    from tokenwatch.recording.codec import dumps, loads

    lines = (
        b':::MLLOG {"key": "result_x\\ud800", "value": 1}\n'
        b':::MLLOG {"key": "result_reason", "value": "a\\udc00b"}\n'
        b':::MLLOG {"key": "w", "value": "x\\ud800", "metadata": {"is_warning": true}}\n'
        b':::MLLOG {"key": "result_validity", "value": "INVALID\\ud800"}\n'
    )
    events = DetailLogParser("n").feed(lines, 1.0)
    details = [e for e in events if isinstance(e, LoadGenDetail)]
    assert [dict(d.values) for d in details] == [{}]  # neither key nor value could be recorded as read
    for event in events:
        assert dumps(loads(dumps(event))) == dumps(event)
