"""``nan_to_zero`` gives ``np.nan_to_num``'s array bit for bit: NaN as 0, infinities as the largest finite
floats, -0.0 and every other value as they are."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes, arrays

from tokenwatch.base.nan_to_zero import nan_to_zero

_SPECIAL = st.sampled_from([np.nan, np.inf, -np.inf, 0.0, -0.0, 5e-324, np.finfo(np.float64).max])


@given(
    arrays(
        np.float64,
        array_shapes(min_dims=1, max_dims=2, max_side=20),
        elements=st.one_of(st.floats(), _SPECIAL),
    )
)
def test_the_figures_are_numpys_bit_for_bit(values: np.ndarray) -> None:
    got, want = nan_to_zero(values), np.nan_to_num(values)
    assert got.dtype == want.dtype
    assert got.shape == want.shape
    assert got.tobytes() == want.tobytes()


def test_the_input_is_not_changed() -> None:
    values = np.array([np.nan, np.inf, -np.inf, -0.0, 1.5])
    before = values.tobytes()
    nan_to_zero(values)
    assert values.tobytes() == before
