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

from collections.abc import Sequence

from tokenwatch.base.events import GPU_METRICS, Event
from tokenwatch.sources.gpu_columns import GpuColumnsParser
from tokenwatch.sources.lines import snippet

DUMP_METRICS = (0, 1, 2, 3, 4, 17, 18)

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
# What xpu-smi is never asked for, or cannot say: no reason to tell the user it is missing.
NOT_ASKED = frozenset({"mem_clock_mhz", "hbm_total_mib", "energy_j"})


def dump_command(interval_s: float) -> list[str]:
    """argv streaming every device's metrics every ``interval_s`` (whole seconds: ``-i`` takes no less)."""
    seconds = max(1, round(interval_s))
    return ["xpu-smi", "dump", "-d", "-1", "-m", ",".join(map(str, DUMP_METRICS)), "-i", str(seconds)]


def column_name(cell: str) -> str:
    """``GPU Power (W)`` -> ``GPU Power``."""
    return cell.strip().split(" (", 1)[0].strip()


class XpuSmiParser(GpuColumnsParser):
    """One node's ``xpu-smi dump`` stream -> :class:`GpuBatch` events, one per read (see above)."""

    unknown = frozenset({"N/A"})  # and blank cells: no reading yet
    gpu_word = "device"
    index_word = "device id"

    def __init__(self, node: str, source: str = "xpu-smi", node_index: int = 0) -> None:
        super().__init__(node, source, node_index, not_asked=NOT_ASKED)
        self._device_column = -1

    def parse_line(self, number: int, line: bytes, t: float, out: list[Event]) -> None:
        text = line.decode("utf-8", "replace").strip()
        if not text:
            return
        cells = text.split(",")
        if column_name(cells[0]) == "Timestamp":
            self._read_header(cells, number, t, out)
            return
        if self._device_column < 0:
            self._no_header_yet(number, text, t, out)
            return
        if len(cells) != self._width:
            self.notices.warn(
                out, t, f"line {number}: expected {self._width} fields, got {len(cells)}: {snippet(text)}"
            )
            return
        gpu = self._gpu_of(cells[self._device_column], number, text, t, out)
        if gpu is None:
            return
        self._add_row(gpu, self._figures(cells, number, gpu, t, out), 0, t, out)

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
