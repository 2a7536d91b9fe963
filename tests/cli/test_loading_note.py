"""A slow start says what it is loading, with progress: ``loading baseline a.jsonl.zst:  43 %`` on the
terminal (stderr) while the dashboard is not up yet, and nothing for a load over within 0.5 s."""

from __future__ import annotations

import io

from tests.conftest import SAMPLE_RUNS
from tokenwatch.cli.loading_note import LoadingNote
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
