"""GPU energy per node: from the GPUs' own cumulative energy counters where they have one, else from their
power readings integrated tick by tick.

The counter (NVML ``nvmlDeviceGetTotalEnergyConsumption``, dcgm ``DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION``;
mJ at the source, J in the event model) is what the GPU measured itself, every joule, where integrated
power holds one reading for a whole tick and misses what a silent GPU drew. A counter counts from whenever
the driver started it, so its first reading is a baseline; a reading below the last one means it
restarted (a driver reload): what it had counted is kept and the new reading counts from zero.

A node's energy comes from its counters when every GPU of it that has reported has a counter; otherwise
(an nvidia-smi source, which has no such field; an older recording) from its integrated power. The run's
energy is the sum over nodes, and says which it is: ``counter``, ``power``, or ``mixed``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tokenwatch.base.events import FloatArray

COUNTER, POWER, MIXED = "counter", "power", "mixed"
# Marks drawn beside a tokens-per-joule figure: which energy it divides by.
SOURCE_MARK = {COUNTER: "∑", POWER: "∫", MIXED: "±"}
SOURCE_WORDS = {COUNTER: "GPU energy counters", POWER: "integrated power", MIXED: "counters and power"}


@dataclass(slots=True, eq=False)
class EnergyCounters:
    """Per GPU (nodes, gpus): the counter's first reading (NaN: no counter yet), its latest, and what its
    earlier lives counted before restarts; per node, power integrated over the ticks (J)."""

    base: FloatArray
    last: FloatArray
    offset: FloatArray
    node_integrated_j: FloatArray

    @classmethod
    def for_rack(cls, nodes: int, gpus: int) -> EnergyCounters:
        return cls(
            np.full((nodes, gpus), np.nan),
            np.full((nodes, gpus), np.nan),
            np.zeros((nodes, gpus)),
            np.zeros(nodes),
        )

    def note(self, where: tuple[np.ndarray | int | slice, ...], readings: FloatArray) -> None:
        """Counter readings (J) of the GPUs at ``where`` (an index into the (nodes, gpus) arrays, in the
        order of ``readings``). NaN readings (no counter, or not this time) change nothing."""
        ok = np.isfinite(readings) & (readings >= 0)
        if not ok.any():  # the common case for sources without a counter: one pass, nothing written
            return
        last = self.last[where]
        with np.errstate(invalid="ignore"):
            restarted = ok & (readings < last)  # NaN (first reading) compares False
        if restarted.any():
            self.offset[where] = self.offset[where] + np.where(restarted, last, 0.0)
        self.base[where] = np.where(ok & np.isnan(self.base[where]), readings, self.base[where])
        self.last[where] = np.where(ok, readings, last)

    def counted_j(self) -> FloatArray:
        """(nodes, gpus) energy each GPU's counter has counted since its first reading (NaN: no counter)."""
        return self.offset + self.last - self.base


def node_energy(counters: EnergyCounters, gpu_seen: np.ndarray) -> tuple[FloatArray, np.ndarray]:
    """Per node: (energy in J, from its counters?). ``gpu_seen`` (nodes, gpus) bool: GPUs that have
    reported. A node with no GPU reading has NaN energy."""
    has_counter = np.isfinite(counters.base)
    from_counter = has_counter.any(axis=1) & (has_counter | ~gpu_seen).all(axis=1)
    counted = np.where(has_counter, counters.counted_j(), 0.0).sum(axis=1)
    energy = np.where(from_counter, counted, counters.node_integrated_j)
    return np.where(gpu_seen.any(axis=1), energy, np.nan), from_counter


def energy_source(from_counter: np.ndarray, has_energy: np.ndarray) -> str:
    """``counter`` when every node with energy has it from its counters, ``power`` when none does,
    ``mixed`` otherwise; "" when no node has any energy."""
    counted = from_counter[has_energy]
    if not counted.size:
        return ""
    if counted.all():
        return COUNTER
    return MIXED if counted.any() else POWER


def run_energy(counters: EnergyCounters, gpu_seen: np.ndarray) -> tuple[float, str]:
    """The run's GPU energy so far (J, NaN when nothing reported) and its source
    (:func:`energy_source`)."""
    energy, from_counter = node_energy(counters, gpu_seen)
    has = np.isfinite(energy)
    if not has.any():
        return math.nan, ""
    return float(energy[has].sum()), energy_source(from_counter, has)


def tokens_per_joule(tokens: np.ndarray, energy_j: FloatArray) -> FloatArray:
    """Per node: generated tokens over its energy (NaN where it has none)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(energy_j > 0, tokens / np.where(energy_j > 0, energy_j, 1.0), np.nan)
