"""GPU batch columns written as whole numbers, most as differences from the GPU's previous batch: exact.

A GPU batch was four fifths of an Offline recording and a third of a Server one, each column a list of
floats (``2007.0``, ``32.7``). The readings are decimals with few digits: nvidia-smi and dcgm report clocks,
temperatures, utilisation and memory as integers and power to 0.01 W, the simulator to 0.1. A ``.zst``
recording therefore writes each such column as integers ``k`` with ``value = k / 10**scale`` (scale 0..3,
the smallest that gives every value back bit for bit: IEEE division is correctly rounded, so ``k / 10**s``
is the float nearest ``k``'s decimal, which the writer checks equals the reading), and where the batch before
it of the same GPUs (within the zstd frame) had the same columns, this one at the same scale, as the
difference from those integers: a temperature that moves 0.1 a second is a run of small numbers zstd
shrinks well, where the value itself (``32.7``) is not.

The energy counter's difference (:mod:`tokenwatch.recording.energy_deltas`) is nearly the power times the
time since its base: it is written as millijoules less ``rint(power_w * dt * 1000)``, the power read back
from the same record (the simulator's counters then cost nothing; a real counter's residual is the power's
change within the interval). The record's ``gpu_ints`` says how each listed column is written (its code:
``s`` whole at scale ``s``, ``10 + s`` differences at scale ``s``, :data:`ENERGY_FROM_POWER` the energy's
residual); ``gpu_base_t`` names the batch the differences are from, so a reader that lost it skips the line
with a warning rather than read a wrong value. A column holding NaN, or values no scale gives back exactly,
is written as floats as before, and so is every column of a plain ``.jsonl`` recording.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import numpy as np

from tokenwatch.base.events import GpuBatch
from tokenwatch.recording.energy_deltas import BASE_T_KEY as ENERGY_BASE_T_KEY
from tokenwatch.recording.energy_deltas import DELTA_KEY as ENERGY_DELTA_KEY

CODES_KEY = "gpu_ints"
BASE_T_KEY = "gpu_base_t"
MAX_SCALE = 3  # millijoules, milliwatts: no source reports finer
DIFFERENCE = 10  # code = DIFFERENCE + scale: differences from the base's integers
ENERGY_FROM_POWER = 23  # the energy's difference in millijoules, less the power's over the interval
_POWERS = 10.0 ** np.arange(MAX_SCALE + 1)
_EXACT_LIMIT = 2.0**53  # integers beyond this are not all floats


class GpuBaseLostError(ValueError):
    """A batch of differences that cannot be read (its base lost to damage, or malformed): the line is
    skipped with this message."""


# Per set of GPU rows: the run time of the last batch and its integer columns, {metric: (scale, ints)}.
_Bases = dict[tuple[Any, ...], tuple[Any, dict[str, tuple[int, np.ndarray]]]]


# The writer's base per set of GPU rows: the batch's run time, its columns' names, scales and integers.
_WriterBase = tuple[float, tuple[str, ...], np.ndarray, np.ndarray]


class GpuIntColumnWriter:
    """The writer's side: the last integer columns of each set of GPU rows, and the record rewritten.

    Every column is scaled in one numpy pass over the batch (a GPU batch is written every tick: a pass per
    column cost the recorder a third more CPU)."""

    __slots__ = ("_last",)

    def __init__(self) -> None:
        self._last: dict[tuple[bytes, bytes], _WriterBase] = {}

    def new_frame(self) -> None:
        self._last.clear()

    def rewrite(self, event: GpuBatch, record: dict[str, Any]) -> dict[str, Any]:
        """``record`` (the batch's encoding, after the energy's differences) with its columns as integers
        wherever they come back exactly."""
        columns: dict[str, Any] = record["m"]
        names = tuple(name for name in columns if name != ENERGY_DELTA_KEY)
        if not names or not len(event.gpu):
            return record
        layout = (event.node_index.tobytes(), event.gpu.tobytes())
        previous = self._last.get(layout)
        block = np.array([columns[name] for name in names], dtype=np.float64)
        same_columns = previous is not None and previous[1] == names and previous[3].shape == block.shape
        kept = _at_scales(block, previous[2]) if previous is not None and same_columns else None
        if kept is not None and previous is not None:  # the usual batch: every column as the one before
            scales, ints = previous[2], kept
            self._last[layout] = (event.t, names, scales, ints)
            differ = scales >= 0
            written = ints - previous[3]
        elif previous is not None and same_columns:
            scales, ints = _scaled(block)
            self._last[layout] = (event.t, names, scales, ints)
            differ = (scales == previous[2]) & (scales >= 0)
            written = np.where(differ[:, None], ints - previous[3], ints)
        else:
            scales, ints = _scaled(block)
            self._last[layout] = (event.t, names, scales, ints)
            differ = np.zeros(len(names), bool)
            written = ints
        codes = dict(_codes(names, scales.tobytes(), differ.tobytes()))
        out_columns: dict[str, Any] = {
            name: written[row] if name in codes else columns[name] for row, name in enumerate(names)
        }
        if ENERGY_DELTA_KEY in columns:
            residual = _energy_residual(record, columns)
            if residual is None:
                out_columns[ENERGY_DELTA_KEY] = columns[ENERGY_DELTA_KEY]
            else:
                codes[ENERGY_DELTA_KEY] = ENERGY_FROM_POWER
                out_columns[ENERGY_DELTA_KEY] = residual
        if not codes:
            return record
        out = {key: value for key, value in record.items() if key != "m" and key != "throttle_reasons"}
        out[CODES_KEY] = codes
        if differ.any():
            assert previous is not None
            out[BASE_T_KEY] = previous[0]
        out["m"] = out_columns
        out["throttle_reasons"] = record["throttle_reasons"]  # stays last: the fast reader relies on it
        return out


@functools.lru_cache(maxsize=256)
def _codes(names: tuple[str, ...], scales: bytes, differ: bytes) -> tuple[tuple[str, int], ...]:
    """The record's codes for these columns (batches repeat the same few: worked out once each)."""
    scale_of = np.frombuffer(scales, np.int64)
    differs = np.frombuffer(differ, bool)
    return tuple(
        (name, int(scale_of[row]) + (DIFFERENCE if differs[row] else 0))
        for row, name in enumerate(names)
        if scale_of[row] >= 0
    )


