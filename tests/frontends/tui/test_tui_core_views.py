"""The figures the dashboard asks the core for, checked against independent computations."""

from __future__ import annotations

import dataclasses
import math
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from tests.frontends.tui.apps import NODE_FAILURE, OFFLINE, SERVER, SNAPSHOT_TIME_S, core_until
from tokenwatch.base import throttle
from tokenwatch.base.events import GPU_METRICS, GpuBatch
from tokenwatch.core import RackCore
from tokenwatch.core.config import GPU_SERIES_METRICS
from tokenwatch.core.fleet.rack_groups import nodes_per_rack
from tokenwatch.core.histogram import GAMMA, N_BUCKETS, bucket_upper, bucket_value
from tokenwatch.core.snapshot import DOWN_GPU, GpuTable, LatencyStats, RackSnapshot
from tokenwatch.core.views import (
    HEAT_METRICS,
    NO_NODE,
    display_histogram,
    heat_grid,
    spread_vs_median_pct,
    value_scale,
)
from tokenwatch.recording import RecordingReader


@pytest.fixture(scope="module")
def failure_core() -> RackCore:
    return core_until(NODE_FAILURE, 2100)


@pytest.fixture(scope="module")
def server_snapshot() -> RackSnapshot:
    return core_until(SERVER, 400).snapshot()


@pytest.mark.parametrize("metric", HEAT_METRICS)
def test_heat_grid_is_nodes_by_gpus(failure_core: RackCore, metric: str) -> None:
    snap = failure_core.snapshot()
    grid = heat_grid(snap, metric)
    column = GPU_METRICS.index(metric)
    assert grid.row_labels == snap.nodes.names
    assert not grid.rows_are_racks
    assert grid.col_labels == ("GPU0", "GPU1", "GPU2", "GPU3")
    state = failure_core.state
    for n in range(18):
        for g in range(4):
            # Only fresh readings are drawn: the node neither down nor stale, the sample within 5 s.
            fresh = snap.nodes.state[n] not in ("down", "stale") and snap.t - state.gpu_last_seen[n, g] <= 5.0
            expected = state.gpu_values[n, g, column] if fresh else math.nan
            assert grid.values[n, g] == expected or (math.isnan(expected) and math.isnan(grid.values[n, g]))
    finite = [v for v in grid.values.ravel() if math.isfinite(v)]
    assert grid.scale.data_low == min(finite)
    assert grid.scale.data_high == max(finite)
    # The colours stretch over the data, or over the minimum span about its middle when it is narrower.
    assert grid.low <= min(finite)
    assert grid.high >= max(finite)
    assert grid.high - grid.low == pytest.approx(max(max(finite) - min(finite), grid.scale.min_span))
    np.testing.assert_array_equal(grid.freshness, snap.gpus.freshness)


@pytest.mark.parametrize("metric", ["power_w", "temp_c"])
def test_heat_grid_aggregates_per_rack_beyond_72_nodes(failure_core: RackCore, metric: str) -> None:
    """A 5-rack run (90 nodes) made of five copies of the real 18-node table."""
    snap = failure_core.snapshot()
    values = np.concatenate([snap.gpus.values] * 5)  # 90 nodes x 4 GPUs
    names = tuple(f"node{i:02d}" for i in range(1, 91))
    big = dataclasses.replace(
        snap,
        run=dataclasses.replace(snap.run, nodes=names),
        gpus=GpuTable(values, np.zeros(values.shape[:2], np.uint64), np.zeros(values.shape[:2], np.int8)),
    )
    grid = heat_grid(big, metric)
    assert grid.rows_are_racks
    assert nodes_per_rack(big.run) == 18
    assert grid.row_labels == ("rack01", "rack02", "rack03", "rack04", "rack05")
    assert grid.values.shape == (5, 18)
    column = GPU_METRICS.index(metric)
    for r in range(5):
        for slot in range(18):
            gpus = [values[r * 18 + slot, g, column] for g in range(4)]
            gpus = [v for v in gpus if not math.isnan(v)]
            expected = (max(gpus) if metric == "temp_c" else sum(gpus) / len(gpus)) if gpus else math.nan
            got = grid.values[r, slot]
            assert got == pytest.approx(expected) or (math.isnan(expected) and math.isnan(got))


