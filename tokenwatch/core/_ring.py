"""Bounded time series: a full-resolution recent ring and a whole-run series that downsamples.

Memory never grows with run length: :class:`RecentRing` keeps the last ``capacity`` points;
:class:`DownsampledSeries` keeps the whole run in at most ``capacity`` points by merging adjacent
pairs (and doubling the point width) each time it fills.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from tokenwatch.base.events import FloatArray

_COUNT_MAX = int(np.iinfo(np.uint16).max)  # samples a point's uint16 counts hold


class RecentRing:
    """The last ``capacity`` samples of a fixed-shape value, with their times.

    Values are float64 (NaN = none) unless ``dtype`` says otherwise (an integer ring starts at 0).
    Times are written twice (at i and i + capacity) so the newest ``capacity`` of them are always one
    contiguous, sorted slice: finding "the sample at or before t" is one binary search, no reordering.

    The values' storage is made when a value other than the empty one is first pushed: a ring that only
    ever measured nothing (:meth:`push_blank`, or a push of nothing but empties: a fleet's GPUs before
    any was read, the engines' queues of a fleet whose sources report none, the sample counters of a
    fleet whose exporters count none, GPUs that never throttled) holds no memory for them, and reads as
    empties. At 18,000 nodes those rings were ~180 MB of NaN made at the run's start, and a fleet's
    sample counters and throttle reasons another 44 MB of zeros once its nodes were read.
    """

    __slots__ = ("_dtype", "_next", "_size", "_times2", "_values", "capacity", "times", "value_shape")

    def __init__(self, capacity: int, shape: tuple[int, ...], dtype: type = np.float64) -> None:
        self.capacity = capacity
        self.times: FloatArray = np.full(capacity, np.nan)
        self._times2: FloatArray = np.full(2 * capacity, np.nan)
        self._dtype: np.dtype = np.dtype(dtype)
        self.value_shape: tuple[int, ...] = shape  # one sample's
        self._values: np.ndarray | None = None
        self._next = 0
        self._size = 0

    @property
    def has_storage(self) -> bool:
        """Whether the values' storage was made (a value other than the empty one pushed)."""
        return self._values is not None

    @property
    def values(self) -> np.ndarray:
        """(capacity, *value_shape) values, indexed by slot, for reading; empty (NaN, or 0 for an integer
        ring) where nothing was measured. A ring that holds no storage reads as a read-only array of
        empties that takes no memory (one element seen at every index)."""
        if self._values is None:
            return np.broadcast_to(np.array(self._empty(), self._dtype), (self.capacity, *self.value_shape))
        return self._values

    def _empty(self) -> float:
        return np.nan if np.issubdtype(self._dtype, np.floating) else 0

    def _storage(self) -> np.ndarray:
        if self._values is None:
            self._values = np.full((self.capacity, *self.value_shape), self._empty(), dtype=self._dtype)
        return self._values

    def __len__(self) -> int:
        return self._size

    def push(self, t: float, value: np.ndarray | float) -> None:
        """The sample ``value`` at ``t``; while the ring holds no storage, one of nothing but empties is
        :meth:`push_blank` (one pass over the value to tell)."""
        if self._values is None and self._all_empty(value):
            self.push_blank(t)
            return
        self._storage()[self._advance(t)] = value

    def _all_empty(self, value: np.ndarray | float) -> bool:
        if np.issubdtype(self._dtype, np.floating):
            return bool(np.isnan(value).all())
        return not np.any(value)

    def push_blank(self, t: float) -> None:
        """A sample that measured nothing at ``t`` (NaN, or 0 for an integer ring): what ``push(t, NaN)``
        does, without making the storage while nothing else was pushed."""
        i = self._advance(t)
        if self._values is not None:
            self._values[i] = np.nan if np.issubdtype(self._dtype, np.floating) else 0

    def _advance(self, t: float) -> int:
        """The slot the sample at ``t`` goes in, its time written."""
        i = self._next
        self.times[i] = t
        self._times2[i] = self._times2[i + self.capacity] = t
        self._next = (i + 1) % self.capacity
        self._size = min(self._size + 1, self.capacity)
        return i

    def slot_at_or_before(self, t: float) -> int | None:
        """Storage index of the newest sample taken at or before ``t`` (None when there is none).

        Rings pushed in lockstep share slots, so one search serves all of them.
        """
        start = self._next - self._size + self.capacity
        window = self._times2[start : start + self._size]
        pos = int(np.searchsorted(window, t, side="right")) - 1
        return None if pos < 0 else (start + pos) % self.capacity

    def slots_at_or_before(self, ts: FloatArray) -> np.ndarray:
        """Storage indices of the newest samples taken at or before each of ``ts`` (sorted ascending),
        each once, oldest first; times before the oldest sample are dropped."""
        start = self._next - self._size + self.capacity
        window = self._times2[start : start + self._size]
        pos = np.unique(np.searchsorted(window, ts, side="right") - 1)
        return (start + pos[pos >= 0]) % self.capacity

    def oldest_slot(self) -> int | None:
        return (self._next - self._size) % self.capacity if self._size else None

    def _order(self, last: int | None) -> np.ndarray:
        n = self._size if last is None else min(last, self._size)
        return (np.arange(self._next - n, self._next)) % self.capacity

    def ordered_slots(self) -> np.ndarray:
        """The storage index of every sample, oldest first (rings pushed in lockstep share them)."""
        return self._order(None)

    def view(self, last: int | None = None) -> tuple[FloatArray, FloatArray]:
        """Copies of (times, values), oldest first; ``last`` limits to the newest points."""
        order = self._order(last)
        return self.times[order], self.values[order]

    def column(self, index: tuple[int, ...] | int, last: int | None = None) -> tuple[FloatArray, FloatArray]:
        """(times, values[:, index]) without copying the other columns."""
        order = self._order(last)
        return self.times[order], self.values[(order, *np.atleast_1d(index))]

    def columns(self, index: int | slice) -> RecentRing:
        """The same ring seen through ``values[:, index]`` (one rack's nodes): shares the storage, so it
        is for reading while the ring stands still (building a snapshot), never for pushing."""
        view = RecentRing.__new__(RecentRing)
        view.capacity, view.times, view._times2 = self.capacity, self.times, self._times2
        view._dtype = self._dtype
        # A ring with no storage yet holds nothing but empties: so does its view.
        view._values = None if self._values is None else self._values[:, index]
        view.value_shape = np.empty((0, *self.value_shape), self._dtype)[:, index].shape[1:]
        view._next, view._size = self._next, self._size
        return view

    def oldest(self) -> tuple[float, FloatArray] | None:
        i = self.oldest_slot()
        return None if i is None else (float(self.times[i]), self.values[i])

    def value_at_or_before(self, t: float) -> tuple[float, FloatArray] | None:
        """The newest sample taken at or before ``t`` (None when there is none)."""
        i = self.slot_at_or_before(t)
        return None if i is None else (float(self.times[i]), self.values[i])


