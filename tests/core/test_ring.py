"""Bounded series: the recent ring and the whole-run downsampled series against raw data."""

from __future__ import annotations

import numpy as np
import pytest

from tokenwatch.core._ring import DownsampledSeries, RecentRing


def test_recent_ring_keeps_the_newest_points_in_order() -> None:
    ring = RecentRing(5, (2,))
    for t in range(12):
        ring.push(float(t), np.array([t, -t]))
    times, values = ring.view()
    assert times.tolist() == [7, 8, 9, 10, 11]
    assert values[:, 1].tolist() == [-7, -8, -9, -10, -11]
    assert ring.view(2)[0].tolist() == [10, 11]
    oldest = ring.oldest()
    assert oldest is not None
    assert oldest[0] == 7
    before = ring.value_at_or_before(9.5)
    assert before is not None
    assert before[0] == 9
    assert ring.value_at_or_before(6.9) is None


@pytest.mark.parametrize("n_samples", [10, 64, 65, 1000, 9999])
def test_downsampled_mean_equals_mean_of_raw_samples_per_point(n_samples: int) -> None:
    rng = np.random.default_rng(n_samples)
    raw = rng.normal(100, 10, n_samples)
    raw[rng.random(n_samples) < 0.05] = np.nan
    series = DownsampledSeries(64, (), 1.0, "mean")
    for t, v in enumerate(raw):
        series.add(float(t), v)
    times, values = series.view()
    assert len(times) <= 64
    width = series.width_s
    for t_end, value in zip(times, values, strict=True):
        k = int(t_end // width)
        chunk = raw[int(k * width) : int((k + 1) * width)]
        expected = np.nanmean(chunk) if np.isfinite(chunk).any() else np.nan
        assert value == pytest.approx(expected, nan_ok=True)


def test_downsampled_last_keeps_the_newest_sample_per_point() -> None:
    series = DownsampledSeries(8, (3,), 1.0, "last")
    for t in range(100):
        series.add(float(t), np.array([t, 2 * t, 3 * t]))
    times, values = series.view()
    assert len(times) <= 8
    assert np.array_equal(values[:, 0], times)
    assert times[-1] == 99


def test_downsampled_series_memory_is_fixed_whatever_the_length() -> None:
    series = DownsampledSeries(128, (18,), 1.0, "mean")
    before = series.sums.nbytes + series.times.nbytes
    for t in range(100_000):
        series.add(float(t), np.ones(18))
    assert series.sums.nbytes + series.times.nbytes == before
    assert series.width_s >= 100_000 / 128


def test_capacity_must_be_even() -> None:
    with pytest.raises(ValueError, match="even"):
        DownsampledSeries(7, (), 1.0, "mean")


def test_slots_at_or_before_many_times_at_once() -> None:
    """One search for many times: each slot the one slot_at_or_before finds, once, oldest first."""
    ring = RecentRing(5, (1,))
    for t in range(8):  # holds t = 3..7 once full, wrapped
        ring.push(float(t), np.array([t * 10.0]))
    asked = np.array([1.0, 3.0, 3.5, 5.0, 5.2, 9.0])
    slots = ring.slots_at_or_before(asked)
    expected = [ring.slot_at_or_before(t) for t in asked]
    assert slots.tolist() == list(dict.fromkeys(s for s in expected if s is not None))
    assert ring.times[slots].tolist() == [3.0, 5.0, 7.0]


@pytest.mark.parametrize("blank_ticks", [5, 40, 130])
def test_a_blank_sample_is_an_all_nan_sample_across_halvings(blank_ticks: int) -> None:
    """``add_blank(t)`` (a fleet's unread GPUs: nothing to write) leaves a mean series exactly as
    ``add(t, NaN everywhere)`` does, through the halvings that follow and the real samples after."""
    shape = (3, 2)
    blank = DownsampledSeries(8, shape, 1.0, "mean")
    nans = DownsampledSeries(8, shape, 1.0, "mean")
    rng = np.random.default_rng(7)
    for k in range(blank_ticks):
        blank.add_blank(float(k))
        nans.add(float(k), np.full(shape, np.nan))
    for k in range(blank_ticks, blank_ticks + 50):
        value = rng.normal(size=shape)
        value[0, 0] = np.nan  # a GPU that stays silent
        blank.add(float(k), value)
        nans.add(float(k), value)
    (t1, v1), (t2, v2) = blank.view(), nans.view()
    assert blank.width_s == nans.width_s
    np.testing.assert_array_equal(t1, t2)
    np.testing.assert_array_equal(v1, v2)  # NaN where nothing was measured, in both


@pytest.mark.parametrize("dtype", [np.float64, np.uint64])
def test_a_blank_push_reads_as_an_empty_push_and_makes_no_storage(dtype: type) -> None:
    """``push_blank(t)`` (a fleet's GPUs before any was read) reads back as ``push(t, empty)`` (NaN, or
    0 for an integer ring) wherever it lands: in a ring that never held a value (no storage made until
    one is read), and in a slot that held a value a lap before."""
    empty = np.nan if dtype is np.float64 else 0
    shape = (4, 2)
    blank = RecentRing(5, shape, dtype)
    pushed = RecentRing(5, shape, dtype)
    for t in range(7):
        blank.push_blank(float(t))
        pushed.push(float(t), np.full(shape, empty, dtype))
    assert not blank.has_storage  # 7 blanks: times only
    assert len(blank) == len(pushed) == 5
    rng = np.random.default_rng(3)
    for t in range(7, 16):  # values, then blanks over the slots they filled
        if t % 3:
            value: np.ndarray = rng.integers(1, 100, shape).astype(dtype)
            blank.push(float(t), value)
            pushed.push(float(t), value)
        else:
            blank.push_blank(float(t))
            pushed.push(float(t), np.full(shape, empty, dtype))
    for ring_a, ring_b in ((blank, pushed), (blank.columns(slice(1, 3)), pushed.columns(slice(1, 3)))):
        (ta, va), (tb, vb) = ring_a.view(), ring_b.view()
        np.testing.assert_array_equal(ta, tb)
        np.testing.assert_array_equal(va, vb)
    assert blank.has_storage


def test_the_columns_of_a_ring_with_no_storage_read_as_empty() -> None:
    ring = RecentRing(4, (6, 3))
    for t in range(3):
        ring.push_blank(float(t))
    view = ring.columns(slice(2, 4))
    assert view.value_shape == (2, 3)
    times, values = view.view()
    assert times.tolist() == [0.0, 1.0, 2.0]
    assert values.shape == (3, 2, 3)
    assert np.isnan(values).all()
    assert not ring.has_storage  # reading the view made the view's, not the ring's


@pytest.mark.parametrize("dtype", [np.float64, np.int64, np.uint64])
def test_pushes_of_nothing_but_empties_make_no_storage_and_read_as_pushed(dtype: type) -> None:
    """A ring pushed only empties (NaN; 0 in an integer ring: a fleet whose exporters count no samples,
    GPUs that never throttled) holds no storage, reads as what was pushed, and makes its storage at the
    first other value, every slot read as before."""
    empty = np.nan if dtype is np.float64 else 0
    shape = (3, 2)
    ring = RecentRing(4, shape, dtype)
    for t in range(6):
        ring.push(float(t), np.full(shape, empty, dtype))
    assert not ring.has_storage
    times, values = ring.view()
    assert times.tolist() == [2.0, 3.0, 4.0, 5.0]
    assert values.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(values, np.full((4, *shape), empty, dtype))
    slot = ring.slot_at_or_before(3.5)
    assert slot is not None
    np.testing.assert_array_equal(ring.values[slot], np.full(shape, empty, dtype))
    value: np.ndarray = np.arange(6, dtype=dtype).reshape(shape) + 1
    ring.push(6.0, value)
    assert ring.has_storage
    times, values = ring.view()
    assert times.tolist() == [3.0, 4.0, 5.0, 6.0]
    np.testing.assert_array_equal(values[:3], np.full((3, *shape), empty, dtype))
    np.testing.assert_array_equal(values[3], value)


def test_a_ring_with_no_storage_cannot_be_written_through_its_values() -> None:
    ring = RecentRing(3, (2,))
    ring.push_blank(0.0)
    with pytest.raises(ValueError, match="read-only"):
        ring.values[0] = 1.0
    assert not ring.has_storage


@pytest.mark.parametrize("samples_a_point", [65_535, 65_536, 140_000])
def test_mean_counts_past_what_uint16_holds_keep_every_mean_exact(samples_a_point: int) -> None:
    """A mean's counts start as uint16 and become float32 before a point holds more samples than uint16
    counts: the means equal the raw samples' own, NaN samples left out of the count."""
    series = DownsampledSeries(4, (2,), 1.0, "mean")
    rng = np.random.default_rng(samples_a_point)
    ticks = 2 * samples_a_point  # two points' worth at width 1 s: halvings until each point is that wide
    values = rng.integers(0, 1000, (ticks, 2)).astype(np.float64)
    values[rng.random((ticks, 2)) < 0.25] = np.nan
    for t in range(ticks):
        series.add(float(t), values[t])
    times, means = series.view()
    width = series.width_s
    assert width >= samples_a_point / 2
    for k, t in enumerate(times.tolist()):
        point = values[int(t // width) * int(width) : int(t) + 1]
        np.testing.assert_array_equal(means[k], np.nanmean(point, axis=0))
