"""An honest band from the first minute: while the rack's pace still climbs the projection says "warming
up" on every surface (no number), and from then on the final figure falls inside the band stated at each
tick. A handful of seeded simulator runs, through the real core; the benchmark
(benchmarks/bench_forecast_coverage.py) measures the same over 200 runs."""

from __future__ import annotations

import re

import numpy as np
import orjson
import pytest

from tokenwatch.core import RackCore
from tokenwatch.core.snapshot_json import snapshot_json
from tokenwatch.frontends.headless.headless import human_line
from tokenwatch.frontends.metrics.exposition import render
from tokenwatch.frontends.metrics.families import MetricsView
from tokenwatch.frontends.tui.widgets.verdict_badge import badge_text
from tokenwatch.inputs.sim.faults import parse_faults
from tokenwatch.inputs.sim.profile import load_profile
from tokenwatch.inputs.sim.rack_sim import RackSimulation, SimSettings
from tokenwatch.mlperf.figures import RunSettings
from tokenwatch.mlperf.forecast import forecast
from tokenwatch.mlperf.warm_up import steady_from

from .test_forecast import offline_progress

RUN_S = 600.0  # the README's 10-minute run: its ramp lasts 30 s (the simulator's 90 s, scaled)


def core_of(scenario: str, seed: int, faults: str = "", until_s: float = np.inf) -> RackCore:
    profile = load_profile("gb300-nvl72")
    settings = SimSettings(
        profile,
        scenario=scenario,  # type: ignore[arg-type]
        seed=seed,
        duration_s=RUN_S,
        faults=parse_faults(faults, profile.node_names(), 4),
    )
    core = RackCore()
    for event in RackSimulation(settings).events():
        if event.t > until_s:
            break
        core.ingest(event)
    return core


def test_steady_from_finds_the_end_of_a_ramp() -> None:
    times = np.arange(0.0, 121.0)
    pace = np.minimum(times / 30.0, 1.0) * 1000.0  # a 30-s linear ramp to 1,000 tok/s, then flat
    tokens = np.concatenate(([0.0], np.cumsum(pace[1:])))
    # 10-s windows from 0: 30-40 s is the first at full pace, 18 % above 20-30 s; 40-50 s is the first
    # no more than 2 % above the window before, so the rack is steady from 50 s.
    assert steady_from(times[:46], tokens[:46], 0.0, 45.0, 10.0, 0.02, 600.0) is None
    assert steady_from(times, tokens, 0.0, 120.0, 10.0, 0.02, 600.0) == 50.0
    # A ramp that never flattens ends its warm-up at the cap.
    climbing = np.cumsum(times)
    assert steady_from(times, climbing, 0.0, 120.0, 10.0, 0.02, 600.0) is None
    assert steady_from(times, climbing, 0.0, 120.0, 10.0, 0.02, 100.0) == 100.0


@pytest.mark.parametrize("scenario", ["Offline", "Server"])
def test_while_warming_up_every_surface_says_so_and_states_no_number(scenario: str) -> None:
    core = core_of(scenario, seed=1, until_s=20.0)
    snap = core.snapshot()
    assert snap.verdict is not None
    fc = snap.verdict.forecast
    assert fc.warming_up
    assert fc.tokens_per_s is None
    assert fc.end_s is None
    # No VALID is projected from a ramp; a rule the settings already fail still says INVALID (a 10-minute
    # Offline run has fewer samples than LoadGen's minimum).
    failing = [r.name for r in fc.rules if r.ok is False]
    assert fc.valid is (False if failing else None)
    # Nor is a duration projected from the end that a ramp does not give (Server's is its schedule's).
    duration = fc.rule("min_duration")
    if scenario == "Offline":
        assert (duration.projected, duration.ok) == (None, None)
        assert duration.missing == "a steady pace (warming up)"
        assert duration.now is not None
        assert duration.now > 0
    else:
        assert duration.projected is not None
        assert duration.configured
    word = "INVALID" if failing else "UNDECIDED"
    # A verdict already decided (LoadGen cannot issue the samples its settings need) says so while warming up.
    stage = "DECIDED " if fc.decided else ""
    assert f"proj warming up {stage}{word}" in human_line(snap)
    record = orjson.loads(orjson.dumps(snapshot_json(snap)))
    assert record["verdict"]["warming_up"] is True
    assert record["verdict"]["projected"] is None
    assert record["verdict"]["end_s"] is None
    badge = f"{stage or 'PROJECTED '}INVALID warming up" if failing else "PROJECTED warming up"
    assert badge_text(snap) == badge
    metrics = render(MetricsView(snap)).decode()
    lines = metrics.splitlines()
    assert any(re.fullmatch(r"tokenwatch_rack_projection_warming_up(\{[^}]*\})? 1\.0", x) for x in lines)
    # Unknown, not a number: the projected figure has no sample at all.
    assert not [x for x in lines if x.startswith("tokenwatch_rack_projected_tokens_per_second")]


@pytest.mark.parametrize(
    ("scenario", "seed", "faults"),
    [
        ("Offline", 1, ""),
        ("Server", 2, ""),
        ("Offline", 3, "node05:throttle@3m-5m"),
        ("Server", 4, "node11:down@4m"),
    ],
)
def test_past_the_warm_up_every_band_holds_the_final_figure(scenario: str, seed: int, faults: str) -> None:
    core = core_of(scenario, seed, faults)
    snap = core.snapshot()
    assert snap.ended
    assert snap.verdict is not None
    history = snap.verdict.history
    final = core.summary().tokens_per_s
    stated = np.isfinite(history.value)
    # Warming up first, then a projection at every tick, from well inside the first tenth of the run.
    first = int(np.argmax(stated))
    assert first > 0
    assert stated[first:].all()
    assert history.times[first] <= 0.1 * RUN_S
    low, high = history.low[stated], history.high[stated]
    assert np.isfinite(low).all()
    assert np.isfinite(high).all()
    outside = np.flatnonzero((final < low) | (final > high))
    assert not outside.size, (
        f"final {final:,.0f} outside the band at {history.times[stated][outside].tolist()} s: "
        f"{list(zip(low[outside].tolist(), high[outside].tolist(), strict=True))}"
    )
    if not faults:  # a steady rack's band at half-way is at most 2 % wide
        k = int(np.searchsorted(history.times, 0.5 * core.now))
        assert (history.high[k] - history.low[k]) / history.value[k] <= 0.02


@pytest.mark.parametrize(("limit_s", "ok"), [(60.0, None), (1e9, False)])
def test_a_duration_read_from_a_ramp_is_no_pass_but_can_be_a_fail(limit_s: float, ok: bool | None) -> None:
    """While the pace climbs, the duration rule states no pass (the end comes sooner as the pace rises, so
    a pass read from the ramp is no projection) and the verdict stays undecided; a duration that falls
    short of its limit even at the climbing pace is INVALID already (a faster pace only ends it sooner)."""
    ramp = np.minimum(np.arange(0.0, 41.0) / 60.0, 1.0)[:, None] - 1.0  # a pace still climbing at 40 s
    progress = offline_progress(np.array([1000.0, 1100.0]), 40.0, 5_000, 100.0, ramp)
    settings = RunSettings("Offline", min_duration_s=limit_s, min_query_count=1, min_sample_count=1)
    fc = forecast(progress, settings)
    assert fc.warming_up
    duration = fc.rule("min_duration")
    assert duration.ok is ok
    assert (duration.projected is None) is (ok is None)
    assert fc.rule("min_queries").ok is True
    assert fc.valid is ok
