"""Changes of a GPU's power limit, as events of the run: a power-steering service lowering a node's limit
is the kind of thing that makes one node of 18 run slow, so it is marked where it happened.

Every GPU reading carries the GPU's enforced power limit (nvidia-smi ``power.limit`` /
``enforced.power.limit``, NVML ``nvmlDeviceGetEnforcedPowerLimit``, dcgm ``DCGM_FI_DEV_POWER_MGMT_LIMIT``).
Ingestion compares each new limit with the GPU's last one (:func:`note_limits`); the changes of one tick
are grouped per node and per (old, new) pair into one :class:`PowerLimitChange` and one alert
(:func:`flush_changes`): ``power limit lowered 1,400 -> 1,200 W on node05 GPU0-3 at 20:00``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tokenwatch.base.durations import format_clock
from tokenwatch.base.formatting import group
from tokenwatch.core.alerts import AlertLog

MIN_CHANGE_W = 1.0  # a limit that moves by less is the same limit (rounding between readings)
MAX_CHANGES = 1000  # the run's changes kept (a flapping limit cannot grow the state)


@dataclass(frozen=True, slots=True)
class PowerLimitChange:
    """GPUs ``gpus`` of ``node`` changed their power limit from ``old_w`` to ``new_w`` at run time ``t``."""

    t: float
    node: str
    gpus: tuple[int, ...]
    old_w: float
    new_w: float
    gpus_per_node: int

    @property
    def lowered(self) -> bool:
        return self.new_w < self.old_w

    @property
    def all_gpus(self) -> bool:
        return len(self.gpus) == self.gpus_per_node

    def where(self) -> str:
        """``GPU0-3``, ``GPU0,2``: the GPUs that changed."""
        return gpu_list(self.gpus)

    def text(self, with_node: bool = True) -> str:
        """``power limit lowered 1,400 -> 1,200 W on node05 GPU0-3 at 20:00`` (without the node:
        ``... on all 4 GPUs at 20:00``)."""
        verb = "lowered" if self.lowered else "raised"
        if with_node:
            on = f"{self.node} {self.where()}"
        else:
            on = (
                f"all {self.gpus_per_node} GPUs" if self.all_gpus and self.gpus_per_node > 1 else self.where()
            )
        change = f"{group(self.old_w)} -> {group(self.new_w)} W"
        return f"power limit {verb} {change} on {on} at {format_clock(self.t)}"


def gpu_list(gpus: tuple[int, ...]) -> str:
    """``GPU0-3`` for a run of consecutive GPUs, else ``GPU0,2,5``."""
    if len(gpus) > 2 and gpus == tuple(range(gpus[0], gpus[-1] + 1)):
        return f"GPU{gpus[0]}-{gpus[-1]}"
    return "GPU" + ",".join(str(g) for g in gpus)


@dataclass(slots=True)
class PowerLimitLog:
    """Changes seen since the last tick (``pending``: t, node, gpu, old, new) and the run's changes."""

    pending: list[tuple[float, int, int, float, float]] = field(default_factory=list)
    changes: list[PowerLimitChange] = field(default_factory=list)


def note_limits(
    log: PowerLimitLog, t: float, nodes: np.ndarray, gpus: np.ndarray, old: np.ndarray, new: np.ndarray
) -> None:
    """Readings of GPUs (``nodes[k]``, ``gpus[k]``): ``old[k]`` their last limit, ``new[k]`` this one (W).
    A missing limit on either side is no change (a source that stopped reporting it changed nothing)."""
    with np.errstate(invalid="ignore"):
        changed = np.abs(new - old) >= MIN_CHANGE_W  # NaN compares False
    for k in np.flatnonzero(changed).tolist():
        log.pending.append((t, int(nodes[k]), int(gpus[k]), float(old[k]), float(new[k])))


def flush_changes(
    log: PowerLimitLog, before_t: float, names: tuple[str, ...], gpus_per_node: int, alerts: AlertLog
) -> None:
    """Group the pending changes seen before ``before_t`` (the tick: a source that reports GPU by GPU
    sends one node's changes a few milliseconds apart) per node and (old, new), oldest first, into the
    run's changes and alerts."""
    due = [p for p in log.pending if p[0] < before_t]
    if not due:
        return
    log.pending = [p for p in log.pending if p[0] >= before_t]
    groups: dict[tuple[int, float, float], tuple[float, list[int]]] = {}
    for t, node, gpu, old, new in due:
        key = (node, old, new)
        first_t, gpus = groups.get(key, (t, []))
        if gpu not in gpus:
            gpus.append(gpu)
        groups[key] = (min(first_t, t), gpus)
    for (node, old, new), (t, gpus) in sorted(groups.items(), key=lambda item: (item[1][0], item[0][0])):
        change = PowerLimitChange(t, names[node], tuple(sorted(gpus)), old, new, gpus_per_node)
        log.changes.append(change)
        alerts.event(t, change.node, "power_limit", change.text(), "warning" if change.lowered else "info")
    if len(log.changes) > MAX_CHANGES:
        del log.changes[: len(log.changes) - MAX_CHANGES]
