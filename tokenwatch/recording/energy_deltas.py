"""GPU energy counters written as differences from the previous batch: recordings 1.5x smaller, exact.

A cumulative counter (``energy_j``: ~4e8 J on a GPU that has run for weeks, to the millijoule) is a
fresh 12-digit number in every batch for every GPU; zstd cannot shrink it, and it was a third of a
recording's bytes. The difference from the same GPU's previous batch (~1,400 J at 1 s) is a few
digits that repeat. A ``.zst`` recording's GPU batch therefore carries ``energy_j_delta`` in place of
``energy_j`` when, and only when, the counter comes back bit for bit: ``round(previous + delta, 3)``
equals the value read (a counter with more than millijoule digits, a first batch, a gap in the
counter, or a new set of GPUs is written whole, as before). ``energy_base_t`` names the batch the
difference is from, so a reader that lost that batch (damage) shows the energy as unknown rather
than a wrong figure.

A chain never crosses a zstd frame: the writer starts afresh with each frame, so a reader can begin
at any frame (a replay's seek) and a damaged frame costs no more than itself. Plain ``.jsonl``
recordings keep whole values (they are for reading, not for size).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from tokenwatch.base.events import GpuBatch

ABSOLUTE_KEY = "energy_j"
DELTA_KEY = "energy_j_delta"
BASE_T_KEY = "energy_base_t"
_DECIMALS = 3  # millijoules: NVML's and DCGM's unit


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    equal = a == b
    if equal.all():  # the usual case: no NaN, nothing more to look at
        return True
    return bool(np.all(equal | (np.isnan(a) & np.isnan(b))))


class EnergyDeltaWriter:
    """The writer's side: the last counters of each set of GPU rows, and the record rewritten."""

    __slots__ = ("_last",)

    def __init__(self) -> None:
        self._last: dict[tuple[bytes, bytes], tuple[float, np.ndarray]] = {}

    def new_frame(self) -> None:
        self._last.clear()

    def rewrite(self, event: GpuBatch, record: dict[str, Any]) -> dict[str, Any]:
        """``record`` (the batch's encoding) with its energy column as differences where exact."""
        columns = record["m"]
        energy = columns.get(ABSOLUTE_KEY)
        if energy is None:
            return record
        layout = (event.node_index.tobytes(), event.gpu.tobytes())
        previous = self._last.get(layout)
        self._last[layout] = (event.t, energy)
        if previous is None:
            return record
        base_t, base = previous
        delta = (energy - base).round(_DECIMALS)
        if not _same((base + delta).round(_DECIMALS), energy):
            return record
        out = {key: value for key, value in record.items() if key != "m" and key != "throttle_reasons"}
        out[BASE_T_KEY] = base_t
        # The difference takes the counter's place among the columns.
        out["m"] = {(DELTA_KEY if key == ABSOLUTE_KEY else key): value for key, value in columns.items()}
        out["m"][DELTA_KEY] = delta
        out["throttle_reasons"] = record["throttle_reasons"]  # stays last: the fast reader relies on it
        return out


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
