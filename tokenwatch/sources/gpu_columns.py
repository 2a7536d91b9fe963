"""What the column-per-figure GPU monitors share (``nvidia-smi dmon``, ``xpu-smi dump``): a header names the
columns, then a row per GPU per sampling round.

A read is the run of rows of one chunk that belong to one sampling round, as for the ``--query-gpu``
stream: a round ends where a GPU comes again, a header comes again, or the chunk ends. A row before any
header is skipped with one warning; a cell that is not a number or is out of its figure's range is a
warning naming the line, and that figure unknown.
"""

from __future__ import annotations

import math

import numpy as np

from tokenwatch.base.events import GPU_METRICS, Event, GpuBatch
from tokenwatch.sources.gpu_unreported import UnreportedFigures
from tokenwatch.sources.lines import LineParser, LineSplitter, NoticeLog, snippet
from tokenwatch.sources.node_gpu_index import NodeGpuIndex

MAX_GPU_INDEX = 4095
_MAX_LINE_BYTES = 64 * 1024

# The plausible range of each figure: a value outside is a misread, shown as unknown.
RANGES: dict[str, tuple[float, float]] = {
    "power_w": (0.0, 100_000.0),
    "temp_c": (-100.0, 300.0),
    "hbm_temp_c": (-100.0, 300.0),
    "util_pct": (0.0, 100.0),
    "hbm_busy_pct": (0.0, 100.0),
    "sm_clock_mhz": (0.0, 100_000.0),
    "mem_clock_mhz": (0.0, 100_000.0),
    "hbm_used_mib": (0.0, 1e9),
}


class GpuColumnsParser(LineParser):
    """Rows of one GPU each -> one :class:`GpuBatch` per sampling round. A subclass reads its header
    into ``_width`` and ``_metric_columns`` (cell, ``GPU_METRICS`` column, metric) and its rows through
    :meth:`_add_row`; ``unknown`` are the cell texts that mean "no reading" (``-``, ``N/A``)."""

    unknown: frozenset[str] = frozenset()
    gpu_word = "GPU"  # how the tool names a GPU in a warning ("device" for xpu-smi)
    index_word = "GPU index"  # and its number ("device id")

    def __init__(
        self, node: str, source: str, node_index: int, not_asked: frozenset[str] = frozenset()
    ) -> None:
        self.node = node
        self.source = source
        self._lines = LineSplitter(_MAX_LINE_BYTES)
        self.notices = NoticeLog(source, node)
        self._index = NodeGpuIndex(node_index)
        self._unreported = UnreportedFigures(source, node, ignore=not_asked)
        self._width = 0
        self._metric_columns: list[tuple[int, int, str]] = []
        self._said_no_header = False
        self.rows = 0
        self._gpus: list[int] = []
        self._values: list[list[float]] = []
        self._masks: list[int] = []

    def _no_header_yet(self, number: int, text: str, t: float, out: list[Event]) -> None:
        if not self._said_no_header:
            self._said_no_header = True
            self.notices.warn(out, t, f"line {number}: a row before any header, skipped: {snippet(text)}")

    def _gpu_of(self, cell: str, number: int, text: str, t: float, out: list[Event]) -> int | None:
        index = cell.strip()
        if not (index.isascii() and index.isdigit()) or int(index) > MAX_GPU_INDEX:
            self.notices.warn(out, t, f"line {number}: bad {self.index_word} {index[:20]!r}: {snippet(text)}")
            return None
        return int(index)

    def _figures(self, cells: list[str], number: int, gpu: int, t: float, out: list[Event]) -> list[float]:
        values = [math.nan] * len(GPU_METRICS)
        for cell, column, metric in self._metric_columns:
            values[column] = self._value(cells[cell], metric, number, gpu, t, out)
        return values

    def _value(self, cell: str, metric: str, number: int, gpu: int, t: float, out: list[Event]) -> float:
        text = cell.strip()
        if not text or text.upper() in self.unknown:
            return math.nan
        try:
            value = float(text)
        except ValueError:
            problem = f"{text[:20]!r} is not a number"
        else:
            low, high = RANGES[metric]
            if low <= value <= high:  # NaN and infinities fail too
                return value
            problem = f"{text[:20]} is out of range"
        self.notices.warn(
            out, t, f"line {number}: {self.gpu_word} {gpu} {metric}: {problem}: shown as unknown"
        )
        return math.nan

    def _add_row(self, gpu: int, values: list[float], mask: int, t: float, out: list[Event]) -> None:
        if gpu in self._gpus:  # this GPU again: the next sampling round has begun
            self._end_round(t, out)
        self._gpus.append(gpu)
        self._values.append(values)
        self._masks.append(mask)
        self.rows += 1

    def end_of_chunk(self, t: float, out: list[Event]) -> None:
        if self._gpus:
            self._end_round(t, out)

    def close(self, t: float) -> list[Event]:
        out = super().close(t)
        self._unreported.finish(t, out)
        return out

    def _end_round(self, t: float, out: list[Event]) -> None:
        nodes, gpu = self._index.columns(self._gpus)
        values = np.array(self._values, dtype=np.float64)
        out.append(GpuBatch(t, nodes, gpu, values, np.array(self._masks, dtype=np.uint64)))
        self._unreported.seen(values, self._gpus, t, out)
        self._gpus = []
        self._values = []
        self._masks = []
