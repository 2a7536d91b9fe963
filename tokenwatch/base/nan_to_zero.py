"""``np.nan_to_num`` of a float array (NaN to 0, infinities to the largest finite floats), bit for bit, at
less than half its cost: numpy's function checks its input's type and copies before it replaces, ~17 µs
for 18 nodes, and a verdict tick asks it for every rack (a fleet's 64 at a time)."""

from __future__ import annotations

import numpy as np

from tokenwatch.base.events import FloatArray

_LARGEST = float(np.finfo(np.float64).max)


def nan_to_zero(values: FloatArray) -> FloatArray:
    """``np.nan_to_num(values)`` for a float64 array: NaN as 0.0, +inf / -inf as the largest finite float
    of that sign; every other value (-0.0 included) as it is."""
    out: FloatArray = np.minimum(np.maximum(np.where(np.isnan(values), 0.0, values), -_LARGEST), _LARGEST)
    return out
