"""Property-based bad input for every parser: random bytes, truncation, wrong encodings, huge lines,
numbers out of range. The outcome is events (skipped lines as warnings) or one SourceFormatError /
RunLoadError line naming the file; never another exception, never a hang."""

from __future__ import annotations

import itertools
import math
import shutil
import tempfile
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import progress_counts
from tokenwatch.base.events import (
    GPU_METRICS,
    GpuBatch,
    LatencyBatch,
    LoadGenDetail,
    LogLine,
    NodeStatus,
    Notice,
    Progress,
)
from tokenwatch.recording.codec import dumps, loads
from tokenwatch.runs.errors import RunLoadError
from tokenwatch.runs.result_folders import summarize_result_dirs
from tokenwatch.sources.errors import SourceFormatError
from tokenwatch.sources.harness_log import LogPatternError, LogProgressParser
from tokenwatch.sources.loadgen_detail import DetailLogParser, parse_detail_bytes
from tokenwatch.sources.loadgen_summary import parse_summary_text, read_summary
from tokenwatch.sources.loadgen_trace import TraceTailParser
from tokenwatch.sources.nvidia_smi import NvidiaSmiParser
from tokenwatch.sources.prometheus_metrics import MetricsScrapeParser

from .conftest import DATA, LOADGEN

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

TRACE = (LOADGEN / "generated" / "server-short" / "mlperf_log_trace.json").read_bytes()
SUMMARY = (LOADGEN / "nvidia-gb200-server" / "mlperf_log_summary.txt").read_bytes()
DETAIL = (LOADGEN / "generated" / "offline-short" / "mlperf_log_detail.txt").read_bytes()
VLLM_LOG = (DATA / "logs" / "vllm.log").read_bytes()[:20_000]
SCRAPE = (DATA / "prometheus" / "IBM-vllm_pr-18_bloom-560m.excerpt.prom").read_bytes()
DCGM = (DATA / "prometheus" / "datadog-dcgm-t4-a10g.txt").read_bytes()
SMI_ROWS = b"0, 1398.2, 1400.00, 1965, 3996, 189471, 196608, 87, 100, 61, 0x0000000000000004\n" * 4

ENCODINGS = ["utf-8", "utf-16", "utf-16-le", "utf-32", "latin-1", "cp1252"]


def chunked(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(points)]


def reencode(data: bytes, encoding: str) -> bytes:
    return data.decode("utf-8", "replace").encode(encoding, "replace")


def mutate(data: bytes, position: int, replacement: bytes) -> bytes:
    at = position % (len(data) + 1)
    return data[:at] + replacement + data[at + len(replacement) :]


junk = st.binary(max_size=4000)
cuts = st.lists(st.integers(min_value=0, max_value=10**7), max_size=30)
numbers = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.sampled_from(["1e999", "-0", "nan", "inf", "0x" + "f" * 40, "١٢٣", "9" * 400, "", "[N/A]"]),
).map(str)


# ---------------------------------------------------------------- LoadGen trace
@FUZZ
@given(prefix=junk, chunks=cuts, truncate=st.integers(min_value=0, max_value=len(TRACE)))
def test_trace_tail_survives_anything(prefix: bytes, chunks: list[int], truncate: int) -> None:
    parser = TraceTailParser("n")
    data = prefix + TRACE[:truncate]
    events = [e for piece in chunked(data, chunks) for e in parser.feed(piece)] + parser.close()
    assert all(isinstance(e, Progress | LatencyBatch | Notice | NodeStatus) for e in events)
    done = progress_counts(events)
    assert done == sorted(done)
    assert all(d <= 80 for d in done)  # never more samples than the file holds
    assert [e.t for e in events] == sorted(e.t for e in events)
    for batch in (e for e in events if isinstance(e, LatencyBatch)):
        assert np.isfinite(batch.values_s).all()
        assert (batch.values_s >= 0).all()
    assert sum(isinstance(e, Notice) for e in events) <= 101  # bounded reporting


@FUZZ
@given(
    position=st.integers(min_value=0, max_value=len(TRACE)),
    value=numbers,
    encoding=st.sampled_from(ENCODINGS),
)
def test_trace_numbers_out_of_range_and_encodings(position: int, value: str, encoding: str) -> None:
    data = reencode(mutate(TRACE, position, value.encode("utf-8", "replace")), encoding)
    parser = TraceTailParser("n")
    events = parser.feed(data) + parser.close()
    for batch in (e for e in events if isinstance(e, LatencyBatch)):
        assert np.isfinite(batch.values_s).all()