def test_nodes_per_rack_prefers_what_the_source_says(failure_core: RackCore) -> None:
    run = failure_core.snapshot().run
    assert nodes_per_rack(run) == 18
    assert nodes_per_rack(dataclasses.replace(run, meta={"nodes_per_rack": 9})) == 9
    assert nodes_per_rack(dataclasses.replace(run, gpus_per_node=8)) == 9


@pytest.mark.parametrize("bins", [1, 7, 40, 200])
def test_display_histogram_keeps_every_count(server_snapshot: RackSnapshot, bins: int) -> None:
    for stats in server_snapshot.latency.values():
        hist = display_histogram(stats, bins, include_s=(2.0,))
        assert len(hist.counts) == bins
        assert len(hist.edges_s) == bins + 1
        assert float(hist.counts.sum()) == pytest.approx(stats.count, rel=1e-9)
        assert np.all(hist.counts >= 0)
        assert hist.edges_s[0] < stats.bucket_values_s.min()
        assert hist.edges_s[-1] > 2.0
        assert np.all(
            np.diff(np.log(hist.edges_s)) == pytest.approx(np.log(hist.edges_s[1] / hist.edges_s[0]))
        )
        # Nothing lands where there is no data: display bins wholly outside the observed fine buckets
        # (each at most GAMMA wide around its value) are empty.
        lowest, highest = stats.bucket_values_s.min() / GAMMA, stats.bucket_values_s.max() * GAMMA
        outside = (hist.edges_s[1:] < lowest) | (hist.edges_s[:-1] > highest)
        assert np.all(hist.counts[outside] == 0)


def lognormal_stats(median_s: float, sigma: float, n: float) -> tuple[LatencyStats, Callable[..., Any]]:
    """A log-normal's expected count in every fine bucket (no sampling noise), and its CDF."""
    erf = np.vectorize(math.erf)

    def cdf(seconds: np.ndarray) -> np.ndarray:
        return np.asarray(0.5 * (1 + erf((np.log(seconds) - math.log(median_s)) / (sigma * math.sqrt(2)))))

    i = np.arange(N_BUCKETS)
    counts = np.rint(n * (cdf(bucket_upper(i)) - cdf(bucket_upper(i - 1)))).astype(np.int64)
    nonzero = np.flatnonzero(counts)
    stats = LatencyStats("tpot", int(counts.sum()), *(math.nan,) * 5, bucket_value(nonzero), counts[nonzero])
    return stats, cdf


@pytest.mark.parametrize(("median_s", "sigma"), [(0.03, 0.25), (0.4, 0.6), (1.2, 0.35)])
@pytest.mark.parametrize("bins", [40, 57, 80, 117, 160, 233])
def test_display_histogram_of_a_smooth_curve_has_no_comb(median_s: float, sigma: float, bins: int) -> None:
    """Fine buckets (2 % wide) do not line up with display columns: dropped whole into the column of
    their middle they gave columns of one and two buckets side by side (TPOT spiked every 2-3 columns).
    Spread by overlap, a smooth log-normal stays smooth: each column is the curve's own count in it
    (the CDF at the column's edges, computed independently) to within 1 % of the peak, and no column
    stands out from its neighbours' mean by more than the curve's own curvature does plus 2 % of the
    peak. The old rule breaks both by 20-140 % of the peak."""
    n = 1e8
    stats, cdf = lognormal_stats(median_s, sigma, n)
    hist = display_histogram(stats, bins, include_s=(0.2,))
    exact = n * np.diff(cdf(hist.edges_s))
    peak = float(exact.max())
    assert np.abs(hist.counts - exact).max() <= 0.01 * peak
    bumps = np.abs(hist.counts[1:-1] - (hist.counts[:-2] + hist.counts[2:]) / 2)
    curvature = np.abs(exact[1:-1] - (exact[:-2] + exact[2:]) / 2)
    assert np.all(bumps <= curvature + 0.02 * peak)


