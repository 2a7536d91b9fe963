"""The base a node's windowed rate starts from, where the window's first tick holds none of it
(``core/_window_bases.py``): searched first in the newest ticks, then only as far back as a reading can
still count, it is the base a plain search of every tick for every node finds, node by node, as the
rule says (after a gap: the first reading after it; else the newest reading older than the node's
newest, unless more than its staleness limit older)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tokenwatch.base.events import ProgressBatch, RunStarted
from tokenwatch.core import CoreConfig, RackCore
from tokenwatch.core._state import RackState
from tokenwatch.core._window_bases import NEWEST_TICKS, bases_elsewhere

NODES = 60


def fed_core(seed: int, run_s: int) -> RackCore:
    """Nodes read at cadences from every tick to every 80 s (past the newest ticks searched first),
    some silent for a while (gaps), some first read late: every way a base can lie."""
    rng = np.random.default_rng(seed)
    core = RackCore(CoreConfig(window_s=10.0))
    names = tuple(f"node{k:02d}" for k in range(NODES))
    core.ingest(RunStarted(0.0, "bases", "Offline", names, 1, None, None, "live", 0.0))
    every = rng.choice([1, 2, 5, 30, 45, 80], NODES)
    first = rng.choice([0, 0, 0, 40, 150], NODES)
    silent_from = rng.uniform(0, run_s, NODES)
    silent_for = rng.choice([0.0, 0.0, 120.0, 300.0], NODES)
    rate = rng.uniform(500.0, 1500.0, NODES)
    for t in range(1, run_s + 1):
        silent = (t >= silent_from) & (t < silent_from + silent_for)
        due = (t % every == 0) & (t >= first) & ~silent
        idx = np.flatnonzero(due).astype(np.int64)
        if len(idx):
            tokens = (rate[idx] * t).astype(np.int64)
            core.ingest(ProgressBatch(float(t), idx, tokens // 100, tokens))
    return core


def plain_search(state: RackState, nodes: np.ndarray, gap: np.ndarray, after: np.ndarray) -> np.ndarray:
    """(tokens, samples, reading time) per node of ``nodes``: every tick the rings hold, one node at a
    time, as the rule says."""
    ring = state.recent_tokens
    order = ring.ordered_slots()
    out = np.full((3, len(nodes)), np.nan)
    for j, node in enumerate(nodes.tolist()):
        newest, limit = state.t_read[node], state.stale_limit_s[node]
        reads = state.recent_read_t.values[order, node]
        if gap[node]:
            ticks = [k for k, r in enumerate(reads) if after[node] < r < newest]
            pick = ticks[0] if ticks else None
        else:
            ticks = [k for k, r in enumerate(reads) if r < newest]
            pick = ticks[-1] if ticks and not newest - reads[ticks[-1]] > limit else None
        if pick is not None:
            slot = order[pick]
            out[:, j] = ring.values[slot, node], state.recent_samples.values[slot, node], reads[pick]
    return out


@pytest.mark.parametrize(("seed", "run_s"), [(0, 200), (1, 400), (2, 700), (3, 90)])
def test_the_bases_are_those_a_search_of_every_tick_finds(seed: int, run_s: int) -> None:
    state = fed_core(seed, run_s).state
    rng = np.random.default_rng(seed + 100)
    nodes = np.flatnonzero(~np.isnan(state.t_first))
    assert len(nodes) > NODES // 2
    found_some = missing_some = 0
    for trial in range(12):
        # no gap; gaps after a reading; gaps before any reading (-inf) too
        gap = rng.random(NODES) < (0.0 if trial % 3 == 0 else 0.3)
        none_before = rng.random(NODES) < (0.2 if trial % 3 == 2 else 0.0)
        after = np.where(none_before, -np.inf, state.now - rng.uniform(0, 200, NODES))
        bases = (np.zeros(NODES), np.zeros(NODES), np.zeros(NODES))
        bases_elsewhere(state, nodes, gap, after, bases)
        expected = plain_search(state, nodes, gap, after)
        found = ~np.isnan(expected[2])
        np.testing.assert_array_equal(bases[2][nodes], expected[2])  # NaN where none is left
        for got, want in zip(bases[:2], expected[:2], strict=True):  # the counters there, where one is
            np.testing.assert_array_equal(got[nodes][found], want[found])
        found_some += int(found.sum())
        missing_some += int((~found).sum())
    assert found_some, "bases found are checked"
    assert missing_some, "nodes with none left are checked"


def test_a_base_older_than_the_newest_ticks_is_found() -> None:
    """A node read every 80 s has the reading before its newest ~80 ticks back: past the newest ticks
    searched first, so it is found by the search further back."""
    state = fed_core(5, 300).state
    every_80 = [n for n in range(NODES) if state.cadence.stale_limit_s[n] >= 3 * 80]
    assert every_80, "the cadences include 80 s"
    nodes = np.array(every_80, np.int64)
    gap = np.zeros(NODES, bool)
    bases = (np.zeros(NODES), np.zeros(NODES), np.zeros(NODES))
    bases_elsewhere(state, nodes, gap, np.full(NODES, -np.inf), bases)
    expected = plain_search(state, nodes, gap, np.full(NODES, -np.inf))
    np.testing.assert_array_equal(bases[2][nodes], expected[2])
    ages = state.now - bases[2][nodes]
    assert (ages[np.isfinite(ages)] > NEWEST_TICKS).any()
    assert not math.isnan(float(np.nanmax(bases[2][nodes])))
