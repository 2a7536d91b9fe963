"""The snapshot's per-node columns made in one numpy pass (core/_node_columns.py) against the plain
per-node forms they replace, to the bit: the sparklines at every place of the ring's lap (read in place,
and across the ring's end), the GPU sums and means with NaN, -0.0 and all-NaN nodes, the state and energy
labels, and the rack figure's sum of an array against the list form."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from tokenwatch.base.events import GPU_METRICS, NODE_STATES
from tokenwatch.core._node_columns import energy_source_names, gpu_sums, power_sums, sparklines, state_names
from tokenwatch.core._ring import RecentRing
from tokenwatch.core.config import STATE_CODE
from tokenwatch.core.final_figure import rack_sum

NODES = 7


def bits_equal(a: np.ndarray, b: np.ndarray) -> bool:
    return (
        a.shape == b.shape
        and np.array_equal(a, b, equal_nan=True)
        and bool(np.array_equal(np.signbit(a), np.signbit(b)))
    )


class Rings:
    """The two rings the sparklines read (what RackState carries), and the run's node names."""

    def __init__(self, capacity: int) -> None:
        self.recent_tokens = RecentRing(capacity, (NODES,))
        self.recent_state = RecentRing(capacity, (NODES,))
        self.run = type("Run", (), {"nodes": tuple(f"n{i}" for i in range(NODES))})()


def plain_sparklines(rings: Rings, points: int) -> np.ndarray:
    """The form before: copies of the newest points, differences over the times, silent ticks NaN."""
    times, cum = rings.recent_tokens.view(points + 1)
    if len(times) < 2:
        return np.zeros((NODES, 0))
    _, codes = rings.recent_state.view(points + 1)
    rates = np.diff(cum, axis=0) / np.diff(times)[:, None]
    silent = (codes[1:] == STATE_CODE["stale"]) | (codes[1:] == STATE_CODE["down"])
    return np.where(silent, np.nan, rates).T


@pytest.mark.parametrize("points", [1, 5, 9])
def test_sparklines_at_every_place_of_the_lap(points: int) -> None:
    rng = np.random.default_rng(points)
    rings = Rings(capacity=10)
    tokens = np.zeros(NODES)
    t = 0.0
    for _ in range(35):  # three and a half laps: the newest points in one run and across the end
        t += float(rng.uniform(0.5, 1.5))
        tokens += rng.integers(0, 5000, NODES)
        rings.recent_tokens.push(t, tokens)
        rings.recent_state.push(t, rng.choice(len(NODE_STATES), NODES).astype(np.float64))
        got = sparklines(rings, points)  # type: ignore[arg-type]
        assert bits_equal(got, plain_sparklines(rings, points)), f"at {t:g} s"


def test_gpu_sums_are_numpys_nan_sums_and_mean() -> None:
    rng = np.random.default_rng(3)
    gpu = rng.normal(300.0, 200.0, (50, 4, len(GPU_METRICS)))
    gpu[rng.random(gpu.shape) < 0.35] = np.nan
    gpu[0] = np.nan  # a node with no GPU reading
    gpu[1, :, :] = -0.0
    gpu[2, 1:, :] = np.nan  # one GPU of four
    got = gpu_sums(gpu)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for column, name in enumerate(("power_w", "power_limit_w", "sm_clock_mhz", "hbm_used_mib")):
            want = np.nansum(gpu[:, :, GPU_METRICS.index(name)], axis=1)
            assert bits_equal(got.sums[:, column], want), name
        sm_mean = np.nanmean(gpu[:, :, GPU_METRICS.index("sm_clock_mhz")], axis=1)
    assert bits_equal(got.sm_mean, sm_mean)
    # the power and its limit alone (what a snapshot sums at once): the same bits
    assert bits_equal(power_sums(gpu), got.sums[:, :2])


def test_labels_by_code() -> None:
    codes = np.array([4, 0, 1, 2, 3, 0], np.int8)
    assert state_names(codes) == tuple(NODE_STATES[c] for c in codes)
    has = np.array([True, True, False, False])
    counter = np.array([True, False, True, False])
    want = tuple(("counter" if c else "power") if h else "" for c, h in zip(counter, has, strict=True))
    assert energy_source_names(has, counter) == want == ("counter", "power", "", "")


def test_the_rack_sum_of_an_array_is_the_list_forms() -> None:
    rng = np.random.default_rng(9)
    figures = rng.normal(50_000.0, 20_000.0, 1000) * 10.0 ** rng.integers(-3, 4, 1000)
    figures[rng.random(1000) < 0.1] = np.nan
    figures[:3] = (np.inf, -5.0, 0.0)
    want = rack_sum(figures.tolist())
    got = rack_sum(figures)
    assert got == want
    assert math.copysign(1.0, got) == math.copysign(1.0, want)
    assert got == float(sum(x for x in figures.tolist() if math.isfinite(x) and x > 0))
