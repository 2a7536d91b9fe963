"""Which of a run's nodes make up each rack: what the fleet table groups by and a rack's dashboard shows.

A run says how its nodes group where it knows: ``meta["racks"]``, one rack name per node (a watch
config's rack label, in node order), or ``meta["nodes_per_rack"]`` (the simulator's ``--racks``). Else
a rack is as many nodes as fill 72 GPUs (an NVL72 domain: 18 nodes of 4 GPUs). A rack's nodes are
consecutive in the run's node order; a ``racks`` list whose names do not come in runs (``a a b a``) or
is not one name per node is not used (the run is grouped by size), and :func:`rack_groups` says why.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tokenwatch.base.events import IntArray
from tokenwatch.core._run_info import RunInfo

GPUS_PER_RACK = 72  # an NVL72 domain: what "a rack" means when the run does not say


@dataclass(frozen=True, slots=True, eq=False)
class RackGroups:
    """Rack ``r`` is the run's nodes ``first[r] .. first[r] + count[r] - 1``; ``problem`` says why a
    ``racks`` label list was not used ("" when none was given or it was)."""

    names: tuple[str, ...]
    first: IntArray
    count: IntArray
    problem: str = ""

    def __len__(self) -> int:
        return len(self.names)

    def nodes(self, r: int) -> slice:
        start = int(self.first[r])
        return slice(start, start + int(self.count[r]))

    def padded_index(self) -> tuple[IntArray, np.ndarray]:
        """(racks, widest rack) node indexes and a mask of the real ones: per-rack figures of node
        arrays in one numpy pass (``values[index]`` where ``mask``, NaN elsewhere)."""
        width = int(self.count.max()) if len(self.count) else 0
        slots = np.arange(width)
        mask = slots[None, :] < self.count[:, None]
        index = np.where(mask, self.first[:, None] + slots[None, :], 0)
        return index, mask


def nodes_per_rack(run: RunInfo) -> int:
    """``meta["nodes_per_rack"]`` when the source says; otherwise as many nodes as fill 72 GPUs."""
    declared = run.meta.get("nodes_per_rack") if run.meta else None
    if isinstance(declared, int) and not isinstance(declared, bool) and declared > 0:
        return declared
    return max(1, GPUS_PER_RACK // max(1, run.gpus_per_node))


def rack_label(r: int, racks: int) -> str:
    """``rack01`` .. ``rack64`` (zero-padded to the widest number, at least two digits)."""
    return f"rack{r + 1:0{max(2, len(str(racks)))}d}"


def rack_groups(run: RunInfo) -> RackGroups:
    """The run's racks (see the module docstring)."""
    n = len(run.nodes)
    labels = run.meta.get("racks") if run.meta else None
    problem = ""
    if labels is not None:
        grouped, problem = _by_label(labels, n)
        if grouped is not None:
            return grouped
    per_rack = nodes_per_rack(run)
    racks = math.ceil(n / per_rack) if n else 0
    first = np.arange(racks, dtype=np.int64) * per_rack
    count = np.minimum(per_rack, n - first).astype(np.int64)
    return RackGroups(tuple(rack_label(r, racks) for r in range(racks)), first, count, problem)


def _by_label(labels: object, n: int) -> tuple[RackGroups | None, str]:
    if not isinstance(labels, list | tuple) or len(labels) != n:
        return None, f"meta racks is not one rack name per node ({n} nodes)"
    if not all(isinstance(label, str) and label for label in labels):
        return None, "meta racks holds a rack name that is not a non-empty string"
    starts = [i for i in range(n) if i == 0 or labels[i] != labels[i - 1]]
    names = tuple(labels[i] for i in starts)
    if len(set(names)) != len(names):
        again = next(name for k, name in enumerate(names) if name in names[:k])
        return None, f"rack {again}'s nodes are not listed together"
    first = np.asarray(starts, np.int64)
    count = np.diff(np.append(first, n)).astype(np.int64)
    return RackGroups(names, first, count), ""