# ---------------------------------------------------------------- LoadGen summary / detail
@FUZZ
@given(data=junk)
def test_summary_random_bytes(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "mlperf_log_summary.txt"
        path.write_bytes(data)
        message = ""
        try:
            summary = read_summary(path)
        except SourceFormatError as exc:
            message = str(exc)
        else:
            assert summary.scenario  # what came back passed the checks
        if message:
            assert message.startswith(str(path))
            assert "\n" not in message


@FUZZ
@given(
    truncate=st.integers(min_value=0, max_value=len(SUMMARY)),
    position=st.integers(min_value=0, max_value=len(SUMMARY)),
    value=numbers,
    encoding=st.sampled_from(ENCODINGS),
)
def test_summary_truncated_mutated_reencoded(truncate: int, position: int, value: str, encoding: str) -> None:
    data = reencode(mutate(SUMMARY[:truncate], position, value.encode("utf-8", "replace")), encoding)
    summary = parse_summary_text(data.decode("utf-8", "replace"), "s.txt")
    for number in (summary.tokens_per_s, summary.samples_per_s):
        assert math.isnan(number) or (math.isfinite(number) and number >= 0)
    for stats in summary.latency_ns.values():
        assert all(math.isfinite(v) and v >= 0 for v in stats.values())
    assert all(s.startswith("s.txt:") for s in summary.skipped)


@FUZZ
@given(data=junk, truncate=st.integers(min_value=0, max_value=len(DETAIL)), chunks=cuts)
def test_detail_log_anything(data: bytes, truncate: int, chunks: list[int]) -> None:
    log = parse_detail_bytes(data + DETAIL[:truncate], "d.txt")
    assert log.records >= 0
    assert all(s.startswith("d.txt:") for s in log.skipped)
    parser = DetailLogParser("n")
    events = [e for piece in chunked(DETAIL[:truncate] + data, chunks) for e in parser.feed(piece, 1.0)]
    assert all(isinstance(e, Notice | LoadGenDetail | NodeStatus) for e in events)
    finished = [e for e in events if isinstance(e, NodeStatus)]
    assert len(finished) <= 1
    assert all(e.state == "finished" for e in finished)
    # read as a backlog, every event is at a LoadGen time that is a number and never goes back
    backlog = DetailLogParser("n")
    read = [e for piece in chunked(DETAIL[:truncate] + data, chunks) for e in backlog.feed_backlog(piece)]
    read += backlog.end_backlog()[0]
    times = [e.t for e in read]
    assert all(math.isfinite(t) and t >= 0 for t in times)
    assert times == sorted(times)
    for event in events:  # whatever the log held, the verdict's records can be recorded and read back
        if isinstance(event, LoadGenDetail):
            back = loads(dumps(event))
            assert isinstance(back, LoadGenDetail)
            assert back.values == event.values


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(summary=junk, detail=junk, keep=st.booleans())
def test_summarize_dirs_never_crashes(summary: bytes, detail: bytes, keep: bool) -> None:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        node = root / "node00"
        shutil.copytree(
            LOADGEN / "asustek-8xmi325x-offline" / "llama2-70b_offline_performance_run_1_gpu_0", node
        )
        (node / "mlperf_log_detail.txt").write_bytes(detail)
        if not keep:
            (node / "mlperf_log_summary.txt").write_bytes(summary)
        message = ""
        try:
            result, _ = summarize_result_dirs([root], None)
        except (SourceFormatError, RunLoadError) as exc:
            message = str(exc)
        else:
            assert len(result.nodes) == 1
        assert "\n" not in message


# ---------------------------------------------------------------- nvidia-smi
@FUZZ
@given(data=junk, chunks=cuts)
def test_nvidia_smi_random_bytes(data: bytes, chunks: list[int]) -> None:
    parser = NvidiaSmiParser("n")
    events = [e for piece in chunked(SMI_ROWS + data + SMI_ROWS, chunks) for e in parser.feed(piece, 1.0)]
    events += parser.close(1.0)
    assert all(isinstance(e, GpuBatch | Notice) for e in events)
    rows = sum(len(e.gpu) for e in events if isinstance(e, GpuBatch))
    assert rows >= 7  # the good rows around the junk survive


@FUZZ
@given(values=st.lists(numbers, min_size=11, max_size=11))
def test_nvidia_smi_numbers_out_of_range(values: list[str]) -> None:
    parser = NvidiaSmiParser("n")
    row = ", ".join(v.replace(",", "") for v in values).encode() + b"\n"
    (event,) = parser.feed(row, 1.0)
    if isinstance(event, GpuBatch):
        assert event.values.shape == (1, len(GPU_METRICS))
        for name in ("power_w", "sm_clock_mhz", "hbm_used_mib", "util_pct", "temp_c"):
            value = float(event.values[0, GPU_METRICS.index(name)])
            assert math.isnan(value) or math.isfinite(value)
        assert 0 <= int(event.throttle_reasons[0]) < 1 << 64
        assert 0 <= int(event.gpu[0]) <= 4095
    else:
        assert isinstance(event, Notice)
        assert "line 1:" in event.message


# ---------------------------------------------------------------- Prometheus
@FUZZ
@given(data=junk, position=st.integers(min_value=0, max_value=len(SCRAPE)), value=numbers)
def test_scrapes_random_and_mutated(data: bytes, position: int, value: str) -> None:
    parser = MetricsScrapeParser("vllm", "n")
    tokens: list[int] = []
    for scrape in (SCRAPE, data, mutate(SCRAPE, position, value.encode()), SCRAPE):
        for event in parser.parse(scrape.decode("utf-8", "replace"), 1.0):
            assert isinstance(event, Progress | LatencyBatch | Notice)
            if isinstance(event, Progress):
                assert event.tokens_done is not None
                tokens.append(event.tokens_done)
            if isinstance(event, LatencyBatch):
                assert event.counts is not None
                assert (event.counts > 0).all()
                assert np.isfinite(event.values_s).all()
    assert tokens == sorted(tokens)  # resets are absorbed: cumulative never goes back


@FUZZ
@given(data=junk, encoding=st.sampled_from(ENCODINGS))
def test_dcgm_random_and_reencoded(data: bytes, encoding: str) -> None:
    nodes = ("fallback", "424773df46e0", "551bdf382151", "ip-11111")
    parser = MetricsScrapeParser("dcgm", node_label="Hostname", node="fallback", nodes=nodes)
    for scrape in (data, reencode(DCGM, encoding)):
        events = parser.parse(scrape.decode("utf-8", "replace"), 1.0)
        assert all(isinstance(e, GpuBatch | Notice) for e in events)
        assert len([e for e in events if isinstance(e, GpuBatch)]) <= 1  # one batch per scrape


# ---------------------------------------------------------------- harness logs
@FUZZ
@given(data=junk, chunks=cuts, encoding=st.sampled_from(ENCODINGS))
def test_vllm_log_random_truncated_reencoded(data: bytes, chunks: list[int], encoding: str) -> None:
    parser = LogProgressParser.preset("vllm", "n")
    stream = reencode(VLLM_LOG, encoding) + data + VLLM_LOG
    events = [e for piece in chunked(stream, chunks) for e in parser.feed(piece, 1.0)] + parser.close(2.0)
    assert all(isinstance(e, LogLine | Progress | Notice) for e in events)
    done = progress_counts(events, tokens=True)
    assert done == sorted(done)


@FUZZ
@given(pattern=st.text(max_size=60), line=st.text(max_size=200))
def test_user_patterns_error_cleanly_or_work(pattern: str, line: str) -> None:
    message = ""
    try:
        parser = LogProgressParser.from_patterns({"rule": pattern}, "n")
    except LogPatternError as exc:
        message = str(exc)
    assert "\n" not in message
    if message:
        return
    events = parser.feed(line.encode("utf-8", "surrogatepass") + b"\n", 1.0)
    assert all(isinstance(e, LogLine | Progress | Notice) for e in events)


# ---------------------------------------------------------------- huge lines, every streaming parser
def test_huge_lines_are_cut_reported_and_parsing_goes_on() -> None:
    huge = b"{" + b"x" * (3 << 20)
    trace = TraceTailParser("n")
    events = trace.feed(TRACE[:2000]) + trace.feed(huge) + trace.feed(b"\n" + TRACE[2000:])
    assert any(isinstance(e, Notice) and "longer than" in e.message for e in events)
    assert [e.samples_done for e in events if isinstance(e, Progress)][-1] == 80
    assert trace._lines.pending_bytes == 0
    smi = NvidiaSmiParser("n")
    assert [type(e) for e in smi.feed(huge + b"\n" + SMI_ROWS[:81], 1.0)] == [Notice, GpuBatch]
    log = LogProgressParser.preset("vllm", "n")
    assert isinstance(log.feed(huge + b"\nok\n", 1.0)[0], Notice)
    scrape = MetricsScrapeParser("vllm", "n", baseline=False)
    events = scrape.parse(SCRAPE.decode() + "x" * (1 << 20) + "\n", 1.0)
    assert [e.tokens_done for e in events if isinstance(e, Progress)] == [218152]
    assert any(isinstance(e, Notice) for e in events)
    text = SUMMARY.decode().replace(
        "Completed tokens per second: 49359.61", "Tokens per second: " + "9" * 100_000
    )
    summary = parse_summary_text(text, "s")
    assert summary.skipped == ["s:8: skipped: '999999999999999999999999999999' is not a non-negative number"]
    assert summary.tokens_per_s == 49359.61  # the second "Completed tokens per second" line, further down
