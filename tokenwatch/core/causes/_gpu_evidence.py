"""The causes wing's part of the state that GPU readings feed: power-limit changes and XID / NVLink errors,
the evidence a straggler's cause hint names (:mod:`tokenwatch.core.causes._judge`).

The engine's GPU handler resolves a reading's rows once (one node's GPUs, the whole rack, or scattered
rows) and hands them here before it overwrites the GPUs' latest values: a changed limit is told by the
value it replaces. Only a live view keeps this evidence (a summary's pass does not read it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tokenwatch.base.events import GPU_METRICS
from tokenwatch.core._gpu_errors import GpuErrors
from tokenwatch.core._power_limits import PowerLimitLog, note_limits

_LIMIT = GPU_METRICS.index("power_limit_w")
_XID = GPU_METRICS.index("xid")
_NVLINK = GPU_METRICS.index("nvlink_errors")


@dataclass(slots=True, eq=False)
class GpuEvidence:
    """Per rack: the GPUs' power-limit changes (pending ones flushed each tick into the run's events) and
    their XID / NVLink errors (arrays shaped (nodes, gpus))."""

    power_limits: PowerLimitLog
    errors: GpuErrors

    @classmethod
    def for_rack(cls, nodes: int, gpus: int) -> GpuEvidence:
        return cls(PowerLimitLog(), GpuErrors.for_rack(nodes, gpus))


def note_gpu_readings(
    evidence: GpuEvidence,
    t: float,
    where: tuple[np.ndarray | int | slice, ...],
    latest: np.ndarray,
    values: np.ndarray,
) -> None:
    """Readings ``values`` of the GPUs at ``where`` in the (nodes, gpus, metric) array ``latest`` of the
    GPUs' latest values, before they are overwritten: a power limit that moved, XID and NVLink errors."""
    old = latest[where][..., _LIMIT]
    new = values[..., _LIMIT]
    if old.shape == new.shape:
        with np.errstate(invalid="ignore"):
            moved = np.abs(new - old) >= 1.0
        if moved.any():
            grid = np.indices(latest.shape[:2])  # (node, gpu) of every GPU
            note_limits(
                evidence.power_limits, t, grid[0][where][moved], grid[1][where][moved], old[moved], new[moved]
            )
    evidence.errors.note(where, t, values[..., _XID], values[..., _NVLINK])
