"""The simulator is sane at every duration: from 10 s to 8 h a run has a warm-up, a steady
state and a drain scaled to its length, does all its samples, keeps every node's measured rate (and
the rack's) inside the profile's range and every GPU at or under its power limit.

Before, a 10-s or 30-s run made 0 tokens and exited 0, and a 1-minute run peaked at 2.17 M tokens/s:
the profile's 90-s warm-up does not fit in it. Every figure here is computed from the raw events,
without the core.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tokenwatch.base.events import (
    GPU_METRICS,
    Event,
    GpuBatch,
    NodeStatus,
    ProgressBatch,
    RunEnded,
    RunStarted,
)
from tokenwatch.inputs.sim.profile import Profile, load_profile
from tokenwatch.inputs.sim.rack_sim import RackSimulation, SimSettings

GB300 = load_profile("gb300-nvl72")
POWER = GPU_METRICS.index("power_w")
LIMIT = GPU_METRICS.index("power_limit_w")
# The simulator's ~1 % rate noise does not average out in a run of a few seconds: a node's measured
# mean may sit that far outside the range its figure was drawn in.
NOISE = 0.015
WINDOW_S = 10.0  # the headless and dashboard rate window


@dataclass(slots=True)
class RunFacts:
    start: RunStarted
    end: RunEnded
    node_rates: np.ndarray  # each node's tokens over its own first-report-to-last-growth span
    samples: int
    finished: set[str]
    power_over_limit: int  # GPU readings above their own power limit
    times: np.ndarray  # progress report times
    rack_tokens: np.ndarray  # rack cumulative tokens at those times


def run_facts(profile: Profile, scenario: str, duration_s: float, seed: int) -> RunFacts:
    sim = RackSimulation(SimSettings(profile, scenario=scenario, seed=seed, duration_s=duration_s))  # type: ignore[arg-type]
    events: list[Event] = list(sim.events())
    start, end = events[0], events[-1]
    assert isinstance(start, RunStarted)
    assert isinstance(end, RunEnded)
    n = len(start.nodes)
    tokens, samples = np.zeros(n), np.zeros(n, np.int64)
    first, grew = np.full(n, np.nan), np.full(n, np.nan)
    over, times, rack = 0, [], []
    for e in events:
        if isinstance(e, ProgressBatch):
            i = e.node_index
            first[i] = np.where(np.isnan(first[i]), e.t, first[i])
            grew[i[e.tokens_done > tokens[i]]] = e.t
            tokens[i], samples[i] = e.tokens_done, e.samples_done
            times.append(e.t)
            rack.append(tokens.sum())
        elif isinstance(e, GpuBatch):
            over += int((e.values[:, POWER] > e.values[:, LIMIT]).sum())
    finished = {e.node for e in events if isinstance(e, NodeStatus) and e.state == "finished"}
    return RunFacts(
        start,
        end,
        tokens / (grew - first),
        int(samples.sum()),
        finished,
        over,
        np.array(times),
        np.array(rack),
    )


def window_rates(facts: RunFacts, window_s: float = WINDOW_S) -> np.ndarray:
    """The rack's tokens/s over each window of ``window_s`` ending at a report (once one fits)."""
    t, tokens = facts.times, facts.rack_tokens
    back = np.searchsorted(t, t - window_s, side="right") - 1
    ok = back >= 0
    rates: np.ndarray = (tokens[ok] - tokens[back[ok]]) / (t[ok] - t[back[ok]])
    return rates


def node_range(profile: Profile) -> tuple[float, float]:
    spec = profile.node_tokens_per_s
    assert spec.min is not None
    assert spec.max is not None
    return spec.min, spec.max


