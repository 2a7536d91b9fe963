"""Tailing mlperf_log_trace.json files written by the real LoadGen 6.0.17."""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import progress_counts
from tokenwatch.base.events import Event, LatencyBatch, NodeStatus, Notice, Progress, RunStarted
from tokenwatch.core import RackCore
from tokenwatch.sources.loadgen_detail import read_detail
from tokenwatch.sources.loadgen_summary import read_summary
from tokenwatch.sources.loadgen_trace import TraceTailParser

from .conftest import LOADGEN, feed_in_chunks

RUNS = ["offline-short", "server-short"]


def _trace(run: str) -> bytes:
    return (LOADGEN / "generated" / run / "mlperf_log_trace.json").read_bytes()


def _values(events: list[Event], metric: str) -> np.ndarray:
    parts = [e.values_s for e in events if isinstance(e, LatencyBatch) and e.metric == metric]
    return np.concatenate(parts) if parts else np.array([])


def loadgen_percentile(values_ns: np.ndarray, q: float) -> float:
    """LoadGen's rule (results.cc): the sorted latencies' element at index floor(q * n)."""
    ordered = np.sort(values_ns)
    return float(ordered[int(q * len(ordered))])


@pytest.mark.parametrize("run", RUNS)
@pytest.mark.parametrize("chunk", [1, 113, 4096, 1 << 30])
def test_tail_in_any_chunking_gives_loadgen_figures(run: str, chunk: int) -> None:
    folder = LOADGEN / "generated" / run
    summary = read_summary(folder / "mlperf_log_summary.txt")
    detail = read_detail(folder / "mlperf_log_detail.txt")
    parser = TraceTailParser("node00")
    events = feed_in_chunks(parser.feed, _trace(run), chunk) + parser.close()
    progress = [e for e in events if isinstance(e, Progress)]
    counts = progress_counts(progress)
    assert counts == sorted(counts)
    assert counts[-1] == detail.samples_completed
    assert [p.t for p in progress] == sorted(p.t for p in progress)
    assert not [e for e in events if isinstance(e, Notice)]  # LoadGen's broken LogDetail lines are not news
    e2e_ns = np.round(_values(events, "e2e") * 1e9)
    assert len(e2e_ns) == detail.samples_completed
    # Every latency figure of LoadGen's own summary, reproduced from the trace to the nanosecond.
    expected = summary.latency_ns["e2e"]
    assert e2e_ns.min() == expected["min"]
    assert e2e_ns.max() == expected["max"]
    for key, q in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
        assert loadgen_percentile(e2e_ns, q) == expected[key]
    ttft_ns = np.round(_values(events, "ttft") * 1e9)
    assert len(ttft_ns) == detail.samples_completed
    if "ttft" in summary.latency_ns:  # Server prints the first-token block
        assert loadgen_percentile(ttft_ns, 0.99) == summary.latency_ns["ttft"]["p99"]
        assert ttft_ns.min() == summary.latency_ns["ttft"]["min"]
    assert (ttft_ns <= e2e_ns.max()).all()
    finished = [e for e in events if isinstance(e, NodeStatus)]
    assert len(finished) == 1
    assert finished[0].state == "finished"


@pytest.mark.parametrize("run", RUNS)
def test_trace_clock_spans_the_run(run: str) -> None:
    folder = LOADGEN / "generated" / run
    detail = read_detail(folder / "mlperf_log_detail.txt")
    parser = TraceTailParser("n")
    events = parser.feed(_trace(run))
    last = [e for e in events if isinstance(e, Progress)][-1]
    assert detail.samples_completed is not None
    # Run time of the last completion on the trace's own clock vs LoadGen's samples / (samples/s).
    assert last.t == pytest.approx(detail.samples_completed / detail.samples_per_s, rel=0.02)


def test_unterminated_trace_keeps_partial_line_and_resumes() -> None:
    data = _trace("offline-short")
    cut = data.index(b'{"name":"Sample","cat":"default","ph":"b"', len(data) // 2) + 30
    parser = TraceTailParser("n")
    first = parser.feed(data[:cut])
    before = progress_counts(first)[-1]
    assert parser._lines.pending_bytes == 30  # the half-written event waits for its end
    assert not any(isinstance(e, NodeStatus) for e in first)  # no LastTrace yet: not finished
    rest = parser.feed(data[cut:])
    after = progress_counts(rest)[-1]
    assert before < after == 82


def test_tokens_per_sample_gives_tokens() -> None:
    parser = TraceTailParser("n", tokens_per_sample=12.5)
    events = parser.feed(_trace("offline-short"))
    last = [e for e in events if isinstance(e, Progress)][-1]
    assert last.tokens_done == round(82 * 12.5)
    unknown = TraceTailParser("n").feed(_trace("offline-short"))[-2]
    assert isinstance(unknown, Progress)
    assert unknown.tokens_done is None  # unknown without it
    with pytest.raises(ValueError, match="tokens_per_sample"):
        TraceTailParser("n", tokens_per_sample=-1)


def test_garbage_and_broken_sample_lines_become_notices() -> None:
    data = _trace("server-short").split(b"\n")
    sample_line = next(
        i for i, line in enumerate(data) if line.startswith(b'{"name":"Sample","cat":"default","ph":"b"')
    )
    data[sample_line] = data[sample_line].replace(b'"complete_ns":', b'"complete_ns":-')
    data.insert(3, b"\xff\xfe garbage")
    parser = TraceTailParser("n")
    events = parser.feed(b"\n".join(data))
    notices = [e.message for e in events if isinstance(e, Notice)]
    assert len(notices) == 2
    assert notices[0].startswith("loadgen-trace: line 4: not a trace event line")
    assert f"line {sample_line + 2}: Sample event without a valid ts/complete_ns" in notices[1]
    assert [e for e in events if isinstance(e, Progress)][-1].samples_done == 79


def test_events_feed_the_core() -> None:
    core = RackCore()
    core.ingest(RunStarted(0.0, "t", "Server", ("n",), 1, None, None, "live", 0.0))
    for event in TraceTailParser("n").feed(_trace("server-short")):
        core.ingest(event)
    assert core.state.rack_latency["e2e"].total == 80
    assert core.state.rack_latency["ttft"].total == 80
    assert int(core.state.samples[0]) == 80
