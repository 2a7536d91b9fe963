"""A backlog's filled-in points as spans (tokenwatch/sources/filled_span.py), made as arrays by the merge:
against the points one ``Progress`` each, as the spreader made them before (written out here), placed
in time the same way, and through the merge and a real core, which must end where the points one by
one leave it."""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from test_history_batches import as_tuple
from test_history_records import core_after, same_core

from tokenwatch.base.events import Event, LogLine, Notice, Progress
from tokenwatch.inputs.live.backlog import Backfill, place, retime
from tokenwatch.inputs.live.history import RunClock, merged
from tokenwatch.sources.filled_span import BacklogItem, FilledSpan, expanded, span_columns
from tokenwatch.sources.harness_log import LogProgressParser
from tokenwatch.sources.progress_spread import MAX_FILL_POINTS, ProgressSpreader


class PointSpreader:
    """The points one by one: each second of the interval a record covers, its counts rising linearly
    from the record before (flat until the interval where idle), samples held."""

    def __init__(self) -> None:
        self.last: Progress | None = None

    def spread(self, events: list[Event], covered_s: float) -> list[Event]:
        progress = next((e for e in events if isinstance(e, Progress)), None)
        if progress is None:
            return events
        before, self.last = self.last, progress
        if before is None or not covered_s > 1.0:
            return events
        begin = max(before.t, progress.t - covered_s)
        fill: list[Event] = []
        if begin > before.t:
            fill.append(
                Progress(
                    begin,
                    progress.node,
                    before.samples_done,
                    before.tokens_done,
                    before.prompt_tokens_done,
                    True,
                )
            )

        def between(a: int | None, b: int | None, fraction: float) -> int | None:
            if a is None or b is None:
                return b if a is None else a
            return round(a + (b - a) * fraction)

        for k in range(1, min(MAX_FILL_POINTS, math.ceil(progress.t - begin) - 1) + 1):
            t = begin + k
            fraction = (t - begin) / (progress.t - begin)
            tokens = between(before.tokens_done, progress.tokens_done, fraction)
            prompt = between(before.prompt_tokens_done, progress.prompt_tokens_done, fraction)
            fill.append(Progress(t, progress.node, before.samples_done, tokens, prompt, True))
        return fill + events


def plain_place(events: list[Event], first: float, last: float, mtime: float) -> list[Event]:
    """Each event at ``max(latest so far, max(t, first) + anchor)``: times never go back."""
    anchor, latest, out = mtime - last, -math.inf, []
    for event in events:
        latest = max(latest, max(event.t, first) + anchor)
        out.append(retime(event, latest))
    return out


def random_records(rng: random.Random) -> list[tuple[list[Event], float]]:
    """A node's records (a count, lines and notices beside it, some groups without a count) with the
    interval each covers: fractional and whole times, idle gaps, counters unknown, restarts, big counts."""
    t, tokens, prompt = rng.choice([0.0, 3.25, 1e6 + 0.5]), 0, 0
    out: list[tuple[list[Event], float]] = []
    for k in range(rng.randint(1, 40)):
        t += rng.choice([0.5, 1.0, 2.0, 7.3, 10.0, 10.0, 30.0, 4000.0])
        tokens = 0 if rng.random() < 0.05 else tokens + rng.randint(0, 10 ** rng.randint(1, 14))
        prompt += rng.randint(0, 999)
        group: list[Event] = [LogLine(t, "n", f"line {k}")]
        if rng.random() < 0.85:
            reported = (rng.choice([None, k]), rng.choice([None, tokens, tokens]), rng.choice([None, prompt]))
            group.append(Progress(t, "n", *reported))
        if rng.random() < 0.1:
            group.append(Notice(t, "warning", f"notice {k}", "n"))
        out.append((group, rng.choice([0.0, 1.0, 1.5, 5.0, 10.0, 10.0, 12.5, 60.0, 5000.0])))
    return out


@pytest.mark.parametrize("seed", range(40))
def test_spans_are_the_points_one_by_one_placed_alike(seed: int) -> None:
    rng = random.Random(seed)
    records = random_records(rng)
    spans, points = ProgressSpreader(), PointSpreader()
    items: list[BacklogItem] = []
    plain: list[Event] = []
    for group, covered in records:
        items += spans.spread(list(group), covered)
        plain += points.spread(list(group), covered)
    assert any(isinstance(item, FilledSpan) for item in items) or not any(
        isinstance(e, Progress) and e.filled for e in plain
    )
    # a span's points are bit for bit the points one by one (repr: -0.0, huge counts and all)
    assert [repr(e) for e in expanded(items)] == [repr(e) for e in plain]
    first, last = plain[0].t + rng.choice([0.0, 2.0]), plain[-1].t
    mtime = 1_754_000_000.0 + rng.random()
    placed, _ = place(items, (first, last), mtime)
    assert [repr(e) for e in expanded(placed)] == [repr(e) for e in plain_place(plain, first, last, mtime)]
    # the arrays the merge reads are the same values
    spread = [item for item in placed if isinstance(item, FilledSpan)]
    cols = span_columns(spread)
    made = [e for e in expanded(spread) if isinstance(e, Progress)]
    assert cols.t.tolist() == [e.t for e in made]
    for values, has, field in (
        (cols.samples, cols.has_samples, "samples_done"),
        (cols.tokens, cols.has_tokens, "tokens_done"),
        (cols.prompt, cols.has_prompt, "prompt_tokens_done"),
    ):
        assert [int(v) if h else None for v, h in zip(values, has, strict=True)] == [
            getattr(e, field) for e in made
        ]


