"""Recognising the common shapes of GPU and progress batches, so the core can take row slices and
reshapes instead of numpy's fancy indexing (gathers and scatters) on every tick."""

from __future__ import annotations

import numpy as np


class BatchLayout:
    """Answers for a run of ``nodes`` x ``gpus``. Every answer is cached by array identity: decoders,
    the simulator and live sources reuse the same index arrays tick after tick."""

    def __init__(self, nodes: int, gpus: int) -> None:
        self.nodes = nodes
        self.gpus = gpus
        self._whole_rack_key: tuple[object, object, bool] = (None, None, False)
        self._whole_nodes_key: tuple[object, bool] = (None, False)
        self._one_node_cache: dict[int, tuple[np.ndarray, np.ndarray, int | None]] = {}

    def whole_rack(self, ni: np.ndarray, gi: np.ndarray) -> bool:
        """True for a batch with one row per GPU in node-major order (the simulator's and replay's
        common case), which takes a reshape."""
        if ni is self._whole_rack_key[0] and gi is self._whole_rack_key[1]:
            return self._whole_rack_key[2]
        n, g = self.nodes, self.gpus
        whole = (
            len(ni) == n * g
            and np.array_equal(ni, np.repeat(np.arange(n), g))
            and np.array_equal(gi, np.tile(np.arange(g), n))
        )
        self._whole_rack_key = (ni, gi, whole)
        return whole

    def one_node(self, ni: np.ndarray, gi: np.ndarray) -> int | None:
        """The node of a batch that is one node's GPUs 0..k-1 in order (a live node's read), else None.
        One cache entry per node (live sources keep an index array per node)."""
        cached = self._one_node_cache.get(id(ni))
        if cached is not None and cached[0] is ni and cached[1] is gi:
            return cached[2]
        k = len(ni)
        node = int(ni[0]) if k else -1
        ok = (
            0 < k <= self.gpus
            and 0 <= node < self.nodes
            and bool((ni == node).all())
            and np.array_equal(gi, np.arange(k))
        )
        if len(self._one_node_cache) > 4 * self.nodes + 64:  # bounded: arrays that were not reused
            self._one_node_cache.clear()
        self._one_node_cache[id(ni)] = (ni, gi, node if ok else None)  # keeps ni alive: ids stay unique
        return node if ok else None

    def whole_nodes(self, ni: np.ndarray) -> bool:
        """One row per node in order (a progress batch of the whole rack)."""
        if ni is self._whole_nodes_key[0]:
            return self._whole_nodes_key[1]
        whole = len(ni) == self.nodes and np.array_equal(ni, np.arange(len(ni)))
        self._whole_nodes_key = (ni, whole)
        return whole
