"""The band holds LoadGen's figure on a real engine whose pace follows the machine's load.

Nine recordings of ``tokenwatch watch`` following a real LoadGen run on the real vLLM CPU engine (the
engine tests' own runs, tests/data/engine/README.md), replayed through the core with a snapshot a second as
the watch's ``--jsonl`` took them. The engine's 10-s rates wandered (255 to 1,393 tok/s within one 62-s
Offline run; 248 to 1,073 in a 184-s one, whose noise a few blocks once read at a third of its size), its
``/metrics`` went unanswered for up to 11.7 s while it worked on, and two watches started 19 and 32 s
before LoadGen, reading the idle engine from 0 tokens: every band stated in the second half of LoadGen's
run must hold the figure LoadGen finally wrote (a band may be unknown, wider than its figure, never
wrong), and some band must be stated there. The figure is LoadGen's own, read from the recording's
detail-log records, not from the core.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from tokenwatch.base.events import LoadGenDetail, RunStarted
from tokenwatch.core import RackCore
from tokenwatch.recording import read_events

RUNS = Path(__file__).resolve().parent.parent / "data" / "engine" / "watched-runs"
RECORDINGS = sorted(RUNS.glob("*.jsonl.zst"))


def loadgen_span_and_figure(events: Sequence[object]) -> tuple[float, float, float]:
    """(LoadGen's start, its result, its tokens/s: Offline's result, Server's completed tokens): when the
    query plan and the result arrived on the watch's clock, and the figure LoadGen wrote."""
    scenario = next(e.scenario for e in events if isinstance(e, RunStarted))
    details = [e for e in events if isinstance(e, LoadGenDetail)]
    start = next(d.t for d in details if "generated_query_count" in d.values)
    result = next(d for d in details if "result_validity" in d.values)
    key = "result_tokens_per_second" if scenario == "Offline" else "result_completed_tokens_per_second"
    return start, result.t, float(result.values[key])


def test_the_recordings_are_there() -> None:
    assert [p.name.split(".")[0] for p in RECORDINGS] == [
        "offline-1033",
        "offline-357",
        "offline-399-late-start",
        "offline-565",
        "offline-620",
        "offline-750",
        "offline-760",
        "server-198",
        "server-52-late-start",
    ]


@pytest.mark.parametrize("recording", RECORDINGS, ids=lambda p: p.name.split(".")[0])
def test_every_band_stated_in_the_second_half_holds_loadgens_figure(recording: Path) -> None:
    events, warnings = read_events(recording)
    assert warnings == []
    start, result, figure = loadgen_span_and_figure(events)
    half = start + (result - start) / 2
    core = RackCore()
    bands: list[tuple[float, float | None, float | None]] = []

    def look(t: float) -> None:
        if half <= t <= result:
            verdict = core.snapshot(t).verdict
            band = None if verdict is None else verdict.forecast.tokens_per_s
            if band is not None and band.known:
                bands.append((t, band.low, band.high))
            else:  # warming up, or wider than its figure: no band stated
                bands.append((t, None, None))

    core.every(1.0, look)
    for event in events:
        core.ingest(event)
    assert len(bands) >= 10, "a snapshot a second over the second half"
    stated = [(t, low, high) for t, low, high in bands if low is not None and high is not None]
    assert stated, "no band stated in the second half"
    wrong = [(t, low, high) for t, low, high in stated if not low <= figure <= high]
    assert wrong == [], f"LoadGen's {figure}: {wrong}"
