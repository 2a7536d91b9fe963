"""The one rule that turns cumulative ``le`` buckets into latency observations."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tokenwatch.sources.le_buckets import MAX_BUCKET_COUNT, bucket_delta, bucket_values

INF = math.inf


def test_the_bucket_named_in_the_issue_reads_its_geometric_middle() -> None:
    # (0.1, 0.25] read 0.175 s by the old scrape rule and 0.158 s by the old query rule: now 0.158 both ways.
    (value,) = bucket_values(np.array([0.1, 0.25]))[1:]
    assert value == pytest.approx(math.sqrt(0.1 * 0.25))
    assert value == pytest.approx(0.158, abs=5e-4)


@pytest.mark.parametrize(
    ("bounds", "expected"),
    [
        # first bucket (0, b]: b / 2; then geometric middles; +Inf: the last finite bound
        ([0.005, 0.01, 0.025, INF], [0.0025, math.sqrt(0.005 * 0.01), math.sqrt(0.01 * 0.025), 0.025]),
        ([1.0, INF], [0.5, 1.0]),
        ([0.0, 0.1, INF], [0.0, 0.05, 0.1]),  # a bucket at le=0 holds zeros; (0, 0.1] has no ratio middle
        ([INF], [math.nan]),  # nothing to place the observations by
    ],
)
def test_representatives(bounds: list[float], expected: list[float]) -> None:
    np.testing.assert_allclose(bucket_values(np.array(bounds)), expected, equal_nan=True)


def test_delta_against_the_previous_read_and_a_restart() -> None:
    first = bucket_delta([(0.1, 3.0), (1.0, 5.0), (INF, 6.0)], None)
    assert first.counts.tolist() == [3, 2, 1]
    np.testing.assert_allclose(first.values_s, [0.05, math.sqrt(0.1), 1.0])
    assert first.problem is None
    # Pairs in any order: sorted by bound. 4 new in (0.1, 1].
    second = bucket_delta([(INF, 10.0), (1.0, 9.0), (0.1, 3.0)], first.keep)
    assert second.counts.tolist() == [4]
    np.testing.assert_allclose(second.values_s, [math.sqrt(0.1)])
    # A bucket shrank: the source restarted, what it holds now is all new.
    third = bucket_delta([(0.1, 1.0), (1.0, 1.0), (INF, 1.0)], second.keep)
    assert third.counts.tolist() == [1]
    np.testing.assert_allclose(third.values_s, [0.05])
    # Nothing new: no observations, state kept.
    fourth = bucket_delta([(0.1, 1.0), (1.0, 1.0), (INF, 1.0)], third.keep)
    assert len(fourth.counts) == 0
    assert fourth.keep is not None


def test_damaged_reads() -> None:
    falling = bucket_delta([(0.1, 5.0), (1.0, 3.0), (INF, 7.0)], None)
    assert falling.problem is not None
    assert "running maximum" in falling.problem
    assert falling.counts.tolist() == [5, 2]  # cumulative held at 5 then 7: the total stays 7
    huge = bucket_delta([(0.1, MAX_BUCKET_COUNT * 4)], falling.keep)
    assert huge.problem is not None
    assert len(huge.counts) == 0
    assert huge.keep is falling.keep  # the damaged read is not remembered
    junk = bucket_delta([(math.nan, 1.0), (0.1, math.inf), (0.2, -1.0)], None)
    assert len(junk.counts) == 0
    assert junk.problem is None
