"""Checks a record's values pass before they become an event: types, shapes and bounds.

A value that does not fit raises :class:`CodecError`, which readers turn into a skipped line with a
warning. The bounds keep damage and hostility (1e9 GPUs, a counter past int64) away from the core's loops
and allocations.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from tokenwatch.base.events import MAX_RUN_GPUS, MAX_RUN_TIME_S

# Bounds on what one record may hold (the run's size and clock are bounded in tokenwatch.base.events). A value
# beyond them is damage or hostility, never a reading, and would otherwise reach loops and allocations.
MAX_COUNTER = 2**63 - 1  # counters are int64 in the core
MAX_GPU_VALUE = 1e9  # above every GPU metric's plausible range (MiB of HBM are the largest)
MAX_LATENCY_S = 1e6
MAX_NAME_CHARS = 1024  # run, node, source names
MAX_TEXT_CHARS = 65_536  # log lines, notices, reasons


class CodecError(ValueError):
    """A record that is not a valid event; the message says why."""


def record_time(r: Mapping[str, Any]) -> float:
    t = r["t"]
    if isinstance(t, bool) or not isinstance(t, int | float) or not math.isfinite(t) or t < 0:
        raise CodecError(f"bad time {t!r}")
    if t > MAX_RUN_TIME_S:
        raise CodecError(f"run time {t:g} s is beyond the limit of {MAX_RUN_TIME_S:,.0f} s (366 days)")
    return float(t)


def checked_text(value: Any, what: str, limit: int = MAX_TEXT_CHARS) -> str:
    if not isinstance(value, str):
        raise CodecError(f"{what} must be text")
    if len(value) > limit:
        raise CodecError(f"{what} is longer than {limit:,} characters")
    return value


def checked_name(value: Any, what: str) -> str:
    return checked_text(value, what, MAX_NAME_CHARS)


def optional_int(value: Any, what: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise CodecError(f"{what} must be a whole number")
    return value


def checked_count(value: Any, what: str) -> int | None:
    """A counter: a whole number in 0..2^63-1 (or missing)."""
    number = optional_int(value, what)
    if number is not None and not 0 <= number <= MAX_COUNTER:
        raise CodecError(f"{what} must be a whole number from 0 to 2^63-1")
    return number


def number_or_nan(value: Any) -> float:
    if value is None:
        return math.nan
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise CodecError(f"expected a number, got {value!r}")
    return float(value)


def gpu_value(value: Any, metric: str) -> float:
    number = number_or_nan(value)
    if not abs(number) <= MAX_GPU_VALUE and not math.isnan(number):
        raise CodecError(f"{metric} {number:g} is beyond any reading (|value| <= {MAX_GPU_VALUE:g})")
    return number


def check_gpu_block(block: np.ndarray) -> None:
    if (np.abs(block) > MAX_GPU_VALUE).any():  # NaN (no reading) compares False: it passes
        raise CodecError(f"gpu_batch holds a value beyond any reading (|value| <= {MAX_GPU_VALUE:g})")


def check_counts(arr: np.ndarray, what: str) -> np.ndarray:
    if len(arr) and arr.min() < 0:
        raise CodecError(f"{what} must not be negative")
    return arr


class IndexArrays:
    """Batches repeat the same node/GPU index lists tick after tick: the converted array of the last
    list of each kind is handed out again (read-only, so sharing it is safe) when the next list equals
    it. Faster, and the core recognises repeated index arrays by identity (its batch fast paths)."""

    __slots__ = ("_last",)

    def __init__(self) -> None:
        self._last: dict[str, tuple[list[Any], np.ndarray]] = {}

    def array(self, value: Any, what: str) -> np.ndarray:
        """``value`` as node or GPU numbers: whole numbers from 0 to below :data:`MAX_RUN_GPUS` (no run has
        more nodes or GPUs), so 1e9 or -1 is refused here, with the line, not passed on to the core."""
        cached = self._last.get(what)
        if cached is not None and cached[0] == value:
            return cached[1]
        if not isinstance(value, list):
            raise CodecError(f"{what} must be a list")
        try:
            found: np.ndarray = np.array(value)  # its own type: 1e9 is a float, not cast to a number
        except (TypeError, ValueError):
            raise CodecError(f"{what} holds a value that is not a number") from None
        if found.ndim != 1 or (len(found) and found.dtype.kind not in "iu"):
            raise CodecError(f"{what} must be a flat list of whole numbers")
        arr = found.astype(np.int64)
        if len(arr) and not (arr.min() >= 0 and arr.max() < MAX_RUN_GPUS):
            raise CodecError(f"{what} must be numbers from 0 to {MAX_RUN_GPUS - 1:,}")
        arr.flags.writeable = False
        self._last[what] = (value, arr)
        return arr


def number_array(value: Any, dtype: type, what: str) -> np.ndarray:
    if not isinstance(value, list):
        raise CodecError(f"{what} must be a list")
    try:
        arr: np.ndarray = np.array(value, dtype=dtype)
    except (TypeError, ValueError, OverflowError):
        raise CodecError(f"{what} holds a value that is not a number") from None
    if arr.ndim != 1:
        raise CodecError(f"{what} must be a flat list")
    return arr
