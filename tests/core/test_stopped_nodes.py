"""Down and stale nodes at the core: no live-looking values, no distortion of the
rack figures, listed apart with their last figures; and once the run has ended, run figures.

A small rack of four nodes, two GPUs each, is fed by hand: every node makes 1000 tokens/s (node04 500)
and reports every second; its GPUs draw 700 W. Expected figures are computed here from those inputs.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from tokenwatch.base.events import GPU_METRICS, GpuBatch, NodeStatus, ProgressBatch, RunEnded, RunStarted
from tokenwatch.core import CoreConfig, RackCore

NODES = ("node01", "node02", "node03", "node04")
GPUS = 2
RATES = np.array([1000.0, 1000.0, 1000.0, 500.0])
WATTS = 700.0
POWER = GPU_METRICS.index("power_w")
SM = GPU_METRICS.index("sm_clock_mhz")


def gpus(t: float, nodes: list[int]) -> GpuBatch:
    values = np.full((len(nodes) * GPUS, len(GPU_METRICS)), np.nan)
    values[:, POWER] = WATTS
    values[:, SM] = 1900.0
    return GpuBatch(
        t,
        np.repeat(np.array(nodes), GPUS),
        np.tile(np.arange(GPUS), len(nodes)),
        values,
        np.zeros(len(nodes) * GPUS, np.uint64),
    )


def feed(core: RackCore, t0: int, t1: int, nodes: list[int]) -> None:
    """Seconds t0..t1-1: ``nodes`` report progress and telemetry; the others say nothing."""
    for t in range(t0, t1):
        index = np.array(nodes)
        tokens = (RATES[index] * t).astype(np.int64)
        core.ingest(ProgressBatch(float(t), index, tokens // 100, tokens))
        core.ingest(gpus(float(t), nodes))


def start(total: int | None = None) -> RackCore:
    core = RackCore(CoreConfig(window_s=10.0, stale_after_s=5.0))
    core.ingest(RunStarted(0.0, "edges", "Offline", NODES, GPUS, 600.0, total, "sim", 0.0))
    return core


@pytest.fixture
def one_down_one_stale() -> RackCore:
    """node02 down at 60 s; node03 silent from 90 s on; all four report until then; now = 120 s."""
    core = start()
    feed(core, 0, 60, [0, 1, 2, 3])
    core.ingest(NodeStatus(60.0, "node02", "down", "connection refused"))
    feed(core, 60, 90, [0, 2, 3])
    feed(core, 90, 121, [0, 3])
    return core


def test_a_down_or_stale_node_shows_no_live_values(one_down_one_stale: RackCore) -> None:
    snap = one_down_one_stale.snapshot()
    nodes = snap.nodes
    assert list(nodes.state) == ["up", "down", "stale", "up"]
    for i in (1, 2):
        for figure in (
            nodes.tokens_per_s,
            nodes.power_w,
            nodes.sm_clock_mhz,
            nodes.hbm_used_mib,
            nodes.temp_c,
        ):
            assert math.isnan(figure[i])
    assert nodes.tokens_per_s[[0, 3]] == pytest.approx([1000.0, 500.0])
    # "GPUs reporting" and the rack's power count the fresh GPUs only.
    assert snap.aggregate.gpus_reporting == 2 * GPUS
    assert snap.aggregate.power_w == pytest.approx(2 * GPUS * WATTS)
    assert snap.aggregate.tokens_per_s == pytest.approx(1500.0)
    assert snap.aggregate.nodes_up == 2


def test_a_stopped_node_got_as_far_as_its_last_report_by_the_clock(one_down_one_stale: RackCore) -> None:
    """A run without a sample count (a Server run) measures progress by its nominal duration (600 s): a
    node that stopped reporting is not carried along with the clock (it showed 88 % of a run it left
    at 20 %)."""
    snap = one_down_one_stale.snapshot()
    # node02 last sent data at 59 s (then its down status), node03 at 89 s; the running ones are at now.
    assert snap.nodes.progress_pct == pytest.approx([120 / 6, 59 / 6, 89 / 6, 120 / 6])


def test_stopped_nodes_do_not_distort_the_spread_and_are_listed_apart(one_down_one_stale: RackCore) -> None:
    snap = one_down_one_stale.snapshot()
    # node01 1000 tok/s and node04 500 over their own spans: the spread of the running nodes only.
    means = snap.nodes.mean_tokens_per_s
    assert snap.node_spread.nodes == 2
    assert snap.node_spread.max == pytest.approx(means[0])
    assert snap.node_spread.min == pytest.approx(means[3])
    assert snap.node_spread.spread_pct == pytest.approx((means[0] - means[3]) / means[3] * 100)
    stopped = {s.name: s for s in snap.stopped_nodes}
    assert list(stopped) == ["node02", "node03"]
    down, stale = stopped["node02"], stopped["node03"]
    assert (down.state, down.since_s, down.reason) == ("down", 60.0, "connection refused")
    assert (stale.state, stale.since_s, stale.reason) == ("stale", 89.0, "no data for 5 s")
    # Their last figures: tokens over their own span until they stopped (59,000 in 59 s, 89,000 in 89 s).
    assert down.mean_tokens_per_s == pytest.approx(59_000 / 59)
    assert stale.mean_tokens_per_s == pytest.approx(89_000 / 89)


def test_the_node_history_ends_where_the_data_ended(one_down_one_stale: RackCore) -> None:
    history = one_down_one_stale.node_history("node02")
    assert history is not None
    power = history.gpu_series["power_w"]  # (gpus, points)
    times = history.times
    assert (power[:, times < 60] == WATTS).all()
    assert np.isnan(power[:, times >= 66]).all()  # silent beyond the staleness limit: no flat line
    rate_times = times[1:]
    assert np.isnan(history.tokens_per_s[rate_times > 60]).all()
    assert history.tokens_per_s[rate_times <= 59] == pytest.approx(1000.0)
    # The sparkline in the node table ends there too.
    spark = one_down_one_stale.snapshot().nodes.sparkline_tokens_per_s
    assert np.isnan(spark[1, -20:]).all()
    assert np.isfinite(spark[0]).all()


def test_once_ended_the_headline_figures_are_run_figures() -> None:
    """node04 never works; the run ends while node01-03 drain: the headline is the run's, not the drain's."""
    core = start(total=None)
    feed(core, 0, 100, [0, 1, 2])
    for t in range(100, 111):  # the drain: only node01 still working, slowly
        core.ingest(
            ProgressBatch(float(t), np.array([0]), np.array([1000]), np.array([100_000 + 10 * (t - 99)]))
        )
        core.ingest(gpus(float(t), [0, 1, 2]))
    for name in ("node01", "node02", "node03"):
        core.ingest(NodeStatus(110.0, name, "finished", "done"))
    core.ingest(RunEnded(110.0, "completed"))
    snap = core.snapshot()
    figures = snap.run_figures
    assert figures is not None
    means = [100_110 / 110, 99_000 / 99, 99_000 / 99]  # each node's tokens over its own span
    assert figures.tokens_per_s == pytest.approx(sum(means))
    assert figures.gpus == 3 * GPUS  # node04 did no work: it took no part
    assert figures.per_gpu_tokens_per_s == pytest.approx(sum(means) / (3 * GPUS))
    # Mean power over the run: 3 nodes x 2 GPUs x 700 W on every tick they reported fresh.
    assert figures.power_mean_w == pytest.approx(3 * GPUS * WATTS, rel=0.02)
    assert figures.tokens_per_joule == pytest.approx(
        (100_110 + 2 * 99_000) / (figures.power_mean_w * 110.0), rel=1e-6
    )
    assert snap.aggregate.tokens_per_s < 50  # the last window: the drain
    assert snap.banner == "ended: 3 of 4 nodes finished, node04 stale"  # never reported: no "since"
    assert snap.summary is not None
    assert snap.summary.per_gpu_tokens_per_s == figures.per_gpu_tokens_per_s


def test_an_interrupted_run_reads_as_one() -> None:
    core = start(total=1000 * 4)
    feed(core, 0, 31, [0, 1, 2, 3])
    core.ingest(RunEnded(30.0, "interrupted"))
    snap = core.snapshot()
    done = int((RATES * 30).sum()) // 100
    assert snap.banner == f"INTERRUPTED at 00:30 ({done / 4000 * 100:.1f} % of samples)"
    assert snap.run_figures is not None
    assert snap.run_figures.complete is False
    summary = core.summary()
    assert (summary.complete, summary.end_reason, summary.status) == (False, "interrupted", snap.banner)
