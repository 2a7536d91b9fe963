"""GPU error evidence over the run: XID errors and NVLink error counters, where the source reports them
(dcgm-exporter ``DCGM_FI_DEV_XID_ERRORS``, the value of the GPU's last XID, and
``DCGM_FI_DEV_NVLINK_{CRC_FLIT,CRC_DATA,REPLAY,RECOVERY}_ERROR_COUNT_TOTAL``, summed).

Only what happened during the run counts: an XID value the GPU already held at its first reading is an
old error (dcgm keeps the last one until the driver reloads), and the NVLink counters count from their
first reading.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tokenwatch.base.events import FloatArray


@dataclass(slots=True, eq=False)
class GpuErrors:
    """Per GPU (nodes, gpus): the XID value seen first, the XID raised during the run and when (NaN:
    none); the NVLink error counter's first and latest readings, and when it first and last grew."""

    xid_first: FloatArray
    xid: FloatArray
    xid_t: FloatArray
    nvlink_base: FloatArray
    nvlink_last: FloatArray
    nvlink_first_growth_t: FloatArray
    nvlink_last_growth_t: FloatArray

    @classmethod
    def for_rack(cls, nodes: int, gpus: int) -> GpuErrors:
        return cls(*(np.full((nodes, gpus), np.nan) for _ in range(7)))

    def note(
        self, where: tuple[np.ndarray | int | slice, ...], t: float, xid: FloatArray, nvlink: FloatArray
    ) -> None:
        """Readings of the GPUs at ``where`` at ``t`` (NaN: not reported)."""
        ok = np.isfinite(xid)
        if ok.any():
            first = self.xid_first[where]
            self.xid_first[where] = np.where(ok & np.isnan(first), xid, first)
            first = self.xid_first[where]
            # A new, non-zero XID (not the one the GPU held when we first looked) is an error of this run.
            raised = ok & (xid > 0) & (xid != first) & (xid != self.xid[where])
            self.xid_t[where] = np.where(raised, t, self.xid_t[where])
            self.xid[where] = np.where(raised, xid, self.xid[where])
        ok = np.isfinite(nvlink)
        if ok.any():
            base, last = self.nvlink_base[where], self.nvlink_last[where]
            with np.errstate(invalid="ignore"):
                grew = ok & (nvlink > last)
            self.nvlink_first_growth_t[where] = np.where(
                grew & np.isnan(self.nvlink_first_growth_t[where]), t, self.nvlink_first_growth_t[where]
            )
            self.nvlink_last_growth_t[where] = np.where(grew, t, self.nvlink_last_growth_t[where])
            self.nvlink_base[where] = np.where(ok & np.isnan(base), nvlink, base)
            self.nvlink_last[where] = np.where(ok, nvlink, last)

    def nvlink_new(self) -> FloatArray:
        """(nodes, gpus) NVLink errors counted since the first reading (NaN: no counter)."""
        return self.nvlink_last - self.nvlink_base
