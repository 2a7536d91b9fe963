"""``nvidia-smi dmon`` text (the scrolling per-device monitor) -> :class:`GpuBatch` events.

``nvidia-smi dmon`` prints two header lines naming and then measuring its columns, then a row per GPU per
sampling period, and prints the header again every so often::

    # gpu    pwr  gtemp  mtemp     sm    mem    enc    dec    jpg    ofa   mclk   pclk
    # Idx      W      C      C      %      %      %      %      %      %    MHz    MHz
        0    438     55     61      -      -      -      -      -      -   2619   1980

Columns are found by their names in the header, so any ``-s`` selection reads, and ``-o DT`` (a date and a
time column before the GPU's) too. ``-`` is a figure the GPU does not report (``sm`` and ``mem`` on a MIG
GPU): unknown, never zero. What each column is, per ``nvidia-smi dmon -h``:

- ``pwr`` W -> ``power_w``; ``gtemp`` / ``mtemp`` C -> ``temp_c`` / ``hbm_temp_c``;
- ``sm`` % (time an SM was busy, nvidia-smi's ``utilization.gpu``) -> ``util_pct``; ``mem`` % (time memory was
  read or written, ``utilization.memory``) -> ``hbm_busy_pct``;
- ``pclk`` / ``mclk`` MHz -> ``sm_clock_mhz`` / ``mem_clock_mhz``; ``fb`` MB (``-s m``) -> ``hbm_used_mib``;
- ``pviol`` / ``tviol`` % (``-s v``: the share of the period the GPU was held back by its power or thermal
  limit) -> the ``sw_power_cap`` / ``sw_thermal_slowdown`` reasons when above zero.

A read is the run of rows of one chunk that belong to one sampling round, as for the ``--query-gpu`` stream:
a round ends where a GPU comes again or the chunk ends. Rows before any header, a row with the wrong
number of fields, a bad GPU index or an unreadable or implausible value are warnings naming the line; an
unreadable value is that figure unknown, the rest of the row read.
"""

from __future__ import annotations

from tokenwatch.base import throttle
from tokenwatch.base.events import GPU_METRICS, Event
from tokenwatch.sources.gpu_columns import GpuColumnsParser

COLUMN_METRICS: dict[str, str] = {
    "pwr": "power_w",
    "gtemp": "temp_c",
    "mtemp": "hbm_temp_c",
    "sm": "util_pct",
    "mem": "hbm_busy_pct",
    "pclk": "sm_clock_mhz",
    "mclk": "mem_clock_mhz",
    "fb": "hbm_used_mib",
}
VIOLATION_COLUMNS: dict[str, int] = {"pviol": throttle.SW_POWER_CAP, "tviol": throttle.SW_THERMAL_SLOWDOWN}


def dmon_command(interval_s: float) -> list[str]:
    """argv streaming power, temperatures, utilization, clocks and framebuffer use every ``interval_s``
    (whole seconds: ``-d`` takes no less)."""
    return ["nvidia-smi", "dmon", "-s", "pucm", "-d", str(max(1, round(interval_s)))]


class NvidiaSmiDmonParser(GpuColumnsParser):
    """One node's ``nvidia-smi dmon`` text -> :class:`GpuBatch` events, one per read (see above)."""

    unknown = frozenset({"-"})

    def __init__(self, node: str, source: str = "nvidia-smi dmon", node_index: int = 0) -> None:
        super().__init__(node, source, node_index)
        self._gpu_column = -1
        self._violation_columns: list[tuple[int, int]] = []

    def parse_line(self, number: int, line: bytes, t: float, out: list[Event]) -> None:
        text = line.decode("utf-8", "replace").strip()
        if not text:
            return
        if text.startswith("#"):
            self._read_header(text, t, out)
            return
        if self._gpu_column < 0:
            self._no_header_yet(number, text, t, out)
            return
        cells = text.split()
        if len(cells) != self._width:
            self.notices.warn(out, t, f"line {number}: expected {self._width} fields, got {len(cells)}")
            return
        gpu = self._gpu_of(cells[self._gpu_column], number, text, t, out)
        if gpu is None:
            return
        values = self._figures(cells, number, gpu, t, out)
        mask = 0
        for cell, bit in self._violation_columns:
            if self._value(cells[cell], "util_pct", number, gpu, t, out) > 0:  # a share of the period
                mask |= bit
        self._add_row(gpu, values, mask, t, out)

    def _read_header(self, text: str, t: float, out: list[Event]) -> None:
        names = text.lstrip("#").split()
        if "gpu" not in names:
            return  # the units line ("# Idx W C ..."), or a comment
        if self._gpus:  # a header between rows ends the round before it
            self._end_round(t, out)
        self._width = len(names)
        self._gpu_column = names.index("gpu")
        self._metric_columns = [
            (i, GPU_METRICS.index(COLUMN_METRICS[n]), COLUMN_METRICS[n])
            for i, n in enumerate(names)
            if n in COLUMN_METRICS
        ]
        self._violation_columns = [
            (i, VIOLATION_COLUMNS[n]) for i, n in enumerate(names) if n in VIOLATION_COLUMNS
        ]
        asked = {metric for *_, metric in self._metric_columns}
        self._unreported.not_asked({m for m in GPU_METRICS if m not in asked})
