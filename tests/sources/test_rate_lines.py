"""Rate lines read as their writers mean them, one test per form and version.

Where no real log of a form exists, the lines are written here from the writer's own format string:
* vLLM V0 ``vllm/engine/metrics.py`` (vllm-project/vllm@00c33e81b526a179a6afb86512d1e8198965ee2f:
  ``LoggingStatLogger.log``, logger format ``%(levelname)s %(asctime)s %(filename)s:%(lineno)d]``);
* vLLM V1 ``vllm/v1/metrics/loggers.py`` (vllm-project/vllm@005a810bc40faa25b8870fbc8559c3462581eee3:
  ``Engine %03d: ...``; ROCm/vllm@13a8c9894ae58c68e8f7d4a69226aefc7a5528ff: ``Preemptions``,
  ``MM cache hit rate`` and ``%d Engines Aggregated:``);
* SGLang ``managers/controller/tp_worker.py`` (sgl-project/sglang@02eb87eabc974cb623e76362d0e68f192db6a51e,
  2024: ``[gpu_id=N] Decode batch. ...``) and ``observability/scheduler_metrics_mixin.py``
  (sgl-project/sglang@00eef5422c62803f85fea2448dc3d96050a159b7, 2026: ``Decode batch, ...`` under
  ``configure_logger``'s ``[%(asctime)s{prefix}]`` with prefix `` DP{dp} TP{tp}``).
Expected figures are computed here from the rates the lines state, never from the parser's output.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from tokenwatch.base.events import Event, Notice, Progress
from tokenwatch.sources.harness_log import LogProgressParser

START = datetime(2025, 9, 2, 13, 26, 52, tzinfo=UTC)


def _vllm_v0(stamp: datetime, gen: float, prompt: float, _engine: int) -> str:
    return (
        f"INFO {stamp:%m-%d %H:%M:%S} metrics.py:341] Avg prompt throughput: {prompt:.1f} tokens/s, "
        f"Avg generation throughput: {gen:.1f} tokens/s, Running: 4 reqs, Swapped: 0 reqs, Pending: 0 reqs, "
        "GPU KV cache usage: 5.1%, CPU KV cache usage: 0.0%."
    )


def _v1_body(gen: float, prompt: float) -> str:
    return f"Avg prompt throughput: {prompt:.1f} tokens/s, Avg generation throughput: {gen:.1f} tokens/s, "


def _vllm_v1(stamp: datetime, gen: float, prompt: float, engine: int) -> str:
    return (
        f"(APIServer pid=158) INFO {stamp:%m-%d %H:%M:%S} [loggers.py:123] Engine {engine:03d}: "
        + _v1_body(gen, prompt)
        + "Running: 50 reqs, Waiting: 0 reqs, GPU KV cache usage: 20.4%, Prefix cache hit rate: 37.1%"
    )


def _vllm_v1_docker(stamp: datetime, gen: float, prompt: float, engine: int) -> str:
    return f"{stamp:%Y-%m-%dT%H:%M:%S}.{stamp.microsecond:06d}123Z " + _vllm_v1(stamp, gen, prompt, engine)


def _vllm_v1_ray(stamp: datetime, gen: float, prompt: float, engine: int) -> str:
    return (
        f"(RayWorkerWrapper pid=4321, ip=10.0.0.7) INFO {stamp:%m-%d %H:%M:%S} [loggers.py:273] "
        f"Engine {engine:03d}: " + _v1_body(gen, prompt) + "Running: 3 reqs, Waiting: 1 reqs, "
        "GPU KV cache usage: 1.0%, Prefix cache hit rate: 0.0%"
    )


def _vllm_v1_newest(stamp: datetime, gen: float, prompt: float, engine: int) -> str:
    return (
        f"(APIServer pid=7) INFO {stamp:%m-%d %H:%M:%S} [loggers.py:248] Engine {engine:03d}: "
        + _v1_body(gen, prompt)
        + "Running: 8 reqs, Waiting: 2 reqs, Deferred: 1 reqs, Preemptions: 3, GPU KV cache usage: 3.0%, "
        "Prefix cache hit rate: 10.0%, External prefix cache hit rate: 4.0%, MM cache hit rate: 50.0%"
    )


def _vllm_v1_aggregated(stamp: datetime, gen: float, prompt: float, _engine: int) -> str:
    return (
        f"(APIServer pid=7) INFO {stamp:%m-%d %H:%M:%S} [loggers.py:248] 4 Engines Aggregated: "
        + _v1_body(gen, prompt)
        + "Running: 32 reqs, Waiting: 0 reqs, GPU KV cache usage: 40.0%, Prefix cache hit rate: 0.0%"
    )


def _sglang_2026(stamp: datetime, gen: float, _prompt: float, engine: int) -> str:
    return (
        f"[{stamp:%Y-%m-%d %H:%M:%S} DP{engine} TP{engine}] Decode batch, #running-req: 12, #token: 9000, "
        f"token usage: 0.05, cuda graph: True, gen throughput (token/s): {gen:.2f}, #queue-req: 0"
    )


FORMS = {
    "vllm-v0-5s": (_vllm_v0, "vllm", 5.0),
    "vllm-v1-engine": (_vllm_v1, "vllm", 10.0),
    "vllm-v1-docker-rfc3339": (_vllm_v1_docker, "vllm", 10.0),
    "vllm-v1-ray-prefix": (_vllm_v1_ray, "vllm", 10.0),
    "vllm-v1-preemptions-mm-cache": (_vllm_v1_newest, "vllm", 10.0),
    "vllm-v1-engines-aggregated": (_vllm_v1_aggregated, "vllm", 10.0),
    "vllm-v1-5s-interval": (_vllm_v1, "vllm", 5.0),
    "sglang-2026-dp": (_sglang_2026, "sglang", 2.0),
}


def _feed(parser: LogProgressParser, lines: list[str], t: float = 1.0) -> list[Event]:
    return parser.feed("".join(line + "\n" for line in lines).encode(), t)


def _last(events: list[Event]) -> Progress:
    return [e for e in events if isinstance(e, Progress)][-1]


@pytest.mark.parametrize("form", sorted(FORMS))
def test_n_lines_credit_exactly_the_time_they_cover(form: str) -> None:
    """The N/(N-1) bug pinned: N lines at a fixed interval cover (N-1) intervals, and the tokens are the
    rates of lines 2..N times that interval, so the rate over the covered time is their mean."""
    write, preset, interval = FORMS[form]
    rng = random.Random(form)
    gen = [round(rng.uniform(100, 5000), 1) for _ in range(12)]
    prompt = [round(rng.uniform(0, 900), 1) for _ in range(12)]
    lines = [write(START + timedelta(seconds=interval * i), gen[i], prompt[i], 0) for i in range(12)]
    parser = LogProgressParser.preset(preset, "n")
    events = _feed(parser, lines)
    expected = sum(rate * interval for rate in gen[1:])
    progress = _last(events)
    assert progress.tokens_done == round(expected)
    assert progress.tokens_done / (11 * interval) == pytest.approx(
        sum(gen[1:]) / 11, abs=0.5 / (11 * interval)
    )
    if preset == "vllm":
        assert progress.prompt_tokens_done == round(sum(rate * interval for rate in prompt[1:]))
    assert not [e for e in events if isinstance(e, Notice)]


@pytest.mark.parametrize("form", ["vllm-v1-engine", "vllm-v1-preemptions-mm-cache", "sglang-2026-dp"])
def test_data_parallel_engines_are_streams_and_the_node_is_their_sum(form: str) -> None:
    write, preset, interval = FORMS[form]
    rng = random.Random(7)
    engines, rounds = 4, 9
    rates = [[round(rng.uniform(500, 3000), 1) for _ in range(rounds)] for _ in range(engines)]
    lines = [  # each round, every engine writes its line in the same second
        write(START + timedelta(seconds=interval * r), rates[e][r], 0.0, e)
        for r in range(rounds)
        for e in range(engines)
    ]
    parser = LogProgressParser.preset(preset, "n")
    events = _feed(parser, lines)
    assert len(parser.streams) == engines
    expected = sum(rate * interval for per_engine in rates for rate in per_engine[1:])
    assert _last(events).tokens_done == round(expected)
    for stream, per_engine in zip(parser.streams.values(), rates, strict=True):
        assert stream.tokens == pytest.approx(sum(rate * interval for rate in per_engine[1:]))
    assert not [e for e in events if isinstance(e, Notice)]


def test_sglang_2024_lines_without_timestamps_integrate_over_feed_time() -> None:
    parser = LogProgressParser.preset("sglang", "n")
    line = (
        "[gpu_id=0] Decode batch. #running-req: 1, #token: 90, token usage: 0.00, "
        "gen throughput (token/s): {}, #queue-req: 0\n"
    )
    assert _last(parser.feed(line.format("41.62").encode(), 10.0)).tokens_done == 0
    assert _last(parser.feed(line.format("50.00").encode(), 13.0)).tokens_done == round(50.0 * 3)
    assert list(parser.streams) == [("gpu_id=0", "")]


def test_idle_intervals_skipped_by_vllm_are_credited_one_cadence() -> None:
    """vLLM logs nothing while an engine is idle but its clock runs on: after a 2-minute gap the next
    line covers one logging interval (10 s for this V1 log, 5 s for the V0 one: learnt from the lines)."""
    for write, interval in ((_vllm_v1, 10.0), (_vllm_v0, 5.0)):
        stamps = [START + timedelta(seconds=interval * i) for i in range(4)]
        stamps.append(stamps[-1] + timedelta(seconds=120))
        parser = LogProgressParser.preset("vllm", "n")
        events = _feed(parser, [write(s, 100.0, 0.0, 0) for s in stamps])
        assert _last(events).tokens_done == round(100.0 * interval * 4)


def test_a_line_from_an_unknown_vllm_version_is_skipped_with_a_warning() -> None:
    parser = LogProgressParser.preset("vllm", "n")
    lines = [_vllm_v1(START, 100.0, 0.0, 0), _vllm_v1(START + timedelta(seconds=10), 200.0, 0.0, 0)]
    lines.append("INFO 09-02 13:27:12 [loggers.py:9] Engine 000: Avg generation throughput (tok/s)=300.0")
    events = _feed(parser, lines)
    notices = [e.message for e in events if isinstance(e, Notice)]
    assert len(notices) == 1
    assert "line 3: a form no pattern of this preset reads" in notices[0]
    assert _last(events).tokens_done == 2000


def test_an_engine_never_seen_before_starts_its_own_clock_with_a_warning() -> None:
    parser = LogProgressParser.preset("vllm", "n")
    lines = [_vllm_v1(START + timedelta(seconds=10 * i), 100.0, 0.0, 0) for i in range(3)]
    lines.append(_vllm_v1(START + timedelta(seconds=30), 9999.0, 0.0, 5))  # a spike, if it were credited
    lines.append(_vllm_v1(START + timedelta(seconds=40), 300.0, 0.0, 5))
    events = _feed(parser, lines)
    notices = [e.message for e in events if isinstance(e, Notice)]
    assert len(notices) == 1
    assert "line 4: new writer 'APIServer pid=158 Engine 005'" in notices[0]
    assert _last(events).tokens_done == 100 * 10 * 2 + 300 * 10


def test_a_clock_that_goes_back_restarts_the_stream_with_a_warning() -> None:
    parser = LogProgressParser.preset("vllm", "n")
    stamps = [
        START,
        START + timedelta(seconds=10),
        START - timedelta(hours=1),
        START - timedelta(seconds=3590),
    ]
    events = _feed(parser, [_vllm_v1(s, 100.0, 0.0, 0) for s in stamps])
    notices = [e.message for e in events if isinstance(e, Notice)]
    assert len(notices) == 1
    assert "line 3: clock went back 3610 s" in notices[0]
    assert _last(events).tokens_done == 100 * 10 + 100 * 10  # never a negative or hour-long credit


def test_after_one_misstamped_line_the_clock_counts_from_the_last_good_one() -> None:
    """A line stamped an hour back, then the clock is right again: the next line is credited the 3 s
    since the last good line, not a whole interval nor the hour back and forth."""
    parser = LogProgressParser.preset("vllm", "n")
    stamps = [START, START + timedelta(seconds=10), START - timedelta(hours=1), START + timedelta(seconds=13)]
    events = _feed(parser, [_vllm_v1(s, 100.0, 0.0, 0) for s in stamps])
    assert _last(events).tokens_done == 100 * 10 + 100 * 3


def test_two_processes_writing_one_log_are_counted_once_each() -> None:
    parser = LogProgressParser.preset("vllm", "n")
    lines = []
    for i in range(5):
        stamp = START + timedelta(seconds=10 * i)
        lines.append(_vllm_v1(stamp, 100.0, 0.0, 0))
        lines.append(_vllm_v1(stamp, 1000.0, 0.0, 0).replace("pid=158", "pid=999"))
    lines.append(lines[-1])  # a line written twice (two tails of one file) adds nothing
    events = _feed(parser, lines)
    assert len(parser.streams) == 2
    assert _last(events).tokens_done == 100 * 40 + 1000 * 40
    # Unbuffered writers can run two records into one line: both are read, each with its own stamp.
    merged = LogProgressParser.preset("vllm", "n")
    halves = [_vllm_v1(START + timedelta(seconds=10 * i), 100.0, 0.0, 0) for i in range(3)]
    other = [_vllm_v1(START + timedelta(seconds=10 * i), 50.0, 0.0, 1) for i in range(3)]
    events = _feed(merged, [a + b for a, b in zip(halves, other, strict=True)])
    assert _last(events).tokens_done == 100 * 20 + 50 * 20


def test_tqdm_rewrites_are_read_before_the_line_ends() -> None:
    """A progress bar rewrites one line with \\r for the whole run: each rewrite counts as it arrives,
    and a run far longer than the line limit is never cut."""
    parser = LogProgressParser.preset("nvidia-mlperf", "n")
    bar = (
        "Processing:  {pct:2d}%|#   | {n}/100000 [{m:02d}:{s:02d}<10:00, 50.00samples/s] "
        "Stats=[ 50.00 samples/s, 500.00 tokens/s ]"
    )
    seen = []
    for i in range(1, 3001):
        text = "\r" + bar.format(pct=i // 1000, n=i * 10, m=(i // 5) // 60, s=(i // 5) % 60)
        events = parser.feed(text.encode(), float(i))
        seen += [e for e in events if isinstance(e, Progress)]
    assert seen[-1].samples_done == 29990  # the last rewrite waits for the byte after its \r
    assert seen[-1].tokens_done == round(500.0 * 29990 / 50.0)
    assert [p.samples_done for p in seen] == [10 * i for i in range(1, 3000)]
    closing = parser.close(9e9)
    assert not [e for e in closing if isinstance(e, Notice)]
    assert _last(closing).samples_done == 30000
