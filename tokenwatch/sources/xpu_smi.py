"""``xpu-smi dump`` CSV rows (Intel Data Center GPU Max / Flex, Arc) -> :class:`GpuBatch` events.

``xpu-smi dump -d -1 -m 0,1,2,3,4,17,18 -i N`` (:func:`dump_command`) prints a header naming its columns,
then a row per device every ``N`` seconds::

    Timestamp, DeviceId, GPU Utilization (%), GPU Power (W), GPU Frequency (MHz), ...
    08:08:16.817,    0,  N/A, 281.13, 1600.00, 35.50, 31.50,  N/A

Columns are found by their names in the header (the name before `` (unit)``), so any metric order, an
older tool that adds a ``TileId`` column (``xpumcli dump --rawdata``) or one whose units are spelled
differently reads the same. The metric numbers are the same in every version this was checked against
(the 2023 SMI user guide and the 2026 ``dump.rst``): 0 utilization, 1 power, 2 frequency, 3 core and
4 memory temperature, 17 memory bandwidth utilization, 18 memory used.

Not read, on purpose: ``GPU Memory Utilization (%)`` (5) is the share of memory *used*, not how busy it is
(an A770 with 17.52 MiB used reads 0.10 %); ``GPU Energy Consumed (J)`` (8) is not a documented
cumulative counter (the user guide says dump does not implement it), so a node's energy comes from its
integrated power.

A read is the run of rows of one chunk that belong to one sampling round, as for nvidia-smi: a round ends
where a device comes again or the chunk ends. ``N/A`` and blank cells (xpu-smi leaves cells blank where
it has no reading yet) are unknown. A row with the wrong number of cells, or rows before any header, are
skipped with a warning; an unreadable or implausible cell is a warning and that figure unknown.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from tokenwatch.base.events import GPU_METRICS, Event, GpuBatch
from tokenwatch.sources.gpu_unreported import UnreportedFigures
from tokenwatch.sources.lines import LineParser, LineSplitter, NoticeLog, snippet
from tokenwatch.sources.node_gpu_index import NodeGpuIndex

DUMP_METRICS = (0, 1, 2, 3, 4, 17, 18)
MAX_GPU_INDEX = 4095
_MAX_LINE_BYTES = 64 * 1024

# Header name (before " (unit)") -> GPU metric.
COLUMN_METRICS: dict[str, str] = {
    "GPU Utilization": "util_pct",
    "GPU Power": "power_w",
    "GPU Frequency": "sm_clock_mhz",
    "GPU Core Temperature": "temp_c",
    "GPU Memory Temperature": "hbm_temp_c",
    "GPU Memory Bandwidth Utilization": "hbm_busy_pct",
    "GPU Memory Used": "hbm_used_mib",
}
_RANGES: dict[str, tuple[float, float]] = {
    "util_pct": (0.0, 100.0),
    "power_w": (0.0, 100_000.0),
    "sm_clock_mhz": (0.0, 100_000.0),
    "temp_c": (-100.0, 300.0),
    "hbm_temp_c": (-100.0, 300.0),
    "hbm_busy_pct": (0.0, 100.0),
    "hbm_used_mib": (0.0, 1e9),
}
# What xpu-smi is never asked for, or cannot say: no reason to tell the user it is missing.
NOT_ASKED = frozenset({"mem_clock_mhz", "hbm_total_mib", "energy_j"})


def dump_command(interval_s: float) -> list[str]:
    """argv streaming every device's metrics every ``interval_s`` (whole seconds: ``-i`` takes no less)."""
    seconds = max(1, round(interval_s))
    return ["xpu-smi", "dump", "-d", "-1", "-m", ",".join(map(str, DUMP_METRICS)), "-i", str(seconds)]


def column_name(cell: str) -> str:
    """``GPU Power (W)`` -> ``GPU Power``."""
    return cell.strip().split(" (", 1)[0].strip()


