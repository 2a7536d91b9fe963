"""A slow start says what it is loading, with progress: ``loading baseline a.jsonl.zst:  43 %`` on the
terminal (stderr) while the dashboard is not up yet, and nothing for a load over within 0.5 s; a headless
session's loads (a watch's backlogs, a replay's --start) the same way."""

from __future__ import annotations

import asyncio
import contextlib
import io

from tests.conftest import SAMPLE_RUNS, wait_until_async
from tokenwatch.base.loading import QUIET_S, Loading
from tokenwatch.cli.loading_note import LoadingNote, say_loads
from tokenwatch.core.baseline import RunIdentity
from tokenwatch.runs.baseline import load_baseline

FAULT_RUN = SAMPLE_RUNS / "gb300-nvl72-node-failure.jsonl.zst"


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def screen_lines(written: str) -> list[str]:
    """What a terminal shows: each ``\\r\\x1b[K`` rewrites the line it is on."""
    return [line.rsplit("\r\x1b[K", 1)[-1] for line in written.split("\n")]


def test_a_load_of_a_fault_run_shows_its_progress_then_done() -> None:
    clock, out = Clock(), Terminal()
    note = LoadingNote(f"loading baseline {FAULT_RUN.name}", out=out, clock=clock)
    shares: list[float] = []

    def progress(share: float) -> None:
        shares.append(share)
        clock.now += 0.3  # each report comes 0.3 s after the last
        note(share)

    baseline, warnings = load_baseline(str(FAULT_RUN), RunIdentity(scenario="Offline"), progress)
    note.done()
    assert warnings == []
    assert baseline.source == "recording"
    assert len(shares) > 10
    assert shares == sorted(shares)
    assert 0.9 < shares[-1] <= 0.99  # the run's time over its nominal 80:00 (it ran 84:35)
    drawn = [part.rsplit("\r\x1b[K", 1)[-1] for part in out.getvalue().split("\r\x1b[K")[1:]]
    assert drawn[0].startswith(f"loading baseline {FAULT_RUN.name}: ")
    percents = [int(d.split(": ")[1].rstrip(" %\n")) for d in drawn[:-1]]
    assert percents == sorted(percents)
    assert percents[-1] >= 90
    took = clock.now - 100.0
    assert screen_lines(out.getvalue())[-2] == f"loading baseline {FAULT_RUN.name}: done in {took:.1f} s"


def test_a_quick_load_says_nothing_and_a_file_gets_no_progress() -> None:
    clock, out = Clock(), Terminal()
    quick = LoadingNote("loading baseline quick", out=out, clock=clock)
    clock.now += 0.4
    quick(0.5)
    quick.done()
    assert out.getvalue() == ""
    log = io.StringIO()  # not a terminal: logs and scripts get no progress noise
    slow = LoadingNote("loading baseline slow", out=log, clock=clock)
    clock.now += 5
    slow(0.5)
    slow.done()
    assert log.getvalue() == ""


async def test_a_sessions_load_is_drawn_as_it_goes_and_closed_with_its_time() -> None:
    """The headless outlet (``say_loads``): the load a session names, drawn on the terminal as its share
    grows, closed with its time once it is over; the same object the dashboard's header reads."""
    clock, out = Clock(), Terminal()
    loading = Loading("reading the backlog of 2 nodes", clock)
    sayer = asyncio.create_task(say_loads(lambda: loading if loading.finished_at is None else None, out))
    try:
        clock.now += QUIET_S + 0.1  # past the quiet half second
        loading(0.5)
        await wait_until_async(
            lambda: screen_lines(out.getvalue())[-1] == "reading the backlog of 2 nodes:  50 %",
            "the half-way line",
        )
        clock.now += 0.3
        loading(1.0)
        loading.finish()
        await wait_until_async(lambda: out.getvalue().endswith("\n"), "the closing line")
    finally:
        sayer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sayer
    took = QUIET_S + 0.1 + 0.3
    assert screen_lines(out.getvalue())[-2] == f"reading the backlog of 2 nodes: done in {took:.1f} s"
