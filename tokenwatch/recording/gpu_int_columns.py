"""GPU batch columns written as whole numbers, most as differences from the GPU's previous batch: exact.

A GPU batch was four fifths of an Offline recording and a third of a Server one, each column a list of
floats (``2007.0``, ``32.7``). The readings are decimals with few digits: nvidia-smi and dcgm report clocks,
temperatures, utilisation and memory as integers, power to 0.01 W and energy to the millijoule, the
simulator to 0.1. A ``.zst`` recording therefore writes each such column as integers ``k`` with ``value = k
/ 10**scale`` (scale 0..3, the smallest that gives every value back bit for bit: IEEE division is correctly
rounded, so ``k / 10**s`` is the float nearest ``k``'s decimal, which the writer checks equals the reading).
Where the batch before it of the same GPUs (within the zstd frame) had the column at the same scale, it is
written as the difference from those integers: a temperature that moves 0.1 a second is a run of small
numbers zstd shrinks well, where the value itself (``32.7``) is not. Integers make the difference exact
whatever its size, the energy counter's included (~4e11 mJ on a GPU that has run for weeks).

The energy counter's difference is nearly the power times the time since the base batch: where the power is
a column of whole numbers too it is written less ``rint(power_w * dt * 10**scale)``, the power read back from
the same record (the simulator's counters then cost nothing; a real counter's residual is the power's change
within the interval). The record's ``gpu_ints`` says how each listed column is written (its code: ``s``
whole at scale ``s``, ``10 + s`` differences at scale ``s``, ``20 + s`` the energy's differences less the
power's); ``gpu_base_t`` names the batch the differences are from, so a reader that lost it skips the line
with a warning rather than read a wrong value. A column holding NaN, or values no scale gives back exactly,
is written as floats (NaN as ``null``), and so is every column of a plain ``.jsonl`` recording.

The writer makes the record from the batch's array directly, in a fixed dozen numpy calls whatever its size:
a batch is written every tick, and the recorder must cost no more than writing the floats did (formatting
~900 floats per rack-second was most of that; integers format several times faster).
"""

from __future__ import annotations

import array
import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from tokenwatch.base.events import GPU_METRICS, OPTIONAL_GPU_METRICS, GpuBatch

CODES_KEY = "gpu_ints"
BASE_T_KEY = "gpu_base_t"
MAX_SCALE = 3  # millijoules, milliwatts: no source reports finer
DIFFERENCE = 10  # code = DIFFERENCE + scale: differences from the base's integers
FROM_POWER = 20  # code = FROM_POWER + scale: the energy's differences less the power's over the interval
ENERGY_FROM_POWER = FROM_POWER + 3  # the usual energy code: millijoules
_POWERS = 10.0 ** np.arange(MAX_SCALE + 1)
_EXACT_LIMIT = 2.0**53  # integers beyond this are not all floats
_POWER_ROW = GPU_METRICS.index("power_w")
_ENERGY_ROW = GPU_METRICS.index("energy_j")
_OPTIONAL_ROWS = np.array([i for i, m in enumerate(GPU_METRICS) if m in OPTIONAL_GPU_METRICS])
_FLOATS = -1  # a row's scale where no scale gives its values back: written as floats


_LOST = (
    "its columns are differences from a batch not read here (lost to damage, or before where reading "
    "began): skipped, not read wrong"
)


class GpuBaseLostError(ValueError):
    """A batch of differences that cannot be read (its base lost to damage, or malformed): the line is
    skipped with this message."""


@dataclass(frozen=True, slots=True)
class _Layout:
    """How a batch's record is laid out, worked out once per set of scales: its codes and columns."""

    codes: dict[str, int]
    columns: tuple[tuple[str, int, bool], ...]  # (metric, row in the block, written as integers)


@functools.lru_cache(maxsize=256)
def _layout(present: bytes, scales: bytes, differ: bytes, energy_from_power: bool) -> _Layout:
    metric_of = np.frombuffer(present, np.int64)
    scale_of = np.frombuffer(scales, np.int64)
    differs = np.frombuffer(differ, bool)
    codes: dict[str, int] = {}
    columns = []
    for row, metric in enumerate(metric_of.tolist()):
        name, scale = GPU_METRICS[metric], int(scale_of[row])
        columns.append((name, row, scale >= 0))
        if scale >= 0:
            step = FROM_POWER if metric == _ENERGY_ROW and energy_from_power else DIFFERENCE
            codes[name] = scale + (step if differs[row] else 0)
    return _Layout(codes, tuple(columns))