class DownsampledSeries:
    """The whole run in at most ``capacity`` points of width ``width_s`` (doubling when full).

    ``mode="mean"`` averages the samples in a point (NaN ignored); ``mode="last"`` keeps the
    newest, which is what cumulative counters need so rates can be taken between points.

    A mean's per-element sample counts are uint16 while no point can hold more than 65,535 samples, then
    float32 (exact to 16.7 M samples a point); a "last" series keeps none (a filled point holds its value
    whole). At 4,608 GPUs float32 counts were a quarter of the core's bytes, restored on every replay
    seek; at 72,000 GPUs the uint16 ones are 16 MB less (a point of 1-s ticks holds 65,535 samples once
    it is 18 hours wide).
    """

    __slots__ = ("_adds", "_blank", "_count", "_points", "capacity", "mode", "sums", "times", "width_s")

    def __init__(
        self,
        capacity: int,
        shape: tuple[int, ...],
        base_width_s: float,
        mode: Literal["mean", "last"],
        dtype: type = np.float64,
    ) -> None:
        """``dtype``: a "last" series' values (small integer codes fit in one byte); a mean's are float64."""
        if capacity < 4 or capacity % 2:
            raise ValueError("capacity must be an even number >= 4")
        if mode == "mean" and dtype is not np.float64:
            raise ValueError("a mean series holds float64 sums")
        self.capacity = capacity
        self.mode = mode
        self.width_s = base_width_s
        self.times: FloatArray = np.full(capacity, np.nan)  # time of the newest sample in the point
        self.sums: FloatArray = np.zeros((capacity, *shape), dtype)
        self._count: np.ndarray | None = np.zeros((capacity, *shape), np.uint16) if mode == "mean" else None
        # Samples added to each point: the most any of its elements can count (when counts outgrow uint16).
        self._adds = np.zeros(capacity, np.int64)
        self._points = 0
        self._blank = True  # no value added yet (only times): halving then merges the times alone

    def add_blank(self, t: float) -> None:
        """A sample that measured nothing (NaN everywhere) at ``t``: what ``add(t, all-NaN)`` does to a
        mean series, without reading a value (a fleet's 72,000 GPUs never read in its backfill: 432,000
        NaNs a tick)."""
        assert self._count is not None, "a blank sample is a mean series' (a last series keeps values)"
        k = self._point(t)
        self._points = max(self._points, k + 1)
        self.times[k] = t

    def _point(self, t: float) -> int:
        """The point ``t`` falls in, halving the series until it fits."""
        k = int(t // self.width_s)
        while k >= self.capacity:
            self._halve()
            k = int(t // self.width_s)
        return k

    def add(self, t: float, value: FloatArray | float) -> None:
        k = self._point(t)
        self._blank = False
        # Points between the last filled one and k stay empty (NaN time) and are skipped by view().
        self._points = max(self._points, k + 1)
        self.times[k] = t
        if self._count is None:  # "last"
            self.sums[k] = value
        else:
            v = np.asarray(value, dtype=np.float64)
            ok = ~np.isnan(v)
            self.sums[k] += np.where(ok, v, 0.0)
            self._adds[k] += 1
            self._count_up_to(int(self._adds[k]))
            assert self._count is not None
            self._count[k] += ok

    def _count_up_to(self, most: int) -> None:
        """Counts of up to ``most`` samples a point fit their dtype: past uint16's, float32 from now on."""
        if self._count is not None and most > _COUNT_MAX and self._count.dtype != np.float32:
            self._count = self._count.astype(np.float32)

    def _halve(self) -> None:
        half = self.capacity // 2
        a, b = slice(0, None, 2), slice(1, None, 2)
        times = np.fmax(self.times[a], self.times[b])
        if self._blank:  # sums and counts all zero: they stay so
            pass
        elif self._count is None:  # "last"
            newer_b = ~np.isnan(self.times[b])
            shape = (half,) + (1,) * (self.sums.ndim - 1)
            sums = np.where(newer_b.reshape(shape), self.sums[b], self.sums[a])
        else:
            sums = self.sums[a] + self.sums[b]
            self._count_up_to(int((self._adds[a] + self._adds[b]).max()))
            count = self._count[a] + self._count[b]
            self._count[:half], self._count[half:] = count, 0
        adds = self._adds[a] + self._adds[b]
        self._adds[:half], self._adds[half:] = adds, 0
        self.times[:half], self.times[half:] = times, np.nan
        if not self._blank:
            self.sums[:half], self.sums[half:] = sums, 0.0
        self.width_s *= 2
        self._points = (self._points + 1) // 2

    def columns(self, index: int | slice) -> DownsampledSeries:
        """The same series seen through ``[:, index]`` of each point (one rack's nodes, or one rack's
        row): shares the storage, so it is for reading while the series stands still, never for adding."""
        view = DownsampledSeries.__new__(DownsampledSeries)
        view.capacity, view.mode, view.width_s, view.times = (
            self.capacity,
            self.mode,
            self.width_s,
            self.times,
        )
        view.sums = self.sums[:, index]
        view._count = None if self._count is None else self._count[:, index]
        view._adds = self._adds
        view._points = self._points
        return view

    def view(self) -> tuple[FloatArray, FloatArray]:
        """(times, values) of the filled points, oldest first; values are means or last samples."""
        filled = ~np.isnan(self.times[: self._points])
        if self._count is None:  # "last": a filled point holds its value
            return self.times[: self._points][filled], self.sums[: self._points][filled]
        with np.errstate(invalid="ignore", divide="ignore"):
            values = self.sums[: self._points][filled] / self._count[: self._points][filled]
        return self.times[: self._points][filled], values
