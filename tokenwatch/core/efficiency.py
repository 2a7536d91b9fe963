"""Power efficiency of a run: measured tokens/s per watt, and the TDP-based figure of the published tables.

The published generational tables divide the rack's tokens/s by GPUs x TDP (the board power limit),
not by measured power: it needs no power meter and compares generations on their rated envelope.
Both are reported, named apart, because they answer different questions.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

from tokenwatch.core.snapshot import RackSnapshot
from tokenwatch.core.summary import RunSummary


@dataclass(frozen=True, slots=True)
class Efficiency:
    """Units: tokens/s, W; ``*_per_w`` in tokens/s per W (= tokens per joule)."""

    tokens_per_s: float
    gpus: int | None  # None: not known (a LoadGen summary without its system description)
    mean_power_w: float | None  # measured, whole run (energy / duration)
    measured_tokens_per_s_per_w: float | None  # generated tokens / energy
    tdp_w: float | None  # per GPU
    tdp_source: str  # where tdp_w came from, for the reader
    rack_tdp_w: float | None  # gpus x tdp_w
    tdp_tokens_per_s_per_w: float | None  # tokens_per_s / rack_tdp_w

    @property
    def mean_power_per_gpu_w(self) -> float | None:
        if self.mean_power_w is None or not self.gpus:
            return None
        return self.mean_power_w / self.gpus


def gpu_power_limit_w(snapshot: RackSnapshot) -> float | None:
    """The GPUs' typical power limit in W (median over GPUs of the latest reported limit)."""
    limits = snapshot.gpus.metric("power_limit_w")
    finite = limits[np.isfinite(limits) & (limits > 0)]
    return float(np.median(finite)) if finite.size else None


def efficiency(summary: RunSummary, tdp_w: float | None = None, tdp_source: str = "") -> Efficiency:
    """Efficiency of ``summary``; ``tdp_w`` per GPU (None: the TDP-based figure is unknown)."""
    tokens_per_s = summary.tokens_per_s
    gpus = summary.gpus_counted  # the GPUs that took part, as per GPU divides by them
    tdp_ok = tdp_w is not None and math.isfinite(tdp_w) and tdp_w > 0
    rack_tdp = gpus * tdp_w if tdp_ok and gpus else None  # type: ignore[operator]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        tdp_eff = tokens_per_s / rack_tdp if rack_tdp else None
    return Efficiency(
        tokens_per_s=tokens_per_s,
        gpus=gpus,
        mean_power_w=summary.power_mean_w,
        measured_tokens_per_s_per_w=summary.tokens_per_joule,
        tdp_w=tdp_w if tdp_ok else None,
        tdp_source=tdp_source if tdp_ok else "unknown",
        rack_tdp_w=rack_tdp,
        tdp_tokens_per_s_per_w=tdp_eff,
    )
