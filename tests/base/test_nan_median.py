"""The column median that skips NaN gives numpy's own ``nanmedian`` numbers, bit for bit: the pace (and so
every band and golden) reads it where it read numpy's."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from tokenwatch.base.nan_median import nan_median_columns


def numpy_nanmedian(values: np.ndarray) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.asarray(np.nanmedian(values, axis=0))


@settings(max_examples=300, deadline=None)
@given(
    arrays(
        np.float64,
        st.tuples(st.integers(0, 40), st.integers(1, 8)),
        elements=st.floats(allow_nan=True, allow_infinity=True, width=64)
        | st.sampled_from([np.nan, 0.0, 1.0, 2.0]),  # ties and gaps, often
    )
)
def test_matches_numpy_nanmedian(values: np.ndarray) -> None:
    expected = numpy_nanmedian(values)
    got = nan_median_columns(values)
    assert got.shape == expected.shape
    assert np.array_equal(got, expected, equal_nan=True)


@pytest.mark.parametrize(
    ("column", "median"),
    [
        ([3.0, np.nan, 1.0, 2.0], 2.0),  # odd count: the middle value
        ([4.0, 1.0, np.nan, 2.0, 3.0], 2.5),  # even count: the mean of the middle two
        ([np.nan, np.nan], np.nan),  # nothing reported
        ([5.0], 5.0),
    ],
)
def test_middle_of_the_values_reported(column: list[float], median: float) -> None:
    got = nan_median_columns(np.array(column)[:, None])
    assert np.array_equal(got, [median], equal_nan=True)


def test_a_block_history_of_a_rack() -> None:
    """The shape the pace reads: 360 ten-second blocks of 72 nodes, stalls (NaN) here and there."""
    rng = np.random.default_rng(7)
    rates = rng.normal(1000.0, 80.0, (360, 72))
    rates[rng.random(rates.shape) < 0.1] = np.nan
    rates[:, 5] = np.nan  # a node that never worked
    assert np.array_equal(nan_median_columns(rates), numpy_nanmedian(rates), equal_nan=True)