def _at_scales(block: np.ndarray, scales: np.ndarray) -> np.ndarray | None:
    """The rows as integers at the scales of the batch before, if every row has one and gives every value
    back bit for bit there (a scale kept keeps the differences going; one pass where a search is four)."""
    if (scales < 0).any():
        return None
    powers = _POWERS[scales][:, None]
    with np.errstate(invalid="ignore"):
        scaled = np.rint(block * powers)
        if not ((scaled / powers == block).all() and np.abs(scaled).max() < _EXACT_LIMIT):
            return None
    ints: np.ndarray = scaled.astype(np.int64)
    return ints


def _scaled(block: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's smallest scale giving every value back bit for bit (-1: none does, or a NaN), and the
    rows as integers at their scales (meaningless where the scale is -1)."""
    with np.errstate(invalid="ignore"):
        scaled = np.rint(block[None, :, :] * _POWERS[:, None, None])  # (scale, column, GPU)
        exact = (scaled / _POWERS[:, None, None] == block[None, :, :]).all(axis=2)
        exact &= (np.abs(scaled) < _EXACT_LIMIT).all(axis=2)
        scales = np.where(exact.any(axis=0), exact.argmax(axis=0), -1).astype(np.int64)
        rows = np.arange(len(block))
        ints = scaled[np.maximum(scales, 0), rows].astype(np.int64)
    return scales, ints


def _predicted_mj(power: np.ndarray, dt: float) -> np.ndarray:
    """The energy the power would have used over ``dt`` seconds, in whole millijoules."""
    return np.rint(power * (dt * 1000.0)).astype(np.int64)


def _energy_residual(record: Mapping[str, Any], columns: Mapping[str, Any]) -> np.ndarray | None:
    """The energy's difference less the power's, in millijoules (None: it would not come back exactly)."""
    base_t = record.get(ENERGY_BASE_T_KEY)
    power = columns.get("power_w")
    delta = columns[ENERGY_DELTA_KEY]
    if base_t is None or not isinstance(power, np.ndarray) or not isinstance(delta, np.ndarray):
        return None
    if power.shape != delta.shape:
        return None
    millijoules = np.rint(delta * 1000.0)
    # NaN compares unequal: a missing power or energy is refused here too.
    if not ((millijoules / 1000.0 == delta).all() and np.isfinite(power).all()):
        return None
    if not np.abs(millijoules).max(initial=0.0) < _EXACT_LIMIT:
        return None
    residual: np.ndarray = millijoules.astype(np.int64) - _predicted_mj(
        power, float(record["t"]) - float(base_t)
    )
    return residual


class GpuIntColumnReader:
    """The reader's side: turns integer columns back into the floats written (in place), from the bases."""

    __slots__ = ("_last",)

    def __init__(self) -> None:
        self._last: _Bases = {}

    def new_frame(self) -> None:
        self._last.clear()

    def restore(self, record: Mapping[str, Any]) -> Mapping[str, Any]:
        """``record`` with its columns as floats. :class:`GpuBaseLostError`: differences whose base is not
        the batch this reader last saw of those GPUs, or codes and columns that do not fit."""
        columns = record.get("m")
        if not isinstance(record, dict) or not isinstance(columns, dict):
            return record
        try:
            layout = (tuple(record["node_index"]), tuple(record["gpu"]))
        except (KeyError, TypeError):
            return record  # the batch's own decoding says what is wrong with it
        codes = record.pop(CODES_KEY, None)
        base_t = record.pop(BASE_T_KEY, None)
        # A batch whose base was lost leaves the base kept as it is: after a span appended twice (cat a b)
        # the next batch counts from it again.
        previous = self._last.get(layout)
        if codes is None:
            self._last[layout] = (record.get("t"), {})
            return record
        if not isinstance(codes, dict):
            raise GpuBaseLostError(f"{CODES_KEY} must map columns to codes")
        coded: dict[str, tuple[int, np.ndarray]] = {}
        for name, code in codes.items():
            if name == ENERGY_DELTA_KEY or name not in columns:
                continue  # the energy after the power; a column not parsed (a reader of some columns)
            ints = _ints(columns[name], name)
            if type(code) is not int or not (0 <= code <= MAX_SCALE or 0 <= code - DIFFERENCE <= MAX_SCALE):
                raise GpuBaseLostError(f"{name} has an unknown code {code!r}")
            scale = code % DIFFERENCE
            if code >= DIFFERENCE:
                base = None if previous is None or previous[0] != base_t else previous[1].get(name)
                if base is None or base[0] != scale or base[1].shape != ints.shape:
                    raise GpuBaseLostError(
                        "its columns are differences from a batch not read here (lost to damage, or "
                        "before where reading began): skipped, not read wrong"
                    )
                ints = base[1] + ints
            coded[name] = (scale, ints)
            columns[name] = ints / _POWERS[scale]
        if codes.get(ENERGY_DELTA_KEY) == ENERGY_FROM_POWER and ENERGY_DELTA_KEY in columns:
            columns[ENERGY_DELTA_KEY] = _energy_delta(record, columns)
        self._last[layout] = (record.get("t"), coded)
        return record


def _ints(value: Any, name: str) -> np.ndarray:
    if not isinstance(value, list):
        raise GpuBaseLostError(f"{name} must be a list of whole numbers")
    try:
        found = np.array(value)  # its own type: 1.5 stays a float, not cut to 1
    except (TypeError, ValueError):
        found = np.array([None])
    if found.ndim != 1 or (len(found) and found.dtype.kind not in "iu"):
        raise GpuBaseLostError(f"{name} must be a flat list of whole numbers (in int64)")
    return found.astype(np.int64)


def _energy_delta(record: Mapping[str, Any], columns: Mapping[str, Any]) -> np.ndarray:
    residual = _ints(columns[ENERGY_DELTA_KEY], ENERGY_DELTA_KEY)
    try:  # integers read back above, or floats as written where the power was not whole numbers
        power = np.array(columns.get("power_w"), dtype=np.float64)
    except (TypeError, ValueError):
        power = np.full(0, np.nan)
    base_t = record.get(ENERGY_BASE_T_KEY)
    if power.shape != residual.shape or not np.isfinite(power).all() or base_t is None:
        raise GpuBaseLostError("the energy is written against a power column this batch does not have")
    try:
        dt = float(record["t"]) - float(base_t)
    except (TypeError, ValueError):
        raise GpuBaseLostError("bad energy base time") from None
    millijoules: np.ndarray = (residual + _predicted_mj(power, dt)) / 1000.0
    return millijoules
