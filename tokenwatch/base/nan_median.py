"""The median of each column with NaN left out, as ``np.nanmedian(a, axis=0)`` gives it, bit for bit.

numpy takes the median of a small 2-D array with gaps through a masked array: a node's pace measured at
every verdict tick (a median over up to 360 blocks per node) spent most of its time there, and an hour's
history of 72 nodes is hundreds of those ticks before a watch that attaches mid-run shows its first frame.
A plain sort (NaN sorts last) and the middle one or two of each column's values give the same numbers.
"""

from __future__ import annotations

import numpy as np

from tokenwatch.base.events import FloatArray


def nan_median_columns(values: FloatArray) -> FloatArray:
    """Per column of the 2-D ``values``: the median of its non-NaN values (the middle one, or the mean of
    the middle two), NaN for a column with none, without numpy's all-NaN warning."""
    if not len(values):
        return np.full(values.shape[1], np.nan)
    ordered = np.sort(values, axis=0)
    counts = np.count_nonzero(~np.isnan(values), axis=0)
    high = counts // 2
    low = np.where(counts % 2 == 1, high, high - 1)  # -1 in an empty column: read, then replaced by NaN
    columns = np.arange(values.shape[1])
    middle = (ordered[low, columns] + ordered[high, columns]) / 2.0
    return np.where(counts > 0, middle, np.nan)
