"""Durations are shown as a config writes them (``10m``, ``1h30m``), and read back to the same seconds."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tokenwatch.base.durations import format_duration, parse_duration


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(600, "10m"), (10_800, "3h"), (5400, "1h30m"), (90, "1m30s"), (0.2, "200ms"), (0, "0s"), (86_400, "1d")],
)
def test_durations_read_as_written(seconds: float, shown: str) -> None:
    assert format_duration(seconds) == shown


@given(st.integers(min_value=0, max_value=400 * 86_400_000))
def test_a_shown_duration_reads_back_to_the_same_milliseconds(millis: int) -> None:
    assert round(parse_duration(format_duration(millis / 1000)) * 1000) == millis
