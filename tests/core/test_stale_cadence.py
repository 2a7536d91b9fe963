"""Staleness follows each node's own cadence: stale after max(stale_after, 3 x the median of its last
five gaps between events), for the node states and its GPUs' freshness alike (docs/headless.md, "stale")."""

from __future__ import annotations

import statistics
import warnings

import numpy as np
import pytest

from tokenwatch.base.events import GPU_METRICS, GpuBatch, Progress, RunStarted
from tokenwatch.core import CoreConfig, RackCore

NODES = ("slow", "fast")
STALE_AFTER_S = 5.0


def start() -> RunStarted:
    return RunStarted(0.0, "cadence", "Offline", NODES, 2, None, None, "live", 0.0)


def gpus(t: float, node: int) -> GpuBatch:
    values = np.full((2, len(GPU_METRICS)), np.nan)
    values[:, GPU_METRICS.index("power_w")] = 700.0
    return GpuBatch(t, np.array([node, node]), np.array([0, 1]), values, np.zeros(2, np.uint64))


def expected_limit(gaps: list[float]) -> float:
    """The README's rule, computed here from the gaps themselves."""
    return max(STALE_AFTER_S, 3 * statistics.median(gaps[-5:]))


def state_of(core: RackCore, node: str, t: float) -> str:
    snap = core.snapshot(t)
    return snap.nodes.state[snap.nodes.index(node)]


def test_a_node_that_writes_every_10_s_is_stale_only_after_three_of_its_intervals() -> None:
    core = RackCore(CoreConfig(stale_after_s=STALE_AFTER_S))
    core.ingest(start())
    times = [float(t) for t in range(0, 61, 10)]  # the slow node: a log line every 10 s
    for second in range(61):
        t = float(second)
        core.ingest(Progress(t, "fast", None, second * 100))  # the fast node: every second
        if t in times:
            core.ingest(Progress(t, "slow", None, second * 50))
    limit = expected_limit(np.diff(times).tolist())
    assert limit == 30.0
    assert core.state.stale_limit_s[0] == pytest.approx(limit)
    assert core.state.stale_limit_s[1] == pytest.approx(STALE_AFTER_S)  # 3 x 1 s is below stale_after
    # 9 s after its last line the slow node is up (the old single 5 s limit called it stale)
    assert state_of(core, "slow", 69.0) == "up"
    assert state_of(core, "fast", 69.0) == "stale"  # silent 9 s, past its own 5 s
    assert state_of(core, "slow", 60.0 + limit - 0.5) == "up"
    assert state_of(core, "slow", 60.0 + limit + 0.5) == "stale"


def test_one_long_silence_does_not_teach_a_node_to_be_silent() -> None:
    core = RackCore(CoreConfig(stale_after_s=STALE_AFTER_S))
    core.ingest(start())
    times = [0.0, 2.0, 4.0, 6.0, 8.0, 10.0, 310.0, 312.0]  # one 300 s silence among 2 s gaps
    for t in times:
        core.ingest(Progress(t, "slow", None, int(t) * 10))
    gaps = np.diff(times).tolist()
    assert core.state.stale_limit_s[0] == pytest.approx(expected_limit(gaps))
    assert core.state.stale_limit_s[0] == 3 * 2.0  # the 2 s cadence, not the silence
    assert state_of(core, "slow", 318.5) == "stale"


def test_gpus_stay_fresh_for_their_node_s_limit_and_the_alert_names_it() -> None:
    core = RackCore(CoreConfig(stale_after_s=STALE_AFTER_S))
    core.ingest(start())
    for t in range(0, 101, 20):  # GPU telemetry every 20 s (a slow dcgm-exporter scrape)
        core.ingest(gpus(float(t), 0))
    limit = expected_limit([20.0] * 5)
    snap = core.snapshot(100.0 + 15.0)
    assert snap.gpus.freshness[0].tolist() == [0, 0]  # 15 s old, inside 60 s: still a reading of now
    assert snap.gpus.metric("power_w")[0].tolist() == [700.0, 700.0]
    core.advance(100.0 + limit + 2.0)
    snap = core.snapshot()
    assert snap.gpus.freshness[0].tolist() == [1, 1]
    assert any(a.kind == "stale" and a.node == "slow" and f"{limit:g} s" in a.message for a in snap.alerts)


def test_the_learnt_cadence_is_numpys_nan_median_of_the_last_gaps_bit_for_bit() -> None:
    """A live watch's GPU and log lines arrive in turn, so most events move the median: it is taken
    without numpy's masked path, and must still be np.nanmedian's own number, for every count of gaps."""
    from tokenwatch.core.cadence import CADENCE_GAPS, NodeCadence

    rng = np.random.default_rng(7)
    nodes = 400
    cadence = NodeCadence.for_nodes(nodes, STALE_AFTER_S)
    gaps = rng.choice([0.3, 0.7, 1.0, 10.0], size=(nodes, CADENCE_GAPS)) + rng.exponential(
        1.0, (nodes, CADENCE_GAPS)
    )
    gaps[rng.random((nodes, CADENCE_GAPS)) < 0.3] = np.nan  # nodes with fewer gaps so far, some none
    cadence.gaps[:] = gaps
    cadence.note_rows(slice(None), 1e6, np.full(nodes, 1e6 - 1e5))  # a far gap each: every median moves
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # numpy's "All-NaN slice"
        expected = np.nanmedian(cadence.gaps, axis=1)
    assert np.isnan(expected).sum() == 0  # the new gap is in every row
    assert np.array_equal(cadence.typical_s, expected)
    assert np.array_equal(cadence.stale_limit_s, np.maximum(STALE_AFTER_S, 3 * expected))
    lone = NodeCadence.for_nodes(1, STALE_AFTER_S)
    for t, last in ((1.0, 0.0), (3.5, 1.0), (3.9, 3.5), (13.9, 3.9)):  # gaps 1.0, 2.5, 0.4, 10.0
        lone.note_one(0, t, last)
    assert lone.typical_s[0] == statistics.median([1.0, 2.5, 0.4, 10.0])
    t = 13.9
    for gap in rng.choice([0.3, 0.7, 1.0, 10.0], size=300) + rng.exponential(0.5, 300):
        before = float(lone.typical_s[0])
        lone.note_one(0, t + gap, t)
        t += gap
        if abs(gap - before) > 0.1 * before:  # a gap that may move the median: it is numpy's, exactly
            assert lone.typical_s[0] == np.median(lone.gaps[0])
            assert lone.stale_limit_s[0] == np.maximum(STALE_AFTER_S, 3 * np.median(lone.gaps[0]))
