"""The shared small formatters: a figure for JSON."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tokenwatch.base.formatting import json_number


@pytest.mark.parametrize(
    ("value", "digits", "expected"),
    [
        (1.23456789, 3, 1.235),
        (1.23456789, 6, 1.234568),
        (1_100_948.7, 0, 1_100_949.0),
        (-0.0004, 3, -0.0),
        (7, 1, 7.0),
        (None, 3, None),
        (math.nan, 3, None),
        (math.inf, 3, None),
        (-math.inf, 0, None),
    ],
)
def test_json_number_rounds_and_nulls_what_json_cannot_hold(value, digits, expected):
    got = json_number(value, digits)
    assert got == expected
    assert got is None or type(got) is float


def test_json_number_turns_a_numpy_figure_into_a_python_float():
    got = json_number(np.float64(2.5), 3)
    assert type(got) is float
    assert got == 2.5
