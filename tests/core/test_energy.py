"""Energy per node from the GPUs' counters (baseline, restarts) or integrated power, and which one each
figure is: table-driven over counter sequences whose energy is worked out by hand in each row."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tokenwatch.base.events import (
    GPU_METRICS,
    Event,
    GpuBatch,
    NodeStatus,
    Progress,
    ProgressBatch,
    RunEnded,
    RunStarted,
)
from tokenwatch.core import RackCore
from tokenwatch.core.energy import EnergyCounters, energy_source, node_energy
from tokenwatch.core.summary import rack_table_rows

_POWER, _ENERGY = GPU_METRICS.index("power_w"), GPU_METRICS.index("energy_j")


@pytest.mark.parametrize(
    ("readings", "energy"),
    [
        ([100.0, 150.0, 200.0], 100.0),  # the first reading is a baseline
        ([100.0, 150.0, 200.0, 20.0, 70.0], 170.0),  # restarted at 20 (counts from zero): 100 + 20 + 50
        ([100.0, math.nan, 200.0], 100.0),  # a reading missing this time changes nothing
        ([5e9, 5e9 + 0.001], 0.001),  # a counter far from zero (5 GJ) keeps its millijoules
        ([math.nan, math.nan], math.nan),  # no counter at all
    ],
)
def test_one_counter(readings: list[float], energy: float) -> None:
    counters = EnergyCounters.for_rack(1, 1)
    for value in readings:
        counters.note((slice(None), slice(None)), np.array([[value]]), 0.0, np.zeros(1, np.int64))
    counted = counters.counted_j()[0, 0]
    assert counted == pytest.approx(energy, abs=1e-5, nan_ok=True)  # float64 at 5e9 J: ~1e-6 J steps


def test_node_sources() -> None:
    """node0: every GPU has a counter -> counter; node1: one GPU lacks it -> integrated power; node2:
    never reported -> no energy; node3: one GPU never reported, the other has a counter -> counter."""
    counters = EnergyCounters.for_rack(4, 2)
    counters.node_integrated_j[:] = [11.0, 22.0, 0.0, 44.0]
    for step in (0.0, 10.0):
        counters.note(
            (slice(None), slice(None)),
            np.array([[step, 2 * step], [step, np.nan], [np.nan] * 2, [step, np.nan]]),
            step,
            np.zeros(4, np.int64),
        )
    seen = np.array([[True, True], [True, True], [False, False], [True, False]])
    energy, from_counter = node_energy(counters, seen)
    assert from_counter.tolist() == [True, False, False, True]
    assert energy[[0, 1, 3]].tolist() == [30.0, 22.0, 10.0]
    assert math.isnan(energy[2])
    assert energy_source(from_counter, energy > 0) == "mixed"
    assert energy_source(from_counter[[0, 3]], np.array([True, True])) == "counter"
    assert energy_source(from_counter[[1]], np.array([True])) == "power"
    assert energy_source(from_counter, np.zeros(4, bool)) == ""


def test_snapshot_and_summary_per_node() -> None:
    """Two nodes through the core: node00's GPUs carry counters (1 kW each, counted exactly), node01's do
    not (integrated power, 500 W each). tokens/J per node is its tokens over its energy."""
    core = RackCore()
    core.ingest(RunStarted(0.0, "e", "Offline", ("node00", "node01"), 2, None, None, "sim", 0.0))
    for name in ("node00", "node01"):
        core.ingest(NodeStatus(0.0, name, "up"))
    node_index, gpu = np.repeat([0, 1], 2), np.tile([0, 1], 2)
    for k in range(101):
        t = float(k)
        values = np.full((4, len(GPU_METRICS)), np.nan)
        values[:, _POWER] = [1000.0, 1000.0, 500.0, 500.0]
        values[:2, _ENERGY] = 7e6 + 1000.0 * t
        core.ingest(GpuBatch(t, node_index, gpu, values, np.zeros(4, np.uint64)))
        core.ingest(ProgressBatch(t, np.array([0, 1]), np.array([k, k]), np.array([300 * k, 200 * k])))
    snap = core.snapshot()
    assert snap.nodes.energy_source == ("counter", "power")
    assert snap.aggregate.energy_source == "mixed"
    # node00: 2 GPUs x 1 kW x 100 s by the counters; node01: 2 x 500 W on the ticks before t = 100.
    assert snap.nodes.tokens_per_joule[0] == pytest.approx(30_000 / 200_000.0)
    integrated = core.state.energy.node_integrated_j[1]
    assert integrated == pytest.approx(2 * 500.0 * 100, rel=0.02)
    # its tokens up to the last tick its power is integrated to (19,800 at t = 99): 200 tok/s per kW
    assert snap.nodes.tokens_per_joule[1] == pytest.approx(19_800 / integrated)
    assert snap.nodes.tokens_per_joule[1] == pytest.approx(200 / 1000.0, rel=0.01)
    assert snap.aggregate.energy_j == pytest.approx(200_000.0 + integrated)
    summary = core.summary()
    assert summary.energy_source == "mixed"
    # each node's tokens over its energy's window: node01's up to the last tick (no run end here)
    assert summary.tokens_per_joule == pytest.approx((30_000 + 19_800) / (200_000.0 + integrated))


@pytest.mark.parametrize("counter", [True, False], ids=["energy counter", "integrated power"])
def test_after_an_attach_the_power_figures_cover_the_window_the_gpus_were_read(counter: bool) -> None:
    """A watch attached at 01:00 of a run: its log's history gives the node's tokens from t = 0 (300 tok/s),
    its GPUs (2 x 700 W) are read from the attach on. Tokens per joule is the tokens made over the energy
    of the same minute (300 / 1,400), the mean power 1,400 W (not the energy over two minutes), and the
    summary says from when the power figures hold."""
    rate, gpu_w, attach, end = 300.0, 700.0, 60, 120
    core = RackCore()
    core.ingest(RunStarted(0.0, "e", "Offline", ("node00",), 2, None, None, "live", 0.0))
    core.ingest(NodeStatus(0.0, "node00", "up"))
    for k in range(end + 1):
        t = float(k)
        if k >= attach:
            values = np.full((2, len(GPU_METRICS)), np.nan)
            values[:, _POWER] = gpu_w
            if counter:
                values[:, _ENERGY] = 5e6 + gpu_w * (t - attach)
            core.ingest(
                GpuBatch(t + 0.5, np.zeros(2, np.int64), np.arange(2), values, np.zeros(2, np.uint64))
            )
        core.ingest(ProgressBatch(t + 0.5, np.array([0]), np.array([k]), np.array([round(rate * t)])))
    core.ingest(RunEnded(float(end) + 1.0))
    true_tpj = rate / (2 * gpu_w)
    snap = core.snapshot()
    assert snap.nodes.tokens_per_joule[0] == pytest.approx(true_tpj, rel=0.02)
    assert snap.aggregate.run_tokens_per_joule == pytest.approx(true_tpj, rel=0.02)
    summary = core.summary()
    assert summary.power_mean_w == pytest.approx(2 * gpu_w, rel=0.02)
    assert summary.tokens_per_joule == pytest.approx(true_tpj, rel=0.02)
    assert summary.energy_since_s == pytest.approx(attach, abs=1.0)
    assert ("Power figures cover", "from 01:00 (GPU readings began)") in rack_table_rows(summary)
    assert summary.to_json()["power"]["since_s"] == pytest.approx(attach, abs=1.0)


def test_gpus_read_from_the_start_cover_the_whole_run() -> None:
    """Read from the first second, nothing is said about a window: the figures are the run's."""
    core = RackCore()
    core.ingest(RunStarted(0.0, "e", "Offline", ("node00",), 1, None, None, "sim", 0.0))
    core.ingest(NodeStatus(0.0, "node00", "up"))
    for k in range(61):
        values = np.full((1, len(GPU_METRICS)), np.nan)
        values[:, _POWER] = 500.0
        core.ingest(GpuBatch(k + 0.5, np.zeros(1, np.int64), np.arange(1), values, np.zeros(1, np.uint64)))
        core.ingest(ProgressBatch(k + 0.5, np.array([0]), np.array([k]), np.array([100 * k])))
    core.ingest(RunEnded(61.0))
    summary = core.summary()
    assert summary.energy_since_s is None
    assert summary.power_mean_w == pytest.approx(500.0, rel=0.02)
    assert "since_s" not in summary.to_json()["power"]


