"""The throughput chart's steady mean: the rate over the steady span, bursts and gaps both counted."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tokenwatch.core.rack_snapshot import steady_mean


def test_a_smooth_run_leaves_out_its_warm_up_and_tail() -> None:
    rates = np.array([0.0, 100.0, 900.0, 1000.0, 1010.0, 990.0, 1000.0, 400.0, 0.0])
    assert steady_mean(rates) == pytest.approx(np.mean([1000.0, 1010.0, 990.0, 1000.0]))


def test_an_engine_that_finishes_in_bursts_is_measured_by_its_work_over_time_not_its_burst_height() -> None:
    """A real H200 run's shape (tests/data/device-h200): a batch of 256 samples x 64 tokens lands in one
    second, then seconds with none. 16,384 tokens every 1.6 s is 10,240 tok/s, not 16,384."""
    period = [16384.0, 0.0, 16384.0, 0.0, 0.0]  # two batches every 5 s = 6,553.6 tok/s
    rates = np.array([0.0] * 20 + period * 12 + [16384.0] + [0.0] * 3)
    assert steady_mean(rates) == pytest.approx(2 * 16384 / 5)


def test_no_rate_yet_is_unknown() -> None:
    assert math.isnan(steady_mean(np.array([math.nan, math.nan])))
    assert math.isnan(steady_mean(np.array([], dtype=float)))
