"""A file's backlog at the watch's start: placed at the times its records carry, or a baseline; and the
run's t = 0 and merged history (tokenwatch/inputs/live/backlog.py, history.py). Figures are computed here from
the files themselves (stamps, rates, trace completions), not from the parsers' output."""

from __future__ import annotations

import json
import re
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from tokenwatch.base.events import Event, LatencyBatch, LogLine, NodeStatus, Notice, Progress
from tokenwatch.inputs.live import backlog as backlog_module
from tokenwatch.inputs.live.backlog import MAX_HISTORY_S, Backfill, Baseline, place, read_local_backlog
from tokenwatch.inputs.live.history import merged, run_clock
from tokenwatch.inputs.live.remote_commands import backlog_command
from tokenwatch.sources.filled_span import expanded
from tokenwatch.sources.harness_log import LogProgressParser
from tokenwatch.sources.loadgen_trace import TraceTailParser

DATA = Path(__file__).resolve().parent.parent / "data" / "sources"
VLLM_LOG = DATA / "logs" / "vllm.log"  # a real vLLM 0.25.1 server log (tests/data/sources/README.md)
TRACE = DATA / "loadgen" / "generated" / "offline-short" / "mlperf_log_trace.json"
STAMP = re.compile(r"(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)")


def stamps_of(text: str) -> list[datetime]:
    """Every vLLM-stamped line's time, read with a plain regex (year 2000, as the parser's axis)."""
    out = []
    for m in STAMP.finditer(text):
        month, day, hour, minute, second = (int(g) for g in m.groups())
        out.append(datetime(2000, month, day, hour, minute, second, tzinfo=UTC))
    return out


def progress(events: list[Event]) -> list[Progress]:
    return [e for e in events if isinstance(e, Progress)]


def test_a_real_vllm_log_backlog_is_placed_at_its_own_stamps() -> None:
    data = VLLM_LOG.read_bytes()
    parser = LogProgressParser.preset("vllm", "n")
    events = parser.feed_backlog(data)
    last, clock = parser.end_backlog()
    events += last
    stamps = stamps_of(data.decode())
    epoch = datetime(2000, 1, 1, tzinfo=UTC)
    assert clock == ((stamps[0] - epoch).total_seconds(), (stamps[-1] - epoch).total_seconds())
    mtime = 1_754_000_000.0
    spans, start = place(events, clock, mtime)
    placed = expanded(spans)  # the filled-in points as events
    times = [e.t for e in placed]
    assert times == sorted(times)
    assert placed[-1].t == mtime  # the newest record was written when the file was last modified
    assert start == pytest.approx(mtime - (stamps[-1] - stamps[0]).total_seconds())
    # the same lines read live in one piece credit the same tokens: the backlog loses and adds nothing
    whole = progress(LogProgressParser.preset("vllm", "n").feed(data, 0.0))
    assert progress(placed)[-1].tokens_done == whole[-1].tokens_done
    assert progress(placed)[-1].prompt_tokens_done == whole[-1].prompt_tokens_done


def _v1_line(stamp: datetime, gen: float, engine: int) -> str:
    """vLLM V1 loggers.py's stats line (see tests/sources/test_rate_lines.py for its provenance)."""
    return (
        f"(APIServer pid=158) INFO {stamp:%m-%d %H:%M:%S} [loggers.py:123] Engine {engine:03d}: "
        f"Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: {gen:.1f} tokens/s, "
        "Running: 50 reqs, Waiting: 0 reqs, GPU KV cache usage: 20.4%, Prefix cache hit rate: 37.1%\n"
    )


def test_two_engines_logging_in_the_same_second_are_spread_over_their_interval() -> None:
    start = datetime(2025, 9, 2, 13, 0, 0, tzinfo=UTC)
    text = "".join(
        _v1_line(start + timedelta(seconds=10 * k), gen, engine)
        for k in range(6)
        for engine, gen in ((0, 100.0), (1, 200.0))
    )
    parser = LogProgressParser.preset("vllm", "n")
    events = parser.feed_backlog(text.encode())
    last, clock = parser.end_backlog()
    assert clock is not None
    placed, _ = place([*events, *last], clock, 1_000_000.0)
    points = progress(expanded(placed))
    t = np.array([p.t for p in points])
    tokens = np.array([p.tokens_done for p in points], dtype=float)
    first = t[0]
    # from the first line on, a point every second, rising at the two engines' 300 tok/s
    assert np.allclose(np.diff(t[t > first]), 1.0)
    rates = np.diff(tokens) / np.diff(t)
    assert rates[t[1:] > first + 10] == pytest.approx(np.full((t[1:] > first + 10).sum(), 300.0))
    assert tokens[-1] == 300.0 * 50  # five intervals of 10 s after the first lines, which start the clocks


def test_the_first_live_line_is_credited_from_the_last_backlog_line() -> None:
    start = datetime(2025, 9, 2, 13, 0, 0, tzinfo=UTC)
    backlog = "".join(_v1_line(start + timedelta(seconds=10 * k), 500.0, 0) for k in range(4))
    parser = LogProgressParser.preset("vllm", "n")
    parser.feed_backlog(backlog.encode())
    _, clock = parser.end_backlog()
    assert clock is not None
    live = progress(parser.feed(_v1_line(start + timedelta(seconds=37), 800.0, 0).encode(), 100.0))
    assert (
        live[-1].tokens_done == 500.0 * 30 + 800.0 * 7
    )  # 7 s since the last backlog line, not a whole interval


