"""GPU energy counters written as float differences from the previous batch: the older form, read only.

A cumulative counter (``energy_j``: ~4e8 J on a GPU that has run for weeks, to the millijoule) is a fresh
12-digit number in every batch for every GPU; zstd cannot shrink it. ``.zst`` recordings written before the
GPU batches' columns became whole numbers (:mod:`tokenwatch.recording.gpu_int_columns`, where the counter is
one more integer column, in millijoules, its differences exact whatever their size) carry ``energy_j_delta``
in place of ``energy_j`` wherever ``round(previous + delta, 3)`` gave the value read back bit for bit, and
``energy_base_t`` names the batch the difference is from, so a reader that lost that batch (damage) shows the
energy as unknown rather than a wrong figure. This module reads them as they always read. A chain never
crosses a zstd frame.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

ABSOLUTE_KEY = "energy_j"
DELTA_KEY = "energy_j_delta"
BASE_T_KEY = "energy_base_t"
_DECIMALS = 3  # millijoules: NVML's and DCGM's unit


class EnergyDeltaReader:
    """The reader's side: turns ``energy_j_delta`` back into ``energy_j`` (in place) from the bases kept."""

    __slots__ = ("_last",)

    def __init__(self) -> None:
        self._last: dict[tuple[tuple[Any, ...], tuple[Any, ...]], tuple[float, np.ndarray]] = {}

    def new_frame(self) -> None:
        self._last.clear()

    def restore(self, record: Mapping[str, Any]) -> Mapping[str, Any]:
        columns = record.get("m")
        if not isinstance(columns, dict) or (ABSOLUTE_KEY not in columns and DELTA_KEY not in columns):
            return record
        try:
            layout = (tuple(record["node_index"]), tuple(record["gpu"]))
            t = float(record["t"])
        except (KeyError, TypeError, ValueError):
            return record  # the batch's own decoding says what is wrong with it
        if DELTA_KEY in columns:
            delta = np.array(columns.pop(DELTA_KEY), dtype=np.float64)
            previous = self._last.get(layout)
            if previous is None or previous[0] != record.get(BASE_T_KEY) or previous[1].shape != delta.shape:
                # The batch it counts from was lost (damage): unknown, never a wrong counter. The base kept
                # stays, so after a span appended twice the next batch counts from it again.
                columns[ABSOLUTE_KEY] = np.full(delta.shape, np.nan)
                return record
            energy = np.round(previous[1] + delta, _DECIMALS)
            columns[ABSOLUTE_KEY] = energy
        else:
            try:
                energy = np.array(columns[ABSOLUTE_KEY], dtype=np.float64)
            except (TypeError, ValueError):
                return record
        self._last[layout] = (t, energy)
        return record
