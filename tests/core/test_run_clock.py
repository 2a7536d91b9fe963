"""The run's one clock (core/run_clock.py): which end it states, and that every surface reads the same.

Runs are fed by hand (six nodes, ten samples a second each, 100 tokens a sample), so each end has an
independent value: the samples left at that pace, the nominal length, or the moment the run ended.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from tokenwatch.base.events import ProgressBatch, RunEnded, RunStarted, Scenario
from tokenwatch.core import CoreConfig, RackCore
from tokenwatch.core.snapshot_json import snapshot_json

NODES = tuple(f"node{i:02d}" for i in range(1, 7))
PER_NODE = 1_000  # samples each node's LoadGen issues (Offline)
RATE = 10  # samples a second per node


def fed(scenario: Scenario, total: int | None, nominal: float | None, until: int = 20) -> RackCore:
    core = RackCore(CoreConfig(window_s=10.0))
    core.ingest(RunStarted(0.0, "test", scenario, NODES, 4, nominal, total, "sim", 0.0))
    for t in range(until + 1):
        core.ingest(ProgressBatch(float(t), np.arange(6), np.full(6, RATE * t), np.full(6, 100 * RATE * t)))
    return core


def test_a_run_with_a_sample_count_ends_where_its_samples_run_out_and_every_surface_says_so() -> None:
    core = fed("Offline", total=6 * PER_NODE, nominal=60.0)
    snap = core.snapshot(20.0)
    clock = snap.clock
    drain_half = CoreConfig().forecast.drain_s / 2.0  # the Offline drain tail costs half its length
    expected = 20.0 + (PER_NODE - 20 * RATE) / RATE + drain_half
    assert clock.end_kind == "projected"
    assert clock.end_s == pytest.approx(expected)
    assert clock.end_low_s <= clock.end_s <= clock.end_high_s
    assert clock.differs_from_nominal  # 105 s against a nominal 60 s: both are labelled
    assert snap.eta_s == pytest.approx(expected - 20.0)
    record = snapshot_json(snap)
    assert record["clock"]["end_s"] == pytest.approx(expected, abs=1e-3)
    assert record["clock"]["end"] == "projected"
    assert record["verdict"]["end_s"] == record["clock"]["end_s"]  # the verdict's end is the clock's


def test_without_a_sample_count_the_end_is_the_nominal_one_not_now() -> None:
    # Nothing to end by but the configured length: the forecast states no end (it once said "now + 5 s"
    # at every tick), and the clock counts down to the nominal end, labelled as what it is.
    snap = fed("Offline", total=None, nominal=600.0).snapshot(20.0)
    assert snap.verdict is not None
    assert snap.verdict.forecast.end_s is None
    assert snap.clock.end_kind == "nominal"
    assert snap.clock.end_s == 600.0
    assert snap.eta_s == pytest.approx(580.0)
    assert not snap.clock.differs_from_nominal
    assert snapshot_json(snap)["clock"]["end"] == "nominal"


def test_with_neither_the_end_is_unknown() -> None:
    snap = fed("Offline", total=None, nominal=None).snapshot(20.0)
    assert snap.clock.end_kind == ""
    assert math.isnan(snap.clock.end_s)
    assert snap.eta_s is None
    record = snapshot_json(snap)["clock"]
    assert record["end"] is None
    assert record["end_s"] is None
    assert record["eta_s"] is None


def test_a_time_bounded_server_run_ends_at_its_schedule() -> None:
    snap = fed("Server", total=None, nominal=300.0).snapshot(20.0)
    assert snap.clock.end_kind == "projected"
    assert snap.clock.end_s == pytest.approx(300.0)
    assert not snap.clock.differs_from_nominal  # the same length: no labels needed


def test_once_ended_the_end_is_the_actual_one() -> None:
    core = fed("Offline", total=6 * PER_NODE, nominal=60.0, until=30)
    core.ingest(RunEnded(30.0, "interrupted"))
    snap = core.snapshot()
    assert snap.clock.end_kind == "actual"
    assert snap.clock.end_s == snap.clock.end_low_s == snap.clock.end_high_s == 30.0
    assert snap.eta_s == 0.0
    assert snapshot_json(snap)["verdict"]["end_s"] == 30.0  # not a projection of the unfinished work
