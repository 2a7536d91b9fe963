"""The MLCommons ``endpoints`` harness's ``events.jsonl``, tailed as it is written.

No real ``events.jsonl`` is published, so these files are written by our tests in the format of the
harness's event logger: mlcommons/endpoints@ea3327530376fef63d706f4105612e17c2c80a8d,
``src/inference_endpoint/core/record.py`` (``EventRecord``: event_type, timestamp_ns, sample_uuid,
conversation_id, turn, data, then finish_reason / worker_id when set), ``core/types.py`` (``PromptData``
and ``TextModelOutput``, tagged array-like msgspec structs) and
``async_utils/services/event_logger/file_writer.py`` (one msgspec JSON line per record). The expected
figures follow the harness's own rules (``scripts/early_stopping_estimate_from_events.py`` there):
samples count when issued inside the performance-tracking window; e2e = complete - issued; TTFT =
recv_first - issued.
"""

from __future__ import annotations

import itertools
import json
import random
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import progress_counts
from tokenwatch.base.events import Event, LatencyBatch, NodeStatus, Notice, Progress
from tokenwatch.sources.endpoints_events import EndpointsEventsParser


def record(kind: str, ts: int, uuid: str = "", data: object = None, **extra: object) -> str:
    """One line as the harness's JSONL writer encodes an EventRecord (field order and all)."""
    fields: dict[str, object] = {
        "event_type": kind,
        "timestamp_ns": ts,
        "sample_uuid": uuid,
        "conversation_id": "",
        "turn": None,
        "data": data,
    }
    fields.update(extra)
    return json.dumps(fields, separators=(",", ":"), ensure_ascii=False) + "\n"


@dataclass
class Run:
    lines: list[str]
    e2e_s: list[float]
    ttft_s: list[float]
    prompt_tokens: int
    samples: int


def make_run(samples: int = 40, warmup: int = 3, seed: int = 1) -> Run:
    """A streaming run: warm-up samples (issued, first chunk, no completion), then the measured ones,
    interleaved as a concurrent client sees them, with chunks in between."""
    rng = random.Random(seed)
    at = 5_000_000_000
    timeline: list[tuple[int, str]] = [(at, record("session.started", at))]
    for w in range(warmup):
        issued = at + 1000 * w
        timeline.append((issued, record("sample.issued", issued, f"w{w}", ["PromptData", "warm up"])))
        timeline.append((issued + 5_000_000, record("sample.recv_first", issued + 5_000_000, f"w{w}")))
    start = at + 50_000_000
    timeline.append((start, record("session.start_performance_tracking", start)))
    e2e, ttft, prompt = [], [], 0
    for i in range(samples):
        uuid = f"{i:032x}"
        issued = start + 1 + i * 3_000_000 + rng.randrange(1_000_000)
        ids = list(range(rng.randrange(5, 40)))
        prompt += len(ids)
        first = issued + rng.randrange(20_000_000, 400_000_000)
        done = first + rng.randrange(1_000_000, 2_000_000_000)
        timeline.append((issued, record("sample.issued", issued, uuid, ["PromptData", None, ids])))
        timeline.append((first, record("sample.recv_first", first, uuid)))
        for k in range(3):
            chunk = first + (done - first) * (k + 1) // 4
            timeline.append((chunk, record("sample.recv_non_first", chunk, uuid)))
        output = ["TextModelOutput", ["Hel", "lo", " wörld"]]
        timeline.append(
            (done, record("sample.complete", done, uuid, output, finish_reason="stop", worker_id=i % 4))
        )
        e2e.append((done - issued) / 1e9)
        ttft.append((first - issued) / 1e9)
    last = max(ts for ts, _ in timeline)
    timeline.append((last + 1, record("session.stop_performance_tracking", last + 1)))
    timeline.append((last + 2, record("session.ended", last + 2)))
    timeline.sort(key=lambda item: item[0])
    return Run([line for _, line in timeline], e2e, ttft, prompt, samples)


def values(events: list[Event], metric: str) -> list[float]:
    return sorted(
        float(v) for e in events if isinstance(e, LatencyBatch) and e.metric == metric for v in e.values_s
    )


def test_a_run_gives_samples_latencies_and_prompt_tokens_as_the_harness_counts_them() -> None:
    run = make_run()
    parser = EndpointsEventsParser("node01", tokens_per_sample=250)
    events = parser.feed("".join(run.lines).encode()) + parser.close()
    progress = [e for e in events if isinstance(e, Progress)]
    assert progress[-1].samples_done == run.samples  # the warm-up samples are not counted
    assert progress[-1].tokens_done == run.samples * 250
    assert progress[-1].prompt_tokens_done == run.prompt_tokens
    assert values(events, "e2e") == pytest.approx(sorted(run.e2e_s), abs=1e-12)
    assert values(events, "ttft") == pytest.approx(sorted(run.ttft_s), abs=1e-12)
    assert [e.state for e in events if isinstance(e, NodeStatus)] == ["finished"]
    assert not [e for e in events if isinstance(e, Notice)]
    assert parser.open == {}