def _vllm_log(rng: random.Random, node: int, end: datetime) -> str:
    """A vLLM V1 server's log: a stats line every 10 s (none while idle), request lines between them."""
    stamps: list[datetime] = []
    t = end
    while len(stamps) < rng.randint(12, 40):
        stamps.append(t)
        t -= timedelta(seconds=rng.choice([10, 10, 10, 20, 60, 11]))
    text = []
    for stamp in reversed(stamps):
        if rng.random() < 0.3:
            text.append(f"INFO {stamp - timedelta(seconds=4):%m-%d %H:%M:%S} POST /v1/completions 200 OK\n")
        gen = rng.choice([0.0, 880.5, 1000.0 + 3.0 * node, 1234.4])
        text.append(
            f"(APIServer pid=4242) INFO {stamp:%m-%d %H:%M:%S} [loggers.py:123] Engine 000: Avg prompt "
            f"throughput: {rng.choice([0.0, 51.2])} tokens/s, Avg generation throughput: {gen:.1f} tokens/s, "
            "Running: 8 reqs, Waiting: 0 reqs, GPU KV cache usage: 20.4%, Prefix cache hit rate: 0.0%\n"
        )
    return "".join(text)


def _backfills(rng: random.Random, names: list[str]) -> tuple[list[Backfill], float]:
    """Each node's log read as a backlog and placed (its newest line written at the watch's start)."""
    end = datetime(2025, 9, 2, 13, 0, 0, tzinfo=UTC)
    watch = 1_756_818_000.0
    out = []
    for i, name in enumerate(names):
        parser = LogProgressParser.preset("vllm", name)
        data = _vllm_log(rng, i, end - timedelta(seconds=rng.choice([0, 0, 3, 20]))).encode()
        items = [item for k in range(0, len(data), 4096) for item in parser.feed_backlog(data[k : k + 4096])]
        last, clock = parser.end_backlog()
        assert clock is not None
        placed, start = place([*items, *last], clock, watch - rng.random())
        out.append(Backfill(f"log of {name}", placed=placed, start_wall=start))
    return out, watch


@pytest.mark.parametrize("seed", range(8))
def test_the_merge_of_spans_is_the_merge_of_their_points(seed: int) -> None:
    """Real vLLM lines through the log reader: merged with spans, merged with their points one by one
    (the events the merge read before), the same events out, and a real core left in the same state."""
    rng = random.Random(seed)
    names = [f"node{i}" for i in range(rng.randint(1, 6))]
    backfills, watch = _backfills(rng, names)
    assert any(isinstance(item, FilledSpan) for done in backfills for item in done.placed)
    points = [Backfill(done.source, expanded(done.placed), done.start_wall) for done in backfills]
    start = min(done.start_wall for done in backfills if done.start_wall is not None)
    clock = RunClock(start, watch - start, "log")
    for before in (None, clock.attach_s - rng.choice([0.0, 0.5, 30.0])):
        got = merged(backfills, clock, [*names, "elsewhere"][: len(names) + seed % 2], before)
        want = merged(points, clock, [*names, "elsewhere"][: len(names) + seed % 2], before)
        assert [as_tuple(e) for e in got] == [as_tuple(e) for e in want]
        same_core(core_after(want, names, clock.attach_s), core_after(got, names, clock.attach_s))
    # without the run's nodes (each point an event of its own) the same too
    plain = merged(backfills, clock)
    assert [as_tuple(e) for e in plain] == [as_tuple(e) for e in merged(points, clock)]


def test_spans_of_nodes_outside_the_run_and_past_the_attach_come_out_as_their_points() -> None:
    """A point that goes in no batch (a node the run does not name, a second point of a node in one
    second, points clamped to the attach) is the ``Progress`` it stands for."""
    span = FilledSpan("other", 10.0, 20.0, False, 9, 3, 100, 1000, None, None)
    both = FilledSpan("n", 10.5, 20.0, True, 9, None, 0, 950, 5, 50)
    items: list[BacklogItem] = [
        span,
        Progress(20.0, "other", 3, 1000),
        both,
        Progress(20.0, "n", None, 950, 50),
    ]
    clock = RunClock(0.0, 15.0, "log")
    got = merged([Backfill("log", items)], clock, ["n"], 15.0)
    want = merged([Backfill("log", expanded(items))], clock, ["n"], 15.0)
    assert [as_tuple(e) for e in got] == [as_tuple(e) for e in want]
    loose = [e for e in got if isinstance(e, Progress)]
    assert {e.node for e in loose} == {"other", "n"}
    assert np.all(np.diff([e.t for e in got]) >= 0)