@pytest.mark.parametrize(
    ("gpus_from", "catch_up"), [(60.4, 63.3), (62.4, 60.5)], ids=["GPUs read first", "log caught up first"]
)
def test_lines_written_while_the_watch_started_are_not_in_the_window(
    gpus_from: float, catch_up: float
) -> None:
    """Attached at 01:00, the watch's first read of the log brings the lines written while it was starting
    (the history ends at 00:52): made before the GPUs were read, so not in their window, whichever of the
    two comes first."""
    rate, gpu_w, attach, end = 300.0, 700.0, 60.0, 160.0
    core = RackCore()
    core.ingest(
        RunStarted(0.0, "e", "Offline", ("node00",), 1, None, None, "live", 0.0, {"attached_at_s": attach})
    )
    events: list[Event] = [
        Progress(float(k), "node00", None, round(rate * k), filled=k % 10 != 2) for k in range(53)
    ]
    events.append(NodeStatus(attach, "node00", "up"))
    events.append(Progress(catch_up, "node00", None, round(rate * math.floor(catch_up))))
    events += [
        Progress(s + 0.5, "node00", None, round(rate * s)) for s in range(math.floor(catch_up) + 1, 160)
    ]
    power = np.full((1, len(GPU_METRICS)), np.nan)
    power[:, _POWER] = gpu_w
    one = np.zeros(1, np.int64)
    events += [GpuBatch(t, one, one, power, np.zeros(1, np.uint64)) for t in np.arange(gpus_from, end, 0.2)]
    for event in sorted(events, key=lambda e: e.t):
        core.ingest(event)
    core.ingest(RunEnded(end))
    summary = core.summary()
    assert summary.tokens_per_joule == pytest.approx(rate / gpu_w, rel=0.02)
    assert summary.power_mean_w == pytest.approx(gpu_w, rel=0.02)


