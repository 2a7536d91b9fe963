"""The index columns of one node's GPU batches, made once per set of GPUs and reused read after read.

A node reports the same GPUs every sampling round, and the core recognises a batch's ``node_index``
and ``gpu`` arrays by identity (its one-node fast path takes row slices instead of gathers), so a
source must hand it the same arrays each time rather than equal new ones. The cache lives on the
object that reads the node's stream, so it goes when that stream does.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tokenwatch.base.events import IntArray

# A node's stream has one usual GPU set, a few more where a chunk tears a round; anything beyond
# this many distinct sets is not being reused, so the cache starts over rather than grow.
MAX_GPU_SETS = 64


class NodeGpuIndex:
    """``columns(gpus)`` -> read-only ``(node_index, gpu)`` int64 arrays for node ``node_index``."""

    __slots__ = ("_columns", "node_index")

    def __init__(self, node_index: int) -> None:
        self.node_index = node_index
        self._columns: dict[tuple[int, ...], tuple[IntArray, IntArray]] = {}

    def columns(self, gpus: Sequence[int]) -> tuple[IntArray, IntArray]:
        key = tuple(gpus)
        found = self._columns.get(key)
        if found is not None:
            return found
        if len(self._columns) >= MAX_GPU_SETS:
            self._columns.clear()
        nodes = np.full(len(key), self.node_index, dtype=np.int64)
        gpu = np.array(key, dtype=np.int64)
        nodes.flags.writeable = gpu.flags.writeable = False
        self._columns[key] = (nodes, gpu)
        return nodes, gpu
