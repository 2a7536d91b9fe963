"""nanmedian_columns is np.nanmedian(axis=0), the same bits: the forecast's pace reads its noise through
it, and every figure the verdict shows must stay what numpy's masked median made it."""

from __future__ import annotations

import math
import warnings

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from tokenwatch.base.column_median import (
    linear_quantiles,
    median_columns,
    nanmedian_columns,
    quantile_columns,
)


def _columns(min_rows: int, elements: st.SearchStrategy[float]) -> st.SearchStrategy[np.ndarray]:
    """Up to 30 rows of 1-6 columns of ``elements``."""
    return st.integers(min_rows, 30).flatmap(
        lambda rows: st.integers(1, 6).flatmap(
            lambda cols: arrays(np.float64, (rows, cols), elements=elements)
        )
    )


_VALUES = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True, width=64),
    st.sampled_from([0.0, -0.0, np.nan, 1.0, 2.0]),  # ties, signed zeros and gaps come often
)


def _same(ours: np.ndarray, numpys: np.ndarray) -> bool:
    """Equal bit for bit where a number, NaN where NaN (a NaN's payload is no figure)."""
    gaps = np.isnan(numpys)
    return bool(
        np.array_equal(np.isnan(ours), gaps)
        and np.array_equal(ours[~gaps].view(np.int64), numpys[~gaps].view(np.int64))
    )


@settings(max_examples=400, deadline=None)
@given(_columns(0, _VALUES))
def test_equals_numpys_nanmedian(values: np.ndarray) -> None:
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # numpy's all-NaN column
        expected = np.nanmedian(values, axis=0)
    assert _same(nanmedian_columns(values), expected)


def test_a_pace_shaped_block_of_rates() -> None:
    """Hundreds of 10-s block rates of 18 nodes, stalls as NaN: numpy's figure, and the middle by hand."""
    rng = np.random.default_rng(7)
    rates = rng.normal(1_000.0, 40.0, (360, 18))
    rates[rng.random(rates.shape) < 0.15] = np.nan
    rates[:, 3] = np.nan  # a node with no working block
    expected = np.full(18, np.nan)
    for k in range(18):
        column = np.sort(rates[:, k][~np.isnan(rates[:, k])])
        if column.size:
            expected[k] = (column[(column.size - 1) // 2] + column[column.size // 2]) / 2
    got = nanmedian_columns(rates)
    assert _same(got, expected)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        assert _same(got, np.nanmedian(rates, axis=0))


_NOT_NEGATIVE = st.one_of(
    st.floats(min_value=0.0, allow_infinity=True, width=64).filter(
        lambda v: not np.signbit(v)  # a negative zero: outside what median_columns takes
    ),
    st.sampled_from([0.0, np.nan, 1.0, 2.0, np.inf]),  # gaps and ties come often
)


@settings(max_examples=400, deadline=None)
@given(_columns(1, _NOT_NEGATIVE))
def test_median_columns_equals_numpys_median(values: np.ndarray) -> None:
    """The straggler rule's noise: absolute differences of rates, a column NaN where one of them is."""
    with np.errstate(all="ignore"):  # the middle two's sum may overflow, in numpy's median as in ours
        expected = np.median(values, axis=0)
        ours = median_columns(values)
    assert _same(ours, expected)


def test_median_columns_of_signed_rate_differences() -> None:
    rng = np.random.default_rng(3)
    differences = np.abs(np.diff(rng.normal(1_000.0, 30.0, (13, 72)), axis=0))
    differences[4, 10] = np.nan
    for rows in (12, 11, 2, 1):
        assert _same(median_columns(differences[:rows]), np.median(differences[:rows], axis=0))


_NO_NEGATIVE_ZERO = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True, width=64).map(lambda x: 0.0 if x == 0 else x),
    st.sampled_from([0.0, np.nan, 1.0, 2.0, np.inf]),
)
_QUANTILES = st.one_of(st.sampled_from([0.0, 0.25, 0.5, 0.75, 0.9, 1.0]), st.floats(0.0, 1.0))


@settings(max_examples=600, deadline=None)
@given(
    st.integers(1, 40).flatmap(lambda n: arrays(np.float64, n, elements=_NO_NEGATIVE_ZERO)),
    st.lists(_QUANTILES, min_size=1, max_size=3),
)
def test_linear_quantiles_equal_numpys_quantile(values: np.ndarray, qs: list[float]) -> None:
    with np.errstate(all="ignore"):
        expected = np.quantile(values, tuple(qs))
    assert _same(np.array(linear_quantiles(values, tuple(qs))), expected)


def test_the_peers_quartiles_of_a_rack() -> None:
    """18 nodes' rates: the quartiles numpy gives, and by hand (the 5th and 13th of 18, interpolated)."""
    rates = np.random.default_rng(3).normal(60_000.0, 900.0, 18)
    q1, q3 = linear_quantiles(rates, (0.25, 0.75))
    assert (q1, q3) == tuple(np.quantile(rates, (0.25, 0.75)))
    ordered = np.sort(rates)
    assert math.isclose(q1, ordered[4] + 0.25 * (ordered[5] - ordered[4]), rel_tol=1e-12)
    assert math.isclose(q3, ordered[12] + 0.75 * (ordered[13] - ordered[12]), rel_tol=1e-12)


@settings(max_examples=600, deadline=None)
@given(_columns(1, _NO_NEGATIVE_ZERO), st.lists(_QUANTILES, min_size=1, max_size=3))
def test_quantile_columns_equal_numpys_quantile(values: np.ndarray, qs: list[float]) -> None:
    """A pace's block rates: each column's quantiles as numpy's figures, a column with a NaN NaN."""
    with np.errstate(all="ignore"):
        expected = np.quantile(values, tuple(qs), axis=0)
        ours = quantile_columns(values, tuple(qs))
    assert len(ours) == len(qs)
    for k in range(len(qs)):
        assert _same(ours[k], expected[k])


def test_quantile_columns_of_a_paces_blocks() -> None:
    """360 blocks of 18 nodes: the median as the middle two interpolated, the 90th by hand."""
    rates = np.random.default_rng(5).normal(1_000.0, 40.0, (360, 18))
    rates[7, 4] = np.nan
    median, top = quantile_columns(rates, (0.5, 0.9))
    for k in (0, 17):
        ordered = np.sort(rates[:, k])
        assert math.isclose(median[k], (ordered[179] + ordered[180]) / 2, rel_tol=1e-12)
        assert math.isclose(top[k], ordered[323] + 0.1 * (ordered[324] - ordered[323]), rel_tol=1e-12)
    assert math.isnan(median[4])
    assert math.isnan(top[4])