class XpuSmiParser(LineParser):
    """One node's ``xpu-smi dump`` stream -> :class:`GpuBatch` events, one per read (see above)."""

    def __init__(self, node: str, source: str = "xpu-smi", node_index: int = 0) -> None:
        self.node = node
        self.source = source
        self._lines = LineSplitter(_MAX_LINE_BYTES)
        self.notices = NoticeLog(source, node)
        self._index = NodeGpuIndex(node_index)
        self._unreported = UnreportedFigures(source, node, ignore=NOT_ASKED)
        self._width = 0
        self._device_column = -1
        self._metric_columns: list[tuple[int, int, str]] = []  # (cell, GPU_METRICS column, metric)
        self._said_no_header = False
        self.rows = 0
        self._gpus: list[int] = []
        self._values: list[list[float]] = []

    def parse_line(self, number: int, line: bytes, t: float, out: list[Event]) -> None:
        text = line.decode("utf-8", "replace").strip()
        if not text:
            return
        cells = text.split(",")
        if column_name(cells[0]) == "Timestamp":
            self._read_header(cells, number, t, out)
            return
        if self._device_column < 0:
            if not self._said_no_header:
                self._said_no_header = True
                self.notices.warn(out, t, f"line {number}: a row before any header, skipped: {snippet(text)}")
            return
        if len(cells) != self._width:
            self.notices.warn(
                out, t, f"line {number}: expected {self._width} fields, got {len(cells)}: {snippet(text)}"
            )
            return
        device = cells[self._device_column].strip()
        if not (device.isascii() and device.isdigit()) or int(device) > MAX_GPU_INDEX:
            self.notices.warn(out, t, f"line {number}: bad device id {device[:20]!r}: {snippet(text)}")
            return
        gpu = int(device)
        values = [math.nan] * len(GPU_METRICS)
        for cell, column, metric in self._metric_columns:
            values[column] = self._cell(cells[cell], metric, number, gpu, t, out)
        if gpu in self._gpus:  # this device again: the next sampling round has begun
            self._end_round(t, out)
        self._gpus.append(gpu)
        self._values.append(values)
        self.rows += 1

    def end_of_chunk(self, t: float, out: list[Event]) -> None:
        if self._gpus:
            self._end_round(t, out)

    def close(self, t: float) -> list[Event]:
        out = super().close(t)
        self._unreported.finish(t, out)
        return out

    def _read_header(self, cells: Sequence[str], number: int, t: float, out: list[Event]) -> None:
        names = [column_name(cell) for cell in cells]
        if "DeviceId" not in names:
            self.notices.warn(out, t, f"line {number}: a header without a DeviceId column, skipped")
            return
        self._width = len(names)
        self._device_column = names.index("DeviceId")
        self._metric_columns = [
            (i, GPU_METRICS.index(COLUMN_METRICS[name]), COLUMN_METRICS[name])
            for i, name in enumerate(names)
            if name in COLUMN_METRICS
        ]
        self._unreported.not_asked(
            set(COLUMN_METRICS.values()) - {metric for *_, metric in self._metric_columns}
        )

    def _cell(self, cell: str, metric: str, number: int, gpu: int, t: float, out: list[Event]) -> float:
        text = cell.strip()
        if not text or text.upper() == "N/A":
            return math.nan
        try:
            value = float(text)
        except ValueError:
            value = math.nan
            problem = f"{text[:20]!r} is not a number"
        else:
            low, high = _RANGES[metric]
            if low <= value <= high:  # NaN and infinities fail too
                return value
            problem = f"{text[:20]} is out of range"
            value = math.nan
        self.notices.warn(out, t, f"line {number}: device {gpu} {metric}: {problem}: shown as unknown")
        return value

    def _end_round(self, t: float, out: list[Event]) -> None:
        nodes, gpu = self._index.columns(self._gpus)
        values = np.array(self._values, dtype=np.float64)
        out.append(GpuBatch(t, nodes, gpu, values, np.zeros(len(self._gpus), dtype=np.uint64)))
        self._unreported.seen(values, self._gpus, t, out)
        self._gpus = []
        self._values = []
