"""The shared helpers for data with gaps (NaN = not reported) and the axis labels every front end uses."""

from __future__ import annotations

import math
import statistics
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenwatch.base.formatting import seconds_label, si
from tokenwatch.core.nan_math import finite_range, nan_quiet, nanmean_first_axis

NAN, INF = math.nan, math.inf


@pytest.mark.parametrize(
    ("arrays", "expected"),
    [
        (([3.0, NAN, -1.5, 7.25],), (-1.5, 7.25)),
        (([NAN, INF], [2.0], [[5.0, -INF], [NAN, 4.0]]), (2.0, 5.0)),  # 2-D and several arrays
        (([NAN, NAN], []), (NAN, NAN)),
        ((), (NAN, NAN)),
    ],
)
def test_finite_range_skips_gaps_and_infinities(
    arrays: tuple[list[float], ...], expected: tuple[float, float]
) -> None:
    low, high = finite_range(*(np.array(a, dtype=np.float64) for a in arrays))
    assert (low, high) == pytest.approx(expected, nan_ok=True)


def test_nan_quiet_reduces_each_row_and_an_all_nan_row_is_nan_without_a_warning() -> None:
    rows = [[1.0, NAN, 3.0], [NAN, NAN, NAN], [2.0, 8.0, 5.0]]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a RuntimeWarning would fail the test
        means = nan_quiet(np.nanmean, np.array(rows), axis=1)
        highs = nan_quiet(np.nanmax, np.array(rows), axis=1)
    finite_rows = [[v for v in row if not math.isnan(v)] for row in rows]
    expected_means = [statistics.fmean(r) if r else NAN for r in finite_rows]
    expected_highs = [max(r) if r else NAN for r in finite_rows]
    assert means.tolist() == pytest.approx(expected_means, nan_ok=True)
    assert highs.tolist() == pytest.approx(expected_highs, nan_ok=True)


@pytest.mark.parametrize(
    ("value", "digits", "fixed", "expected"),
    [
        (1_100_000.0, 3, False, "1.1M"),
        (62_000.0, 3, False, "62k"),
        (0.055, 3, False, "0.055"),
        (-2.5e9, 3, False, "-2.5G"),
        (1_100_948.0, 1, True, "1.1M"),
        (61_759.0, 1, True, "61.8k"),
        (950.4, 1, True, "950"),
        (NAN, 3, False, "—"),
    ],
)
def test_si_labels(value: float, digits: int, fixed: bool, expected: str) -> None:
    assert si(value, digits, fixed=fixed) == expected


@pytest.mark.parametrize(
    ("seconds", "space", "expected"),
    [(0.005, " ", "5 ms"), (0.25, "", "250ms"), (2.0, " ", "2 s"), (100.0, "", "100s")],
)
def test_seconds_labels(seconds: float, space: str, expected: str) -> None:
    assert seconds_label(seconds, space) == expected


@settings(max_examples=200, deadline=None)
@given(
    shape=st.tuples(st.integers(0, 6), st.integers(0, 5), st.integers(1, 3)),
    seed=st.integers(0, 2**32 - 1),
    nan_share=st.floats(0.0, 1.0),
)
def test_nanmean_first_axis_is_numpys_nanmean_bit_for_bit(
    shape: tuple[int, int, int], seed: int, nan_share: float
) -> None:
    rng = np.random.default_rng(seed)
    values = rng.normal(size=shape) * 10.0 ** rng.integers(-3, 6, size=shape)
    values[rng.random(shape) < nan_share] = NAN
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a slice of nothing but NaN: NaN
        expected = np.nanmean(values, axis=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # ...without a warning here
        got = nanmean_first_axis(values.copy())
    assert got.dtype == expected.dtype
    assert got.shape == expected.shape
    assert np.array_equal(got, expected, equal_nan=True)
