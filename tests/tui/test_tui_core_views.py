"""The figures the dashboard asks the core for, checked against independent computations."""

from __future__ import annotations

import dataclasses
import math
import subprocess
import sys

import numpy as np
import pytest

from tests.tui.apps import NODE_FAILURE, SERVER, core_until
from tokenwatch.core import RackCore
from tokenwatch.core.config import GPU_SERIES_METRICS
from tokenwatch.core.snapshot import GpuTable, RackSnapshot
from tokenwatch.core.views import (
    HEAT_METRICS,
    display_histogram,
    heat_grid,
    nodes_per_rack,
    spread_vs_median_pct,
)
from tokenwatch.events import GPU_METRICS


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
    assert grid.low == min(finite)
    assert grid.high == max(finite)


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
        assert int(hist.counts.sum()) == stats.count
        assert hist.edges_s[0] < stats.bucket_values_s.min()
        assert hist.edges_s[-1] > 2.0
        assert np.all(
            np.diff(np.log(hist.edges_s)) == pytest.approx(np.log(hist.edges_s[1] / hist.edges_s[0]))
        )
        # Each fine bucket's count lands in the display bin that holds its value.
        for value, count in zip(stats.bucket_values_s, stats.bucket_counts, strict=True):
            b = int(np.searchsorted(hist.edges_s, value, side="right")) - 1
            assert hist.counts[b] >= count


def test_spread_vs_median(failure_core: RackCore) -> None:
    snap = failure_core.snapshot()
    means = snap.nodes.mean_tokens_per_s
    # The median of the nodes still running or finished (a down node is not in the spread: issue 11).
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
        "import sys, tokenwatch.core.views, tokenwatch.collectors.replay; "
        "sys.exit(1 if any(m.split('.')[0] in ('textual', 'rich') for m in sys.modules) else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
