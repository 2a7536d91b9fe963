"""Which GPU figures a node's telemetry stream never reports, said once per stream.

A tool that cannot give a figure (amd-smi on a compute partition has no power, a Radeon no energy
counter; xpu-smi leaves GPU utilization N/A on a Max 1550) leaves it unknown in every batch; the
dashboard shows unknown, and this says why, once, naming the node and the figures. A figure is judged
over the stream's first few reads, since some tools print N/A in their first round only (xpu-smi's
memory utilization on Aurora's Max 1550s).
"""

from __future__ import annotations

import numpy as np

from tokenwatch.base.events import GPU_METRICS, Event, FloatArray, Notice

READS_BEFORE_SAYING = 3
# Human names of the figures worth a word, in the order they are said.
FIGURES: dict[str, str] = {
    "power_w": "power",
    "sm_clock_mhz": "GPU clock",
    "mem_clock_mhz": "memory clock",
    "hbm_used_mib": "memory used",
    "hbm_total_mib": "memory total",
    "util_pct": "utilization",
    "hbm_busy_pct": "memory busy",
    "temp_c": "temperature",
    "energy_j": "energy counter",
}
_COLUMNS = [GPU_METRICS.index(metric) for metric in FIGURES]


class UnreportedFigures:
    """``seen(values, t, out)`` after each batch; appends the one notice when the time comes."""

    __slots__ = ("_gpus", "_reads", "_reported", "_said", "node", "source")

    def __init__(self, source: str, node: str, *, ignore: frozenset[str] = frozenset()) -> None:
        self.source = source
        self.node = node
        self._reads = 0
        self._said = False
        self._gpus: set[int] = set()
        # Figures the tool was never asked for or cannot have count as reported: nothing to explain.
        self._reported = np.array([metric in ignore for metric in FIGURES])

    def not_asked(self, metrics: frozenset[str] | set[str]) -> None:
        """Figures the stream does not carry at all (a capture without their columns): nothing to say."""
        self._reported |= np.array([metric in metrics for metric in FIGURES])

    def seen(self, values: FloatArray, gpus: list[int], t: float, out: list[Event]) -> None:
        if self._reads >= READS_BEFORE_SAYING:
            return
        self._reads += 1
        self._gpus.update(gpus)
        self._reported |= np.isfinite(values[:, _COLUMNS]).any(axis=0)
        if self._reads == READS_BEFORE_SAYING:
            self._say(t, out)

    def finish(self, t: float, out: list[Event]) -> None:
        """The stream ended: say it now if it read anything but had not said it yet."""
        if self._reads and self._reads < READS_BEFORE_SAYING:
            self._say(t, out)
        self._reads = READS_BEFORE_SAYING

    def _say(self, t: float, out: list[Event]) -> None:
        if self._said or self._reported.all():
            return
        self._said = True
        missing = [
            words for words, reported in zip(FIGURES.values(), self._reported, strict=True) if not reported
        ]
        one = len(self._gpus) == 1
        which = (
            f"GPU {min(self._gpus)} of {self.node} reports"
            if one
            else f"the {len(self._gpus)} GPUs of {self.node} report"
        )
        energy = " (energy from integrated power)" if "energy counter" in missing else ""
        out.append(
            Notice(
                t,
                "warning",
                f"{self.source}: {which} no {', '.join(missing)}: shown as unknown{energy}",
                self.node,
                self.source,
            )
        )