def test_a_backlog_without_times_is_a_baseline() -> None:
    """A harness whose lines carry no time: what it had counted when the watch began is where it starts."""
    parser = LogProgressParser.from_patterns(
        {"done": r"done (?P<samples_done>\d+) (?P<tokens_done>\d+)"}, "n"
    )
    lines = "".join(f"done {k} {k * 100}\n" for k in range(1, 301)).encode()
    events = parser.feed_backlog(lines)
    rest, clock = parser.end_backlog()
    assert clock is None
    baseline = Baseline("n")
    kept = baseline.take([*events, *rest, Notice(0.0, "warning", "w", "n")])
    assert [type(e) for e in kept] == [LogLine] * backlog_module.KEEP_LOG_LINES + [Notice]
    assert isinstance(kept[-2], LogLine)
    assert kept[-2].text == "done 300 30000"
    later = baseline.apply(parser.feed(b"done 301 30100\n", 5.0))
    assert progress(later) == [Progress(5.0, "n", 1, 100, None)]


def test_a_clock_that_goes_back_never_puts_a_count_before_an_earlier_one() -> None:
    events: list[Event] = [
        Progress(100.0, "n", None, 10),
        Progress(90.0, "n", None, 20),
        Progress(110.0, "n", None, 30),
    ]
    placed, start = place(events, (80.0, 110.0), 1_000.0)
    assert [e.t for e in expanded(placed)] == [990.0, 990.0, 1000.0]
    assert start == 970.0


def test_a_loadgen_trace_backlog_runs_on_loadgen_s_own_clock() -> None:
    data = TRACE.read_bytes()
    parser = TraceTailParser("n")
    events = parser.feed_backlog(data)
    rest, clock = parser.end_backlog()
    assert rest == []
    assert clock is not None
    starts, ends = [], []
    for line in data.splitlines():
        if line.startswith(b'{"name":'):
            try:
                event = json.loads(line.rstrip(b","))
            except json.JSONDecodeError:  # LoadGen writes its LogDetail lines as broken JSON
                continue
            if "ts" in event:
                starts.append(event["ts"])
            if event["name"] == "Sample" and event["ph"] == "b":
                ends.append(event["ts"] + event["args"]["complete_ns"] / 1e3)
    assert clock[0] == 0.0
    assert clock[1] == pytest.approx((max(ends) - starts[0]) / 1e6)
    items, _ = place(events, clock, 5_000.0)
    placed = expanded(items)  # a trace fills in no points: its events as they are
    assert placed == items
    assert progress(placed)[-1].samples_done == len(ends)
    assert sum(len(e.values_s) for e in placed if isinstance(e, LatencyBatch) and e.metric == "e2e") == len(
        ends
    )
    assert isinstance(placed[-1], NodeStatus)
    assert placed[-1].state == "finished"
    # live now: a completion read at run time 0.001 s is placed there, not held at the trace's own clock
    sample = next(
        line for line in data.splitlines() if line.startswith(b'{"name":"Sample","cat":"default","ph":"b"')
    )
    assert clock[1] > 0.001
    assert [e.t for e in parser.feed(sample + b"\n", 0.001) if isinstance(e, Progress)] == [0.001]


def test_the_run_starts_at_the_earliest_known_start_and_history_merges_by_time() -> None:
    watch = 10_000.0
    assert run_clock(watch, []).attach_s == 0.0
    clock = run_clock(watch, [("log a", 9_000.0), ("trace b", 8_500.0), ("late", 10_500.0), ("none", None)])
    assert (clock.start_wall, clock.attach_s, clock.started_by) == (8_500.0, 1_500.0, "trace b")
    assert run_clock(watch, [("old", watch - 3 * MAX_HISTORY_S)]).attach_s == MAX_HISTORY_S
    a = Backfill("a", [Progress(8_600.4, "x", None, 1), Progress(9_700.0, "x", None, 2)], 8_600.0)
    b = Backfill("b", [LogLine(8_550.25, "y", "hi"), LogLine(10_200.0, "y", "late")], 8_500.0)
    b.at_start.append(Notice(0.0, "info", "connected", "y"))
    out = merged([a, b], clock)
    assert [(type(e).__name__, e.t) for e in out] == [
        ("LogLine", 50.25),
        ("Progress", 100.0),  # counts sit on whole run seconds, the core's ticks
        ("Progress", 1_200.0),
        ("LogLine", 1_500.0),  # nothing after the watch's start: clamped to it
        ("Notice", 1_500.0),
    ]


def test_a_file_larger_than_the_cap_is_read_from_a_line_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "big.log"
    path.write_bytes(b"".join(b"line %04d\n" % k for k in range(100)))  # 10 bytes a line
    monkeypatch.setattr(backlog_module, "MAX_BACKLOG_BYTES", 95)
    got: list[bytes] = []
    state = read_local_backlog(str(path), got.append)
    assert state is not None
    assert (state.size, state.skipped) == (1000, 905)
    assert b"".join(got) == b"".join(b"line %04d\n" % k for k in range(91, 100))
    assert read_local_backlog(str(tmp_path / "none.log"), got.append) is None


def test_the_remote_backlog_command_sends_the_file_as_it_is_now(tmp_path: Path) -> None:
    path = tmp_path / "it's a $(dangerous) name.log"
    path.write_bytes(b"one\ntwo\nthree\n")
    out = subprocess.run(backlog_command(str(path), 9), shell=True, capture_output=True, check=True).stdout
    header, body = out.split(b"\n", 1)
    inode, size, mtime, now, start = header.decode().split()[1:]
    st = path.stat()
    assert (inode, int(size), int(start)) == (str(st.st_ino), 14, 5)
    assert float(mtime) == pytest.approx(st.st_mtime, abs=1e-3)
    assert float(now) >= float(mtime)
    assert body == b"two\nthree\n"[-9:]
    missing = subprocess.run(backlog_command(str(tmp_path / "no"), 9), shell=True, capture_output=True).stdout
    assert missing == b"TW-BACKLOG - 0 0 0 0\n"