durations = st.floats(min_value=math.log(10.0), max_value=math.log(8 * 3600.0)).map(math.exp)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(duration_s=durations, seed=st.integers(0, 2**16))
@example(duration_s=10.0, seed=0)
@example(duration_s=30.0, seed=0)
@example(duration_s=60.0, seed=0)
@example(duration_s=90.0, seed=0)
@example(duration_s=8 * 3600.0, seed=0)
def test_offline_runs_are_sane_at_every_duration(duration_s: float, seed: int) -> None:
    facts = run_facts(GB300, "Offline", duration_s, seed)
    lo, hi = node_range(GB300)
    n = GB300.nodes
    assert facts.end.reason == "completed"
    assert facts.finished == set(facts.start.nodes)
    assert facts.samples == facts.start.total_samples  # every sample done
    assert facts.power_over_limit == 0
    # Every node's measured rate and the rack's (their sum) inside the profile's range.
    assert (facts.node_rates >= lo * (1 - NOISE)).all(), facts.node_rates.min()
    assert (facts.node_rates <= hi * (1 + NOISE)).all(), facts.node_rates.max()
    assert n * lo * (1 - NOISE) <= facts.node_rates.sum() <= n * hi * (1 + NOISE)
    # The run takes about its duration (the slowest node's share at the bottom of the range, plus noise).
    assert duration_s * 0.9 <= facts.end.t <= duration_s * (GB300.node_tokens_per_s.mean / lo) * 1.05
    # Never a burst far above the rack's range: the steady state runs above the mean only by what the
    # warm-up and the drain take (at most 3.5 % of the run) and the noise.
    windowed = window_rates(facts, min(WINDOW_S, duration_s / 4))
    assert windowed.max() <= n * hi * 1.07
    # A warm-up at the start and a drain at the end, scaled to the run: the rack's rate over the first
    # 1 % of the run (at most the profile's first 45 s), and over its last 1 % (at most 4 s), is well
    # below its steady rate.
    steady = np.median(windowed)
    head, tail = min(duration_s * 0.01, 45.0), min(facts.end.t * 0.01, 4.0)
    tokens_at = np.interp([head, facts.end.t - tail], facts.times, facts.rack_tokens)
    assert tokens_at[0] / head < 0.75 * steady
    assert (facts.rack_tokens[-1] - tokens_at[1]) / tail < 0.75 * steady


@pytest.mark.parametrize("duration_s", [10.0, 30.0, 60.0, 90.0, 600.0])
def test_server_runs_are_sane_at_every_duration(duration_s: float) -> None:
    """Server: each node completes samples at its Poisson rate, sized to the profile's node range."""
    facts = run_facts(GB300, "Server", duration_s, seed=4)
    lo, hi = node_range(GB300)
    server = GB300.server
    per_node = server.samples_per_s_per_node * server.output_tokens_per_sample  # tokens/s, mean node
    mean = GB300.node_tokens_per_s.mean
    # Poisson arrivals x gamma(2) output lengths: relative sd sqrt(1.5 / samples); 4 sd, and the warm-up.
    expected_samples = server.samples_per_s_per_node * duration_s
    tolerance = 4 * math.sqrt(1.5 / expected_samples) + 0.05
    assert facts.end.reason == "completed"
    assert facts.finished == set(facts.start.nodes)
    assert facts.power_over_limit == 0
    assert (facts.node_rates >= per_node * lo / mean * (1 - tolerance)).all()
    assert (facts.node_rates <= per_node * hi / mean * (1 + tolerance)).all()
    assert facts.end.t == pytest.approx(duration_s, abs=1.0)


def test_a_short_run_steps_finer_and_keeps_the_profiles_shape() -> None:
    """10 s: a warm-up of half a second and a drain of 0.2 s, in steps of 1/16 s, not one 1-s tick."""
    from tokenwatch.inputs.sim.rack_sim import phase_lengths

    assert phase_lengths(GB300, 10.0) == (0.5, 0.2)
    assert phase_lengths(GB300, GB300.duration_s) == (GB300.warmup_s, GB300.tail_s)
    assert phase_lengths(GB300, 8 * 3600.0) == (GB300.warmup_s, GB300.tail_s)
    settings_10s = SimSettings(GB300, duration_s=10.0)
    assert settings_10s.step_s == 1 / 16
    assert dataclasses.replace(settings_10s, duration_s=GB300.duration_s).step_s == 1.0
