"""The shared small formatters: a figure for JSON, and an error as one line of a message."""

from __future__ import annotations

import math

import asyncssh
import numpy as np
import pytest

from tokenwatch.base.formatting import json_number, one_line


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


class _RefusedError(Exception):
    """An error that carries a short reason apart from its long text, as asyncssh's do."""

    def __init__(self) -> None:
        super().__init__("Channel open failed:\n  long details the user need not read")
        self.reason = "connection refused"


@pytest.mark.parametrize(
    ("detail", "expected"),
    [
        (ValueError("bad\n  range\tin [1-x]\n"), "bad range in [1-x]"),
        (OSError(111, "Connection refused"), "[Errno 111] Connection refused"),
        (TimeoutError(), "TimeoutError"),
        (ValueError("   \n "), "ValueError"),
        ("node[1-\n3", "node[1- 3"),
        ("", ""),
        (asyncssh.ChannelOpenError(2, "open failed:\nno such\tprogram"), "open failed: no such program"),
        (_RefusedError(), "connection refused"),
    ],
)
def test_one_line_folds_an_error_to_one_line(detail, expected):
    got = one_line(detail)
    assert got == expected
    assert "\n" not in got


def test_energy_is_never_a_false_zero() -> None:
    from tokenwatch.base.formatting import energy

    assert energy(30_000) == "8.3 Wh"  # one H200 for a minute: 0.0 kWh would be a zero that is not true
    assert energy(359_640) == "100 Wh"
    assert energy(360_000) == "0.1 kWh"
    assert energy(134.2 * 3.6e6) == "134.2 kWh"  # a rack's 80 minutes
    assert energy(float("nan")) == energy(None) == "—"
