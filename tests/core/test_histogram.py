"""Log-bucketed histograms against exact numpy quantiles."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenwatch.core.histogram import (
    GAMMA,
    MAX_VALUE_S,
    MIN_VALUE_S,
    N_BUCKETS,
    RELATIVE_ACCURACY,
    LogHistogram,
    bucket_index,
    bucket_value,
    compress,
)

RNG = np.random.default_rng(7)
DISTRIBUTIONS = {
    "lognormal ttft": RNG.lognormal(np.log(0.3), 0.6, 20_000),
    "tpot narrow": RNG.lognormal(np.log(0.055), 0.15, 20_000),
    "uniform e2e": RNG.uniform(1.0, 120.0, 5_000),
    "exponential": 1e-4 + RNG.exponential(0.02, 10_000),  # inside the 1 µs..1e5 s range
    "constant": np.full(1_000, 0.2),
    "bimodal": np.concatenate([RNG.normal(0.1, 0.005, 5_000), RNG.normal(3.0, 0.2, 500)]),
    "tiny sample": np.array([0.5, 0.7, 0.9]),
}


@pytest.mark.parametrize("name", sorted(DISTRIBUTIONS))
@pytest.mark.parametrize("q", [0.0001, 0.25, 0.5, 0.9, 0.99, 0.999, 1.0])
def test_quantiles_within_one_percent_of_exact(name: str, q: float) -> None:
    values = DISTRIBUTIONS[name]
    hist = LogHistogram()
    hist.add(values)
    exact = float(np.quantile(values, q, method="inverted_cdf"))
    estimate = hist.quantiles([q])[0]
    assert abs(estimate - exact) / exact <= RELATIVE_ACCURACY + 1e-12


def test_merge_equals_histogram_of_concatenation() -> None:
    a, b = RNG.lognormal(0, 1, 3_000), RNG.lognormal(1, 0.5, 4_000)
    ha, hb, hab = LogHistogram(), LogHistogram(), LogHistogram()
    ha.add(a)
    hb.add(b)
    hab.add(np.concatenate([a, b]))
    ha.merge(hb)
    assert np.array_equal(ha.counts, hab.counts)
    assert ha.total == hab.total == 7_000


def test_weighted_values_equal_repeated_values() -> None:
    values = np.array([0.1, 0.25, 3.0])
    counts = np.array([5, 0, 7])
    weighted, repeated = LogHistogram(), LogHistogram()
    weighted.add(values, counts)
    repeated.add(np.repeat(values, counts))
    assert np.array_equal(weighted.counts, repeated.counts)


def test_compressed_buckets_round_trip_to_the_same_buckets() -> None:
    hist = LogHistogram()
    hist.add(RNG.lognormal(-1, 2, 10_000))
    values, counts = compress(hist.counts)
    again = LogHistogram()
    again.add(values, counts)
    assert np.array_equal(again.counts, hist.counts)


def test_every_bucket_representative_maps_back_to_its_bucket() -> None:
    indices = np.arange(N_BUCKETS)
    assert np.array_equal(bucket_index(bucket_value(indices)), indices)


def test_non_finite_values_are_dropped_and_counted() -> None:
    hist = LogHistogram()
    hist.add(np.array([0.1, np.nan, np.inf, -np.inf, 0.2]))
    assert hist.total == 2
    assert hist.dropped == 3


def test_out_of_range_values_clamp_to_the_end_buckets() -> None:
    hist = LogHistogram()
    hist.add(np.array([0.0, 1e-9, 1e9]))
    assert hist.counts[0] == 2
    assert hist.counts[-1] == 1
    assert hist.quantiles([0.0])[0] <= MIN_VALUE_S * 1.02
    assert hist.quantiles([1.0])[0] >= MAX_VALUE_S * 0.98


def test_empty_histogram_has_no_quantiles() -> None:
    assert np.isnan(LogHistogram().quantiles([0.5])[0])
    assert np.isnan(LogHistogram().mean())


def test_a_histogram_makes_its_counts_at_the_first_observation_and_empty_ones_share_none() -> None:
    """An unobserved histogram holds no array of its own (a fleet's 3,456 per-node ones were 35 MB of
    zeros in every replay keyframe), and merging, copying and adding to it behave as before."""
    empty, other = LogHistogram(), LogHistogram()
    assert not empty.counts.any()
    assert not empty.counts.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        empty.counts[0] = 1  # the shared zeros cannot be changed through one histogram
    assert len(pickle.dumps(empty)) < 200
    values = RNG.lognormal(0, 1, 500)
    other.add(values)
    merged = LogHistogram()
    merged.merge(empty)
    assert not merged.counts.any()
    merged.merge(other)
    assert np.array_equal(merged.counts, other.counts)
    assert merged.total == 500
    copy = empty.copy()
    copy.add(values)
    assert np.array_equal(copy.counts, other.counts)
    assert not empty.counts.any()
    restored = pickle.loads(pickle.dumps(other))
    assert np.array_equal(restored.counts, other.counts)
    assert restored.total == other.total


_VALUE = st.one_of(st.floats(1e-7, 1e6), st.sampled_from([math.nan, math.inf, 0.2, 0.2001]))


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(_VALUE, max_size=12),
            st.lists(st.integers(-2, 5), min_size=12, max_size=12),  # weights, zeros and negatives too
            st.sampled_from(["add", "weighted", "merge", "copy"]),
        ),
        max_size=8,
    )
)
def test_the_used_range_holds_every_count(steps: list[tuple[list[float], list[int], str]]) -> None:
    """A fleet's quantiles read each histogram's buckets in ``used`` alone: it must hold every count,
    whatever adds, weighted adds, merges and copies made them."""
    hist = LogHistogram()
    for values, weights, how in steps:
        array = np.asarray(values, np.float64)
        if how == "add":
            hist.add(array)
        elif how == "weighted":
            hist.add(array, np.asarray(weights[: len(values)], np.int64))
        elif how == "merge":
            other = LogHistogram()
            other.add(array)
            hist.merge(other)
        else:
            hist = hist.copy()
        low, high = hist.used
        nonzero = np.flatnonzero(hist.counts)
        assert all(low <= i < high for i in nonzero.tolist()), (hist.used, nonzero)
        assert hist.total == int(hist.counts.sum())


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(
        st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.floats(1e-7, 1e6)), max_size=40
    ),
    weights=st.lists(st.integers(-3, 50), min_size=40, max_size=40),
)
def test_a_batch_lands_in_each_values_own_bucket_whatever_it_holds(
    values: list[float], weights: list[int]
) -> None:
    """Each finite value in the bucket its bounds say (worked out value by value with math.log), NaN and
    infinities counted as dropped, negative weights as none."""
    hist = LogHistogram()
    hist.add(np.array(values, np.float64), np.array(weights[: len(values)], np.int64))
    expected = np.zeros(N_BUCKETS, np.int64)
    dropped = 0
    for value, weight in zip(values, weights, strict=False):
        weight = max(weight, 0)
        if not math.isfinite(value):
            dropped += weight
            continue
        clamped = min(max(value, MIN_VALUE_S), MAX_VALUE_S)
        index = math.ceil(math.log(clamped / MIN_VALUE_S) / math.log(GAMMA) - 1e-9)
        expected[min(max(index, 0), N_BUCKETS - 1)] += weight
    assert hist.counts.tolist() == expected.tolist()
    assert hist.dropped == dropped
    assert hist.total == int(expected.sum())