def test_tailed_in_pieces_it_gives_the_same_figures_and_counts_only_go_up() -> None:
    run = make_run(samples=60, seed=3)
    data = "".join(run.lines).encode()
    parser = EndpointsEventsParser("node01")
    events: list[Event] = []
    for i, start in enumerate(range(0, len(data), 777)):
        events += parser.feed(data[start : start + 777], float(i))
    events += parser.close(1e6)
    done = progress_counts(events)
    assert done == sorted(done)
    assert done[-1] == 60
    assert len(done) > 10
    assert [e.tokens_done for e in events if isinstance(e, Progress)] == [None] * len(done)  # no token counts
    assert values(events, "e2e") == pytest.approx(sorted(run.e2e_s), abs=1e-12)
    assert [e.t for e in events] == sorted(e.t for e in events)


def test_own_clock_when_no_time_is_given() -> None:
    run = make_run(samples=5)
    parser = EndpointsEventsParser("n")
    events = parser.feed("".join(run.lines).encode())
    first = json.loads(run.lines[0])["timestamp_ns"]
    last = json.loads(run.lines[-1])["timestamp_ns"]
    assert events[-1].t == pytest.approx((last - first) / 1e9)


def test_a_payload_past_the_line_limit_still_counts_its_sample() -> None:
    huge_output = ["TextModelOutput", "x" * (9 << 20)]
    lines = [
        record("sample.issued", 10, "a", ["PromptData", "p"]),
        record("sample.complete", 2_000_000_010, "a", huge_output),
    ]
    parser = EndpointsEventsParser("n")
    events = parser.feed("".join(lines).encode(), 1.0)
    assert [e.samples_done for e in events if isinstance(e, Progress)] == [1]
    assert values(events, "e2e") == [2.0]
    assert not [e for e in events if isinstance(e, Notice)]


def test_bad_lines_and_failed_samples_are_warnings_never_counts() -> None:
    lines = [
        record("sample.issued", 100, "a"),
        "not json at all\n",
        '{"event_type":"sample.complete","timestamp_ns":"soon","sample_uuid":"a"}\n',
        record("sample.complete", 50, "a"),  # before its issue
        record("error.generic", 120, "b", ["ErrorData", "ReadTimeout", "endpoint did not answer"]),
        record("sample.complete", 130, "zzz"),  # never issued: nothing to count
        record("sample.issued", 200, ""),  # no uuid
        '{"timestamp_ns": 300, "event_type": "sample.issued", "sample_uuid": "c"}\n',  # other field order
        record("sample.complete", 1_000_000_300, "c"),
    ]
    parser = EndpointsEventsParser("n")
    events = parser.feed("".join(lines).encode(), 2.0)
    notices = [e.message for e in events if isinstance(e, Notice)]
    assert len(notices) == 5
    assert "line 2: not an endpoints event" in notices[0]
    assert "line 3: not an endpoints event" in notices[1]
    assert "line 4: completion -50 ns after its issue" in notices[2]
    assert "error.generic for sample b: ReadTimeout: endpoint did not answer" in notices[3]
    assert "line 7: sample.issued without a sample_uuid" in notices[4]
    assert [e.samples_done for e in events if isinstance(e, Progress)] == [1]
    assert values(events, "e2e") == [1.0]


def test_open_samples_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("tokenwatch.sources.endpoints_events.MAX_OPEN_SAMPLES", 10)
    parser = EndpointsEventsParser("n")
    events = parser.feed("".join(record("sample.issued", i, f"s{i}") for i in range(25)).encode(), 1.0)
    assert len(parser.open) == 10
    assert "s24" in parser.open
    assert "s0" not in parser.open
    assert len([e for e in events if isinstance(e, Notice)]) == 1


FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
RUN_BYTES = "".join(make_run(samples=12, seed=9).lines).encode()


@FUZZ
@given(
    junk=st.binary(max_size=2000),
    truncate=st.integers(min_value=0, max_value=len(RUN_BYTES)),
    cuts=st.lists(st.integers(min_value=0, max_value=10**6), max_size=20),
)
def test_random_bytes_and_truncation(junk: bytes, truncate: int, cuts: list[int]) -> None:
    data = junk + RUN_BYTES[:truncate] + b"\n" + junk[::-1] + b"\n" + RUN_BYTES
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    parser = EndpointsEventsParser("n")
    events = [e for a, b in itertools.pairwise(points) for e in parser.feed(data[a:b])] + parser.close()
    assert all(isinstance(e, Progress | LatencyBatch | Notice | NodeStatus) for e in events)
    done = progress_counts(events)
    assert done == sorted(done)
    assert all(d <= 24 for d in done)
    for batch in (e for e in events if isinstance(e, LatencyBatch)):
        assert np.isfinite(batch.values_s).all()
        assert (batch.values_s >= 0).all()
    assert [e.t for e in events] == sorted(e.t for e in events)
