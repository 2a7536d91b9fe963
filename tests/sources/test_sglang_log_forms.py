"""SGLang's decode lines in the forms real servers wrote: Aug-Oct 2024's time-only stamps
(``[04:40:55 TP0] Decode batch. ...``) and mid-2025's microsecond ``timestamp:`` field, each read from a
real log (provenance: tests/data/sources/README.md)."""

from __future__ import annotations

import itertools
import re
from datetime import UTC, datetime

from tokenwatch.base.events import Event, Notice, Progress
from tokenwatch.sources.filled_span import expanded
from tokenwatch.sources.harness_log import LogProgressParser

from .conftest import DATA, feed_in_chunks

LOGS = DATA / "logs"
TIME_ONLY = LOGS / "sglang-2024-time-only.excerpt.log"
TIMESTAMP_FIELD = LOGS / "sglang-2025-timestamp-field.excerpt.log"


def _integrated(points: list[tuple[datetime, float]]) -> float:
    """Tokens a writer's rate lines state, computed here with datetime: the first line starts the clock,
    each later one covers the time since the previous one."""
    return sum(
        rate * (stamp - before).total_seconds() for (before, _), (stamp, rate) in itertools.pairwise(points)
    )


def _tokens(events: list[Event]) -> int | None:
    progress = [e for e in events if isinstance(e, Progress)]
    assert progress
    return progress[-1].tokens_done


def test_time_only_stamps_name_one_scheduler_and_count_its_tokens() -> None:
    """The bracket's time is not the writer's name: every line was a new writer (each only starting its
    clock), so the log read 0 tokens. It is one scheduler, TP0, credited by the lines' own times."""
    raw = TIME_ONLY.read_bytes()
    points = [
        (datetime.strptime(f"2000-01-01 {stamp}", "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC), float(rate))
        for stamp, rate in re.findall(
            r"^\[(\d\d:\d\d:\d\d) TP0\] Decode batch\..*gen throughput \(token/s\): ([0-9.]+)",
            raw.decode(),
            re.M,
        )
    ]
    assert len(points) == 10
    expected = round(_integrated(points))
    assert expected > 0

    live = LogProgressParser.preset("sglang", "n")
    events = feed_in_chunks(lambda chunk: live.feed(chunk, 5.0), raw, 97) + live.close(6.0)
    assert list(live.streams) == [("TP0", "")]
    assert live.matched_lines == 10
    assert not [e for e in events if isinstance(e, Notice)]
    assert _tokens(events) == expected

    history = LogProgressParser.preset("sglang", "n")
    read = history.feed_backlog(raw)
    more, stamps = history.end_backlog()
    assert list(history.streams) == [("TP0", "")]
    assert _tokens(expanded([*read, *more])) == expected
    assert stamps is not None
    assert stamps[1] - stamps[0] == (points[-1][0] - points[0][0]).total_seconds()


def test_a_time_only_log_that_passes_midnight_goes_on_into_the_next_day() -> None:
    first, second = TIME_ONLY.read_text().splitlines()[:2]
    before_midnight = first.replace("[04:40:55 ", "[23:59:59 ")
    after_midnight = second.replace("[04:40:55 ", "[00:00:01 ")
    parser = LogProgressParser.preset("sglang", "n")
    events = parser.feed(f"{before_midnight}\n{after_midnight}\n".encode(), 1.0)
    assert not [e for e in events if isinstance(e, Notice)]  # not a clock that went back a day
    rate = float(re.findall(r"gen throughput \(token/s\): ([0-9.]+)", after_midnight)[0])
    assert _tokens(events) == round(rate * 2.0)


def test_the_microsecond_timestamp_field_times_each_decode_line() -> None:
    """The lines are 0.5 s apart: their bracket's whole seconds put two in one second and credit the next
    a whole one. The field's microseconds give each line its interval: 40 decode steps of one request
    each, the growth of the lines' own #token (whole seconds read 283 of these 320 tokens)."""
    raw = TIMESTAMP_FIELD.read_bytes()
    text = raw.decode()
    points = [
        (datetime.fromisoformat(stamp).replace(tzinfo=UTC), float(rate))
        for rate, stamp in re.findall(
            r"Decode batch\..*gen throughput \(token/s\): ([0-9.]+),.*timestamp: (\S+)$", text, re.M
        )
    ]
    assert len(points) == 9
    expected = round(_integrated(points))
    steps = 40 * (len(points) - 1)  # one request at a time, a decode line every 40 steps
    assert abs(expected - steps) / steps < 0.01

    live = LogProgressParser.preset("sglang", "n")
    events = feed_in_chunks(lambda chunk: live.feed(chunk, 5.0), raw, 113) + live.close(6.0)
    assert not [e for e in events if isinstance(e, Notice)]
    assert list(live.streams) == [("TP0", "")]
    assert _tokens(events) == expected

    history = LogProgressParser.preset("sglang", "n")
    read = history.feed_backlog(raw)
    more, _ = history.end_backlog()
    assert _tokens(expanded([*read, *more])) == expected