def test_spread_vs_median(failure_core: RackCore) -> None:
    snap = failure_core.snapshot()
    means = snap.nodes.mean_tokens_per_s
    # The median of the nodes still running or finished (a down node is not in the spread).
    running = [m for m, s in zip(means, snap.nodes.state, strict=True) if s not in ("down", "stale")]
    assert len(running) == 17
    median_value = sorted(m for m in running if math.isfinite(m) and m > 0)[8]  # 17 nodes: the 9th
    got = spread_vs_median_pct(snap)
    for i, mean in enumerate(means):
        assert got[i] == pytest.approx((mean - median_value) / median_value * 100)


def test_node_history_reads_only_its_node(failure_core: RackCore) -> None:
    """The faster column read equals the whole-ring copy it replaced."""
    times, gpu = failure_core.state.recent_gpu.view(120)
    history = failure_core.node_history("node07", last=120)
    assert history is not None
    np.testing.assert_array_equal(history.times, times)
    i = failure_core.state.index["node07"]
    for k, metric in enumerate(GPU_SERIES_METRICS):
        np.testing.assert_array_equal(history.gpu_series[metric], gpu[:, i, :, k].T)


def test_the_new_core_modules_do_not_import_textual() -> None:
    code = (
        "import sys, tokenwatch.core.views, tokenwatch.inputs.replay.player; "
        "sys.exit(1 if any(m.split('.')[0] in ('textual', 'rich') for m in sys.modules) else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


NAN = math.nan


@pytest.mark.parametrize(
    ("metric", "values", "reference", "low", "high"),
    [
        # A healthy rack near its 1,400 W limit: 22 W of noise inside a 140 W span (10 % of the limit).
        ("power_w", [1371.0, 1393.0], 1400.0, 1382 - 70, 1382 + 70),
        # A real difference (an idle GPU beside busy ones) is wider than the span: the data's own range.
        ("power_w", [180.0, 1393.0], 1400.0, 180.0, 1393.0),
        # No limit reported: 10 % of the highest value shown.
        ("power_w", [1000.0, 1010.0], NAN, 1005 - 50.5, 1005 + 50.5),
        # HBM: 5 % of the 189,471 MiB capacity.
        ("hbm_used_mib", [176_000.0, 177_000.0], 189_471.0, 176_500 - 4_736.775, 176_500 + 4_736.775),
        ("temp_c", [50.0, 53.0], NAN, 46.5, 56.5),
        # 10 % of the rack's top clock.
        ("sm_clock_mhz", [1900.0, 1950.0], 2016.0, 1925 - 100.8, 1925 + 100.8),
        # Percentages stay inside 0..100: the span is moved, not cut.
        ("util_pct", [99.0, 100.0], NAN, 90.0, 100.0),
        ("hbm_busy_pct", [0.0, 1.0], NAN, 0.0, 10.0),
        # Nothing is negative: a span about a small value starts at 0.
        ("temp_c", [2.0, 3.0], NAN, 0.0, 10.0),
    ],
)
def test_value_scale_has_a_minimum_span(
    metric: str, values: list[float], reference: float, low: float, high: float
) -> None:
    scale = value_scale(metric, np.array([*values, NAN]), reference)
    assert scale.low == pytest.approx(low)
    assert scale.high == pytest.approx(high)
    assert (scale.data_low, scale.data_high) == (min(values), max(values))
    assert scale.widened == (max(values) - min(values) < high - low - 1e-9)
    np.testing.assert_allclose(scale.fraction(np.array(values)), (np.array(values) - low) / (high - low))


def test_value_scale_of_no_value_is_nan() -> None:
    scale = value_scale("power_w", np.full((2, 3), np.nan), 1400.0)
    assert all(math.isnan(v) for v in (scale.low, scale.high, scale.data_low, scale.data_high))
    assert np.isnan(scale.fraction(np.array([1.0]))).all()


def test_healthy_rack_power_is_one_colour_band() -> None:
    """The gb300 sample at 41:07, every node healthy: its GPUs draw within a few tens of W of each other,
    well inside 10 % of the 1,400 W limit, so the colour scale is that span and the rack's GPUs use
    less than a quarter of it, one step between two of a theme's five colours (they used all of it, a
    rainbow, when the scale was the data's own range)."""
    core = core_until(OFFLINE, SNAPSHOT_TIME_S)
    snap = core.snapshot()
    power = core.state.gpu_values[:, :, GPU_METRICS.index("power_w")]
    limit = float(np.nanmax(core.state.gpu_values[:, :, GPU_METRICS.index("power_limit_w")]))
    assert limit == 1400.0
    assert float(power.max() - power.min()) < 0.1 * limit  # a healthy rack: the premise
    grid = heat_grid(snap, "power_w")
    assert grid.high - grid.low == pytest.approx(0.1 * limit)
    fractions = grid.scale.fraction(grid.values)
    assert float(np.nanmax(fractions) - np.nanmin(fractions)) == pytest.approx(
        float(power.max() - power.min()) / (0.1 * limit)
    )
    assert float(np.nanmax(fractions) - np.nanmin(fractions)) < 1 / 4


def test_rack_grid_says_why_a_node_slot_is_empty(failure_core: RackCore) -> None:
    """Multi-rack grids carry each node's freshest GPU's code; the last rack's padding has no node."""
    snap = failure_core.snapshot()
    n = 5 * 18 - 3  # 87 nodes: the fifth rack has three empty slots
    codes = np.concatenate([snap.gpus.freshness] * 5)[:n]
    values = np.concatenate([snap.gpus.values] * 5)[:n]
    big = dataclasses.replace(
        snap,
        run=dataclasses.replace(snap.run, nodes=tuple(f"node{i:02d}" for i in range(1, n + 1))),
        gpus=GpuTable(values, np.zeros(codes.shape, np.uint64), codes),
    )
    grid = heat_grid(big, "power_w")
    assert grid.rows_are_racks
    down = snap.nodes.names.index("node07")
    assert snap.nodes.state[down] == "down"
    for r in range(5):
        for slot in range(18):
            node = r * 18 + slot
            expected = NO_NODE if node >= n else int(codes[node].min())
            assert grid.freshness[r, slot] == expected
            if node < n and node % 18 == down:
                assert expected == DOWN_GPU
                assert math.isnan(grid.values[r, slot])


def test_node_history_keeps_the_clock_event_reasons() -> None:
    """node03 is throttled from 10:00 to 20:00 of the node-failure sample: its history holds each tick's
    reasons exactly as the recording's GPU batches sent them (the latest at or before the tick), and
    nothing for a GPU without a fresh reading (node07, down from 30:00)."""
    until = 31 * 60.0
    core = core_until(NODE_FAILURE, until)
    run = core.state.run
    latest: dict[tuple[int, int], tuple[float, int]] = {}  # (node, gpu) -> (t, reasons)
    ticks: list[dict[tuple[int, int], tuple[float, int]]] = []
    history = core.node_history("node03", last=1200)
    assert history is not None
    wanted = list(history.times)
    for event in RecordingReader(NODE_FAILURE).events():
        while wanted and event.t > wanted[0]:  # a tick at T holds every event with t <= T
            ticks.append(dict(latest))
            wanted.pop(0)
        if event.t > until:
            break
        if isinstance(event, GpuBatch):
            for node, gpu, mask in zip(event.node_index, event.gpu, event.throttle_reasons, strict=True):
                latest[(int(node), int(gpu))] = (event.t, int(mask))
    node03 = run.nodes.index("node03")
    for k, t in enumerate(history.times[: len(ticks)]):
        for g in range(run.gpus_per_node):
            seen, mask = ticks[k].get((node03, g), (math.nan, 0))
            fresh = t - seen <= core.config.stale_after_s
            assert int(history.throttle_reasons[g, k]) == (mask if fresh else 0)
    during = (history.times >= 10 * 60 + 5) & (history.times < 20 * 60)
    assert np.all(history.throttle_reasons[:, during] & np.uint64(throttle.HW_SLOWDOWN))
    assert not np.any(
        history.throttle_reasons[:, history.times > 20 * 60 + 5] & np.uint64(throttle.HW_SLOWDOWN)
    )
    down = core.node_history("node07", last=10)
    assert down is not None
    assert not down.throttle_reasons.any()  # down since 30:00: no reading, so no reason
    assert down.throttle_reasons.dtype == np.uint64
