"""``nvidia-smi --query-gpu=... --format=csv,noheader,nounits`` rows (also streamed with ``-lms``).

Columns come in the order they were requested, so the parser is built with the same field list as
the command (:func:`query_command`). ``[N/A]``, ``[Not Supported]``, ``[Unknown Error]`` and every other
bracketed status become ``math.nan``; the clocks-event (throttle) bitmask becomes the batch's
``throttle_reasons`` (names via :func:`tokenwatch.base.throttle.reason_names`). Rows captured with units
(``--format=csv``: ``631.95 W``, ``81559 MiB``) parse too, so saved captures can be replayed.

What one :class:`~tokenwatch.base.events.GpuBatch` holds (a "read"): ``nvidia-smi -lms`` prints every GPU,
in index order, once per period, and the rows of one period arrive together, so a read is the run of
rows of one ``feed`` chunk that belong to one sampling round, stamped with that chunk's ``t``. A round
ends where a GPU index comes again (the next period has begun) or where the chunk ends: a chunk cut
mid-round gives two batches (the round's first GPUs now, the rest with the next chunk), and a chunk
holding two rounds gives two batches at one ``t``. Either way every row is in exactly one batch, no
batch names a GPU twice (so the core never has to pick between two rows of one GPU), and a row is
never held back waiting for the rest of its round. A bad line is one ``Notice``, emitted when it is
met; it does not end the round.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from tokenwatch.base.events import GPU_METRICS, Event, GpuBatch
from tokenwatch.base.throttle import REASON_NAMES, reason_names
from tokenwatch.sources.lines import LineParser, LineSplitter, NoticeLog, snippet
from tokenwatch.sources.node_gpu_index import NodeGpuIndex

# Names nvidia-smi accepts (see `nvidia-smi --help-query-gpu`; 530+ drivers also take the older
# "clocks_throttle_reasons.active" spelling, which this parser reads too).
DEFAULT_QUERY_FIELDS: tuple[str, ...] = (
    "index",
    "power.draw",
    "power.limit",
    "clocks.sm",
    "clocks.mem",
    "memory.used",
    "memory.total",
    "utilization.memory",
    "utilization.gpu",
    "temperature.gpu",
    "clocks_event_reasons.active",
)

# query field -> GPU metric (a name in GPU_METRICS). Aliases are the long names of CSV headers.
FIELD_ATTRIBUTES: dict[str, str] = {
    "power.draw": "power_w",
    "power.draw.instant": "power_w",
    "power.draw.average": "power_w",
    "gpu.power.draw.instant": "power_w",
    "power.limit": "power_limit_w",
    "enforced.power.limit": "power_limit_w",
    "gpu.power.current_limit": "power_limit_w",
    "gpu.power.requested_limit": "power_limit_w",
    "clocks.sm": "sm_clock_mhz",
    "clocks.current.sm": "sm_clock_mhz",
    "clocks.mem": "mem_clock_mhz",
    "clocks.current.memory": "mem_clock_mhz",
    "memory.used": "hbm_used_mib",
    "memory.total": "hbm_total_mib",
    "utilization.memory": "hbm_busy_pct",
    "utilization.gpu": "util_pct",
    "temperature.gpu": "temp_c",
    "temperature.memory": "hbm_temp_c",
    # No energy counter: nvidia-smi's --help-query-gpu (driver 590.48.01) lists no energy field; NVML
    # and dcgm-exporter read the GPU's counter (tokenwatch.core.energy).
}
MASK_FIELDS = frozenset({"clocks_event_reasons.active", "clocks_throttle_reasons.active"})
# Per-reason columns ("Active" / "Not Active") set the same bits as the mask.
REASON_FIELDS: dict[str, int] = {
    f"{prefix}.{name}": bit
    for bit, name in REASON_NAMES.items()
    for prefix in ("clocks_event_reasons", "clocks_throttle_reasons")
}

# Plausible ranges; a value outside is a corrupt row, not a reading.
_RANGES: dict[str, tuple[float, float]] = {
    "power_w": (0.0, 100_000.0),
    "power_limit_w": (0.0, 100_000.0),
    "sm_clock_mhz": (0.0, 100_000.0),
    "mem_clock_mhz": (0.0, 100_000.0),
    "hbm_used_mib": (0.0, 1e9),
    "hbm_total_mib": (0.0, 1e9),
    "hbm_busy_pct": (0.0, 100.0),
    "util_pct": (0.0, 100.0),
    "temp_c": (-100.0, 300.0),
    "hbm_temp_c": (-100.0, 300.0),
}
MAX_GPU_INDEX = 4095
_MASK_LIMIT = 1 << 64
_MAX_LINE_BYTES = 64 * 1024


def query_command(fields: Sequence[str] = DEFAULT_QUERY_FIELDS, interval_ms: int | None = None) -> list[str]:
    """argv for nvidia-smi; ``interval_ms`` streams a row per GPU every so many ms (``-lms``)."""
    if not fields:
        raise ValueError("nvidia-smi: give at least one query field")
    for name in fields:
        if not name or any(c in name for c in ", \t\n="):
            raise ValueError(f"nvidia-smi: bad query field {name!r}")
    argv = ["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"]
    if interval_ms is not None:
        if interval_ms <= 0:
            raise ValueError(f"nvidia-smi: interval must be positive, not {interval_ms} ms")
        argv += ["-lms", str(int(interval_ms))]
    return argv


def fields_from_header(line: str) -> list[str]:
    """Field names from a ``--format=csv`` header (``power.draw [W]`` -> ``power.draw``)."""
    return [cell.strip().split(" [", 1)[0].strip() for cell in line.split(",")]


def is_missing(value: str) -> bool:
    """``[N/A]``, ``[Not Supported]``, ``[Unknown Error]``, ... (any bracketed status) or empty."""
    return not value or value == "N/A" or (value.startswith("[") and value.endswith("]"))


def parse_reason_mask(value: str) -> int:
    """``0x0000000000000004`` -> 4; raises ValueError for text that is not a 64-bit mask."""
    text = value.strip()
    mask = int(text, 16) if text[:2].lower() == "0x" else int(text)
    if not 0 <= mask < _MASK_LIMIT:
        raise ValueError(f"clocks event reasons {text} out of range")
    return mask


def decode_reasons(value: str) -> list[str]:
    """Names of the clocks-event reasons in an nvidia-smi mask value (``[]`` when missing)."""
    return [] if is_missing(value.strip()) else reason_names(parse_reason_mask(value))


def _number(value: str) -> float:
    """A reading with or without its unit (``631.95 W``, ``100 %``); NaN for a missing value."""
    if is_missing(value):
        return math.nan
    head = value.split(None, 1)[0] if " " in value else value
    number = float(head.rstrip("%"))
    if not math.isfinite(number):
        raise ValueError(f"{value!r} is not a finite number")
    return number


class _RowError(ValueError):
    pass


# One row's readings: the used value columns in query order, and the clocks-event mask.
_Row = tuple[list[float], int]


class NvidiaSmiParser(LineParser):
    """Rows of one node's ``nvidia-smi`` stream -> :class:`GpuBatch` events (one per read, see above).

    ``feed(data, t)`` takes bytes as they arrive: complete lines become rows at run time ``t``, a
    partial line waits for the next feed, a bad line becomes one ``Notice`` (never an exception). A
    CSV header row (``--format=csv`` without ``noheader``) is recognised and skipped. ``node_index``
    is the node's place in ``RunStarted.nodes``, which batch events carry instead of its name.
    """

    def __init__(
        self,
        node: str,
        fields: Sequence[str] = DEFAULT_QUERY_FIELDS,
        source: str = "nvidia-smi",
        gpu_field: str | None = "index",
        node_index: int = 0,
    ) -> None:
        """``gpu_field=None`` reads a single-GPU capture without an index column (every row is GPU 0)."""
        self.node = node
        self.fields = tuple(f.strip() for f in fields)
        self.source = source
        if gpu_field is not None and gpu_field not in self.fields:
            raise ValueError(f"nvidia-smi: the query must include {gpu_field!r} to tell GPUs apart")
        self._gpu_column = None if gpu_field is None else self.fields.index(gpu_field)
        self._columns: list[tuple[int, str, str]] = []  # (column, kind, attribute) for used columns
        seen: set[str] = set()
        for i, name in enumerate(self.fields):
            if name in MASK_FIELDS:
                self._columns.append((i, "mask", ""))
            elif name in REASON_FIELDS:
                self._columns.append((i, "reason", name))
            elif name in FIELD_ATTRIBUTES and FIELD_ATTRIBUTES[name] not in seen:
                seen.add(FIELD_ATTRIBUTES[name])  # first column for an attribute wins (e.g. power.draw)
                self._columns.append((i, "value", FIELD_ATTRIBUTES[name]))
        # The fast path's view of the same columns: plain numbers, checked against their ranges at once.
        self._value_columns = [(c, *_RANGES[a]) for c, kind, a in self._columns if kind == "value"]
        self._mask_columns = [c for c, kind, _ in self._columns if kind == "mask"]
        self._has_reason_columns = any(kind == "reason" for _, kind, _ in self._columns)
        # Where each used value column lands among GPU_METRICS (the default query is already in order).
        self._metric_positions = [GPU_METRICS.index(a) for _, kind, a in self._columns if kind == "value"]
        self._in_metric_order = self._metric_positions == list(range(len(GPU_METRICS)))
        self._lines = LineSplitter(_MAX_LINE_BYTES)
        self.notices = NoticeLog(source, node)
        self._index = NodeGpuIndex(node_index)
        self.rows = 0
        # The round being read: rows wait here only until the round or the chunk ends.
        self._gpus: list[int] = []
        self._gpu_set: set[int] = set()
        self._values: list[list[float]] = []
        self._masks: list[int] = []

    def parse_line(self, number: int, line: bytes, t: float, out: list[Event]) -> None:
        text = line.decode("utf-8", "replace").strip()
        if not text:
            return
        cells = text.split(",")  # unstripped: float() and int() skip the spaces themselves
        if not cells[0][:1].isdigit() and self._is_header(cells):  # a data row starts with a number
            return
        try:
            gpu, (values, mask) = self._row(cells)
        except (_RowError, ValueError) as exc:
            self.notices.warn(out, t, f"line {number}: {exc}: {snippet(text)}")
            return
        if gpu in self._gpu_set:  # this GPU again: the next sampling round has begun
            self._end_round(t, out)
        self._gpu_set.add(gpu)
        self._gpus.append(gpu)
        self._values.append(values)
        self._masks.append(mask)
        self.rows += 1

    def end_of_chunk(self, t: float, out: list[Event]) -> None:
        if self._gpus:
            self._end_round(t, out)

    def _end_round(self, t: float, out: list[Event]) -> None:
        """The rows read so far as one batch, built column-wise straight from the parsed numbers."""
        nodes, gpu = self._index.columns(self._gpus)
        if self._in_metric_order:
            values = np.array(self._values, dtype=np.float64)
        else:  # metrics the query does not ask for are missing, not zero
            values = np.full((len(self._gpus), len(GPU_METRICS)), np.nan)
            if self._metric_positions:
                values[:, self._metric_positions] = self._values
        out.append(GpuBatch(t, nodes, gpu, values, np.array(self._masks, dtype=np.uint64)))
        self._gpus.clear()
        self._gpu_set.clear()
        self._values.clear()
        self._masks.clear()

    def _is_header(self, cells: list[str]) -> bool:
        return len(cells) == len(self.fields) and fields_from_header(cells[0])[0] == self.fields[0]

    def _row(self, cells: list[str]) -> tuple[int, _Row]:
        if len(cells) != len(self.fields):
            raise _RowError(f"expected {len(self.fields)} fields, got {len(cells)}")
        gpu_text = "0" if self._gpu_column is None else cells[self._gpu_column].strip()
        if not (gpu_text.isascii() and gpu_text.isdigit()) or int(gpu_text) > MAX_GPU_INDEX:
            raise _RowError(f"bad GPU index {gpu_text[:20]!r}")
        return int(gpu_text), (self._plain_row(cells) or self._careful_row([cell.strip() for cell in cells]))

    def _plain_row(self, cells: list[str]) -> _Row | None:
        """The common row (``--format=...,nounits``, every value reported, masks in hex): float() each
        cell at once. Anything else (units, ``[N/A]``, a value out of range) -> None: the careful path
        decides, and reports exactly what is wrong."""
        if self._has_reason_columns:
            return None
        values: list[float] = []
        try:
            for column, low, high in self._value_columns:
                number = float(cells[column])
                if not low <= number <= high:  # NaN fails too
                    return None
                values.append(number)
            mask = 0
            for column in self._mask_columns:
                cell = cells[column].strip()
                mask |= int(cell, 16) if cell[:2] in ("0x", "0X") else int(cell)
        except ValueError:
            return None
        if not 0 <= mask < _MASK_LIMIT:
            return None
        return values, mask

    def _careful_row(self, cells: list[str]) -> _Row:
        values: list[float] = []
        mask = 0
        for column, kind, attribute in self._columns:
            cell = cells[column]
            if kind == "mask":
                if not is_missing(cell):
                    mask |= parse_reason_mask(cell)
            elif kind == "reason":
                if cell.lower() == "active":
                    mask |= REASON_FIELDS[attribute]
            else:
                number = _number(cell)
                low, high = _RANGES[attribute]
                if not math.isnan(number) and not low <= number <= high:
                    raise _RowError(f"{self.fields[column]} = {cell[:20]} out of range")
                values.append(number)
        return values, mask
