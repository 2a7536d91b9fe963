"""A rate is formed only over the time its readings cover.

A fleet watched through its Prometheus reads a rack's nodes every interval while the rack is open and
every node once per alerting pass (30 s): with a 10-s window, the rate of a node read every 30 s was 30 s
of growth divided by 10 (or 0), and a node first read mid-run carried counters from the run's start into
its first window: the drill-down read 3,130,408 tok/s where the board's 952,086 was right. Each figure
here is checked against the rate the events were made with.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from tokenwatch.base.events import Progress, RunStarted
from tokenwatch.core import CoreConfig, RackCore

RATE = 1000.0  # tokens/s of every node below


def run(nodes: tuple[str, ...] = ("steady", "sparse")) -> RackCore:
    core = RackCore(CoreConfig(window_s=10.0))
    core.ingest(RunStarted(0.0, "rates", "Offline", nodes, 4, 600.0, None, "live", 0.0))
    return core


def reading(t: float, node: str, since_s: float = 0.0) -> Progress:
    """The node's counters at ``t``, counting at RATE since run time ``since_s``."""
    tokens = round(RATE * (t - since_s))
    return Progress(t, node, tokens // 100, tokens)


def test_a_node_read_every_30_s_is_measured_over_its_readings() -> None:
    core = run()
    checked = 0
    for k in range(1, 181):
        t = float(k)
        core.ingest(reading(t, "steady"))
        if k % 30 == 0:
            core.ingest(reading(t, "sparse"))
        if k >= 61:  # two readings of the sparse node bound a span
            rates = core.snapshot(t).nodes.tokens_per_s
            assert rates[0] == pytest.approx(RATE, rel=1e-9), t
            assert rates[1] == pytest.approx(RATE, rel=1e-9), t
            checked += 1
    assert checked == 120


def test_a_node_first_read_mid_run_is_measured_from_that_reading() -> None:
    """Its first counters (100,000 tokens: work since the run's start) are no growth within the window."""
    core = run()
    for k in range(1, 131):
        t = float(k)
        core.ingest(reading(t, "steady"))
        if t >= 100 and k % 2 == 0:
            core.ingest(reading(t, "sparse"))
        snap = core.snapshot(t)
        if 100 <= t < 102:
            assert math.isnan(snap.nodes.tokens_per_s[1]), t  # one reading: no rate yet
        elif t >= 102:
            assert snap.nodes.tokens_per_s[1] == pytest.approx(RATE, rel=1e-9), t
    # The run's mean of the node is its growth since it was first read, over the time since.
    assert core.snapshot(130.0).nodes.mean_tokens_per_s[1] == pytest.approx(RATE, rel=1e-9)
    assert np.isfinite(core.snapshot(130.0).aggregate.tokens_per_s)


def test_a_gap_in_the_history_is_never_spanned_by_a_rate() -> None:
    """No readings from 100 s to 220 s (a hole in the server's history): after it, the rate is formed
    over the readings after it, never 120 s of growth over the window (or over the hole)."""
    core = run(("steady",))
    for k in [*range(1, 101), *range(220, 241)]:
        t = float(k)
        core.ingest(reading(t, "steady"))
        rate = core.snapshot(t).nodes.tokens_per_s[0]
        if k in (1, 220):
            assert math.isnan(rate)  # one reading (since the gap): no span yet
        else:
            assert rate == pytest.approx(RATE, rel=1e-9), t