@pytest.mark.parametrize("phase", [-0.003, 0.003], ids=["lines just before the ticks", "just after them"])
def test_a_window_opened_by_a_catch_up_counts_its_tokens_and_energy_between_the_same_reads(
    phase: float,
) -> None:
    """Attached at 01:00 to a node logging every second. The run's clock is anchored on the log's own
    write times, so its lines land within milliseconds of the ticks, on either side. The catch-up line
    (at 01:01, bringing the seconds the watch took to start) opens the window; the GPUs (700 W) were
    read from 01:00.4. Tokens per joule and the mean power hold to a tenth of a line whichever side of
    the ticks the lines fall (counted by ticks, a line moved in or out: 1.4 % of the 69-s window)."""
    rate, gpu_w, attach, end = 1000.0, 700.0, 60.0, 130.5
    core = RackCore()
    core.ingest(
        RunStarted(0.0, "e", "Offline", ("node00",), 1, None, None, "live", 0.0, {"attached_at_s": attach})
    )
    events: list[Event] = [Progress(float(k), "node00", None, round(rate * k)) for k in range(0, 58, 10)]
    events.append(NodeStatus(attach, "node00", "up"))
    # each line states its second: it arrives when written, ``phase`` off the tick
    events += [Progress(s + phase, "node00", None, round(rate * s)) for s in range(61, 131)]
    power = np.full((1, len(GPU_METRICS)), np.nan)
    power[:, _POWER] = gpu_w
    one = np.zeros(1, np.int64)
    events += [GpuBatch(t, one, one, power, np.zeros(1, np.uint64)) for t in np.arange(60.4, end, 0.2)]
    for event in sorted(events, key=lambda e: e.t):
        core.ingest(event)
    true_tpj = rate / gpu_w
    assert core.snapshot().nodes.tokens_per_joule[0] == pytest.approx(true_tpj, rel=0.002)
    core.ingest(RunEnded(end))
    summary = core.summary()
    assert summary.tokens_per_joule == pytest.approx(true_tpj, rel=0.002)
    assert summary.power_mean_w == pytest.approx(gpu_w, rel=0.002)
    assert summary.energy_since_s == pytest.approx(61.0, abs=0.01)  # the catch-up's read


def test_a_node_first_read_in_a_batch_after_the_attach_counts_its_tokens_from_then() -> None:
    """A fleet's drill-down: attached at 01:00, a node's counters and GPUs are first read through the
    server at 01:10 (its counters then hold every token since the run began), then every second. Its
    tokens per joule is its rate over its power (300 / 1,400), not 01:10's tokens over a minute's energy."""
    rate, gpu_w, attach, first, end = 300.0, 700.0, 60.0, 70, 130
    core = RackCore()
    core.ingest(
        RunStarted(0.0, "e", "Offline", ("node00",), 2, None, None, "live", 0.0, {"attached_at_s": attach})
    )
    core.ingest(NodeStatus(0.0, "node00", "up"))
    for k in range(first, end + 1):
        t = float(k)
        core.ingest(ProgressBatch(t - 0.3, np.array([0]), np.array([k]), np.array([round(rate * (t - 0.3))])))
        values = np.full((2, len(GPU_METRICS)), np.nan)
        values[:, _POWER] = gpu_w
        core.ingest(GpuBatch(t, np.zeros(2, np.int64), np.arange(2), values, np.zeros(2, np.uint64)))
    snap = core.snapshot()
    assert snap.nodes.tokens_per_joule[0] == pytest.approx(rate / (2 * gpu_w), rel=0.03)
    assert snap.aggregate.run_tokens_per_joule == pytest.approx(rate / (2 * gpu_w), rel=0.03)