class _Chain:
    """The writer's last batch of one set of GPU rows, what the next batch's differences count from, and
    how a batch that keeps its scales is written (worked out once per chain, not per batch)."""

    __slots__ = (
        "absent",
        "codes",
        "columns",
        "energy_scale",
        "floats",
        "ints",
        "multipliers",
        "present",
        "rows",
        "scales",
        "t",
        "whole",
    )

    def __init__(self, t: float, present: np.ndarray, scales: np.ndarray, ints: np.ndarray) -> None:
        self.t = t
        self.present = present  # the metrics written (an optional one no GPU of the batch has is left out)
        # ...and those left out, which must stay all NaN for the same layout to hold (a slice where they
        # are the last metrics, as the optional ones are: a view, not a copy, to test).
        absent = np.setdiff1d(np.arange(len(GPU_METRICS)), present)
        tail = (
            len(absent) > 0
            and absent[0] + len(absent) == len(GPU_METRICS)
            and bool((np.diff(absent) == 1).all())
        )
        self.absent: slice | np.ndarray = slice(int(absent[0]), None) if tail else absent
        self.scales = scales  # per metric written: 0..3, or _FLOATS
        self.ints = ints  # (metrics written, GPUs): the values times 10**scale as int64 (junk in floats)
        whole = scales >= 0
        self.whole = whole.tobytes()  # the rows the next batch must find exact at the same scales
        self.floats = not whole.all()  # some row is floats (NaN may be in the block)
        self.multipliers = np.where(whole, _POWERS[np.maximum(scales, 0)], 1.0)[:, None]
        at = {metric: row for row, metric in enumerate(present.tolist()) if whole[row]}
        # The power's and the energy's rows among those written, where both are whole: the energy is then
        # written against the power.
        self.rows = (at[_POWER_ROW], at[_ENERGY_ROW]) if _POWER_ROW in at and _ENERGY_ROW in at else None
        self.energy_scale = int(scales[self.rows[1]]) if self.rows is not None else 0
        # The next batch's layout where it keeps these scales: every whole row as differences.
        shape = _layout(present.tobytes(), scales.tobytes(), self.whole, self.rows is not None)
        self.codes, self.columns = shape.codes, shape.columns

    def next_ints(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """The next batch's integers at these scales (and its block of a row per metric written), if every
        whole row is still exact there, no other row has become so, the integers are exact in a float, and
        the metrics left out are still all NaN: a fixed dozen numpy calls. The float error state (a few
        microseconds to set) only where some row holds floats: NaN may be cast there."""
        block = values.T[self.present]
        if not self.floats:
            return self._ints(block, values)
        with np.errstate(invalid="ignore"):
            return self._ints(block, values)

    def _ints(self, block: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        multipliers = self.multipliers
        scaled = np.rint(block * multipliers)
        # NaN is never exact: a whole row with a value missing fails here, before it is cast.
        if (scaled / multipliers == block).all(axis=1).tobytes() != self.whole:
            return None
        limit = np.abs(scaled[np.frombuffer(self.whole, bool)] if self.floats else scaled)
        if not limit.max(initial=0.0) < _EXACT_LIMIT:
            return None
        if not np.isnan(values[:, self.absent]).all():
            return None
        return scaled.astype(np.int64), block


class GpuIntColumnWriter:
    """The writer's side: the last integer columns of each set of GPU rows, and each batch's record."""

    __slots__ = ("_last",)

    def __init__(self) -> None:
        self._last: dict[tuple[bytes, bytes], _Chain] = {}

    def new_frame(self) -> None:
        self._last.clear()

    def record(self, event: GpuBatch) -> dict[str, Any]:
        """The batch's record: its columns as integers wherever they come back exactly."""
        layout = (event.node_index.tobytes(), event.gpu.tobytes())
        chain = self._last.get(layout)
        found = chain.next_ints(event.values) if chain is not None else None
        if chain is not None and found is not None:  # the usual batch: every row as the batch before
            ints, block = found
            written = ints - chain.ints
            if chain.rows is not None:
                power, energy = chain.rows
                written[energy] -= predicted(block[power], event.t - chain.t, chain.energy_scale)
            out = _head(event, chain.codes, chain.t)
            out["m"] = {name: written[row] if whole else block[row] for name, row, whole in chain.columns}
            chain.t, chain.ints = event.t, ints
        else:
            new, block = _new_chain(event.values, event.t)
            self._last[layout] = new
            out = _first_of_scales(event, new, chain, block)
        out["throttle_reasons"] = event.throttle_reasons  # last: the fast reader relies on it
        return out


def _head(event: GpuBatch, codes: dict[str, int], base_t: float | None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "k": "gpu_batch",
        "t": event.t,
        "node_index": event.node_index,
        "gpu": event.gpu,
        CODES_KEY: codes,
    }
    if base_t is not None:
        out[BASE_T_KEY] = base_t
    return out


def _first_of_scales(
    event: GpuBatch, new: _Chain, previous: _Chain | None, block: np.ndarray
) -> dict[str, Any]:
    """The record of a batch whose scales or columns are not the batch before's: the rows at a scale the
    batch before had as differences, the others whole."""
    differ = np.zeros(len(new.present), bool)
    written, from_power = new.ints, False
    if previous is not None and previous.present.tobytes() == new.present.tobytes():
        differ = (new.scales == previous.scales) & (new.scales >= 0)
        written = np.where(differ[:, None], new.ints - previous.ints, new.ints)
        if new.rows is not None and differ[new.rows[1]]:
            from_power = True
            power, energy = new.rows
            written[energy] -= predicted(block[power], event.t - previous.t, new.energy_scale)
    shape = _layout(new.present.tobytes(), new.scales.tobytes(), differ.tobytes(), from_power)
    out = _head(event, shape.codes, previous.t if previous is not None and differ.any() else None)
    out["m"] = {name: written[row] if whole else block[row] for name, row, whole in shape.columns}
    return out


def predicted(power: np.ndarray, dt: float, scale: int) -> np.ndarray:
    """The energy the power would have used over ``dt`` seconds, in units of 10**-scale J."""
    energy: np.ndarray = np.rint(power * (dt * _POWERS[scale])).astype(np.int64)
    return energy


def _new_chain(values: np.ndarray, t: float) -> tuple[_Chain, np.ndarray]:
    """Each row's smallest scale giving every value back bit for bit, and the rows as integers there."""
    absent = _OPTIONAL_ROWS[np.isnan(values[:, _OPTIONAL_ROWS]).all(axis=0)]
    present = np.setdiff1d(np.arange(len(GPU_METRICS)), absent)
    block = values.T[present]
    with np.errstate(invalid="ignore"):
        scaled = np.rint(block[None, :, :] * _POWERS[:, None, None])  # (scale, row, GPU)
        exact = (scaled / _POWERS[:, None, None] == block[None, :, :]) & (np.abs(scaled) < _EXACT_LIMIT)
        exact_rows = exact.all(axis=2)
        scales = np.where(exact_rows.any(axis=0), exact_rows.argmax(axis=0), _FLOATS).astype(np.int64)
        ints = scaled[np.maximum(scales, 0), np.arange(len(block))].astype(np.int64)
    return _Chain(t, present, scales, ints), block


# The columns of a batch read whole as one block: their names (in the record's order), scales, integers
# (a row per name) and divisors (10**scale, a column).
_Block = tuple[tuple[str, ...], tuple[int, ...], np.ndarray, np.ndarray]
# Per set of GPU rows: the run time of the last batch, its integer columns, {metric: (scale, ints)}, and the
# same as one block where every column of the record was read (None otherwise).
_Base = tuple[Any, dict[str, tuple[int, np.ndarray]], _Block | None]
_Bases = dict[tuple[Any, ...], _Base]


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
            self._last[layout] = (record.get("t"), {}, None)
            return record
        if not isinstance(codes, dict):
            raise GpuBaseLostError(f"{CODES_KEY} must map columns to codes")
        if previous is not None and previous[2] is not None and previous[0] == base_t:
            read = _all_differences(record, columns, codes, previous[2], base_t)
            if read is not None:  # the usual batch, read in one pass
                self._last[layout] = read
                return record
        coded: dict[str, tuple[int, np.ndarray]] = {}
        later = None
        for name, code in codes.items():
            if name not in columns:
                continue  # a column not parsed (a reader of some columns)
            if type(code) is not int or not 0 <= code % DIFFERENCE <= MAX_SCALE or not 0 <= code < 30:
                raise GpuBaseLostError(f"{name} has an unknown code {code!r}")
            if code >= FROM_POWER:
                if name != "energy_j":
                    raise GpuBaseLostError(f"{name} has an unknown code {code!r}")
                later = code  # after the power it is written against
                continue
            coded[name] = self._column(columns, name, code, previous, base_t)
        if later is not None:
            scale = later % DIFFERENCE
            less = _power_prediction(record, columns, "power_w" in coded, base_t, scale)
            coded["energy_j"] = self._column(columns, "energy_j", DIFFERENCE + scale, previous, base_t, less)
        self._last[layout] = (record.get("t"), coded, _as_block(codes, coded))
        return record

    @staticmethod
    def _column(
        columns: dict[str, Any],
        name: str,
        code: int,
        previous: _Base | None,
        base_t: Any,
        less: np.ndarray | None = None,
    ) -> tuple[int, np.ndarray]:
        """Column ``name`` as floats (in ``columns``) and its (scale, integers) for the next batch."""
        ints = _ints(columns[name], name)
        if less is not None:
            ints = ints + less
        scale = code % DIFFERENCE
        if code >= DIFFERENCE:
            base = None if previous is None or previous[0] != base_t else previous[1].get(name)
            if base is None or base[0] != scale or base[1].shape != ints.shape:
                raise GpuBaseLostError(_LOST)
            ints = base[1] + ints
        columns[name] = ints / _POWERS[scale]
        return scale, ints


def _as_block(codes: dict[str, Any], coded: dict[str, tuple[int, np.ndarray]]) -> _Block | None:
    """The columns just read as one block, for the next batch's one pass (None: not every column was read,
    as by a reader of some columns, or their lengths differ)."""
    if len(coded) != len(codes) or not coded:
        return None
    names = tuple(codes)
    ints = [coded[name][1] for name in names]
    if any(len(row) != len(ints[0]) for row in ints):
        return None
    scales = tuple(coded[name][0] for name in names)
    return names, scales, np.array(ints), _POWERS[list(scales)][:, None]


def _all_differences(
    record: Mapping[str, Any], columns: dict[str, Any], codes: dict[str, Any], base: _Block, base_t: Any
) -> _Base | None:
    """A batch whose every column is a difference from ``base`` (the batch before, read whole) at its scale,
    read in one pass of numpy: one conversion of all columns, one addition, one division. None where the
    batch is anything else (the column by column reading then says what, if anything, is wrong)."""
    names, scales, before, divisors = base
    if tuple(codes) != names:
        return None
    energy = -1
    for row, (code, scale) in enumerate(zip(codes.values(), scales, strict=True)):
        if code == DIFFERENCE + scale and type(code) is int:
            continue
        if (
            code == FROM_POWER + scale
            and type(code) is int
            and names[row] == "energy_j"
            and "power_w" in names
        ):
            energy = row
            continue
        return None
    try:
        ints = _int64_rows([columns[name] for name in names], before.shape)
        dt = float(record["t"]) - float(base_t)
    except (KeyError, TypeError, ValueError, OverflowError):
        return None
    if ints is None:
        return None
    ints += before  # ints is this call's own: added to in place
    floats = ints / divisors
    if energy >= 0:
        ints[energy] += predicted(floats[names.index("power_w")], dt, scales[energy])
        floats[energy] = ints[energy] / _POWERS[scales[energy]]
    for row, name in enumerate(names):
        columns[name] = floats[row]
    coded = {name: (scale, ints[row]) for row, (name, scale) in enumerate(zip(names, scales, strict=True))}
    return record.get("t"), coded, (names, scales, ints, divisors)


def _int64_rows(rows: list[Any], shape: tuple[int, ...]) -> np.ndarray | None:
    """Lists of whole numbers as one int64 block of ``shape`` (None: a row is no list of that length).
    A number that is not a whole one, or not in int64, raises TypeError or OverflowError. Each row goes
    through ``array.array``, which takes Python ints only: numpy's own conversion of the nested lists
    looks over every number to find their type first, and was twice the cost of parsing the line
    (2.8 ms against 1.3 ms for a 64-rack batch of 4,608 GPUs)."""
    if len(shape) != 2 or len(rows) != shape[0]:
        return None
    block = np.empty(shape, np.int64)
    for i, row in enumerate(rows):
        if type(row) is not list or len(row) != shape[1]:
            return None
        block[i] = np.frombuffer(array.array("q", row), np.int64)
    return block


def _power_prediction(
    record: Mapping[str, Any], columns: Mapping[str, Any], power_read: bool, base_t: Any, scale: int
) -> np.ndarray:
    """What the writer took off the energy's differences: the power read back (first) over the interval."""
    residual, power = columns["energy_j"], columns.get("power_w")
    if not (power_read and isinstance(power, np.ndarray) and isinstance(residual, list)) or power.shape != (
        len(residual),
    ):
        raise GpuBaseLostError("the energy is written against a power column this batch does not have")
    try:
        dt = float(record["t"]) - float(base_t)
    except (TypeError, ValueError):
        raise GpuBaseLostError(_LOST) from None
    return predicted(power, dt, scale)


def _ints(value: Any, name: str) -> np.ndarray:
    if not isinstance(value, list):
        raise GpuBaseLostError(f"{name} must be a list of whole numbers")
    try:
        found = np.array(value)  # its own type: 1.5 stays a float, not cut to 1
    except (TypeError, ValueError, OverflowError):
        found = np.array([None])
    if found.ndim != 1 or (len(found) and found.dtype.kind not in "iu"):
        raise GpuBaseLostError(f"{name} must be a flat list of whole numbers (in int64)")
    return found.astype(np.int64)
