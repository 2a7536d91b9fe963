"""Nodes' work counters written as differences from the previous batch: exact, and a tenth off a recording.

A progress batch carries each node's cumulative samples and tokens (``tokens``: hundreds of millions
an hour into a run, a fresh 9-digit number per node per second); zstd cannot shrink them, and they were
a seventh of a recording's bytes. The difference from the same nodes' previous batch (~34,000 tokens and
~7 samples at 1 s) is a few digits that repeat. Counters are whole numbers, so the difference gives the
counter back exactly whatever its size: a ``.zst`` recording's progress batch carries ``samples_delta``,
``tokens_delta`` (and ``prompt_tokens_delta`` where it has prompt tokens) in place of the counters
whenever the batch before it in the same frame covered the same nodes with the same columns;
``counts_base_t`` names that batch, so a reader that lost it (damage) skips the line with a warning
rather than read a wrong count.

As with the energy counters (:mod:`tokenwatch.recording.energy_deltas`) a chain never crosses a zstd
frame, so a reader can begin at any frame and damage stays inside one; plain ``.jsonl`` recordings keep
whole values.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from tokenwatch.base.events import ProgressBatch

COUNTERS = ("samples", "tokens", "prompt_tokens")  # the record's keys, in the order it writes them
DELTA_SUFFIX = "_delta"
BASE_T_KEY = "counts_base_t"
DELTA_KEYS = tuple(name + DELTA_SUFFIX for name in COUNTERS)


class CountsBaseLostError(ValueError):
    """A batch of differences that cannot be counted from (its base lost to damage, or malformed): the
    line is skipped with this message."""


class CounterDeltaWriter:
    """The writer's side: the last counters of each set of nodes, and the record rewritten."""

    __slots__ = ("_last",)

    def __init__(self) -> None:
        self._last: dict[tuple[bytes, bool], tuple[float, tuple[np.ndarray, ...]]] = {}

    def new_frame(self) -> None:
        self._last.clear()

    def rewrite(self, event: ProgressBatch, record: dict[str, Any]) -> dict[str, Any]:
        """``record`` (the batch's encoding) with its counters as differences where a base is kept."""
        counters = _counters(event)
        layout = (event.node_index.tobytes(), event.prompt_tokens_done is not None)
        previous = self._last.get(layout)
        # Counters below zero are not counts (a source's garbage): written whole, and no base for the next.
        if not all(len(c) == 0 or c.min() >= 0 for c in counters):
            self._last.pop(layout, None)
            return record
        self._last[layout] = (event.t, counters)
        if previous is None:
            return record
        base_t, base = previous
        out: dict[str, Any] = {"k": record["k"], "t": record["t"], "node_index": record["node_index"]}
        out[BASE_T_KEY] = base_t
        for name, now, then in zip(COUNTERS, counters, base, strict=False):
            out[name + DELTA_SUFFIX] = now - then  # both in 0..2^63-1: the difference cannot overflow
        if "filled" in record:
            out["filled"] = record["filled"]
        return out


def _counters(event: ProgressBatch) -> tuple[np.ndarray, ...]:
    arrays = (event.samples_done, event.tokens_done, event.prompt_tokens_done)
    return tuple(np.asarray(a, np.int64) for a in arrays if a is not None)


class CounterDeltaReader:
    """The reader's side: turns the differences back into counters (in place) from the bases kept."""

    __slots__ = ("_last",)

    def __init__(self) -> None:
        self._last: dict[tuple[tuple[Any, ...], bool], tuple[Any, tuple[Any, ...]]] = {}

    def new_frame(self) -> None:
        self._last.clear()

    def restore(self, record: Mapping[str, Any]) -> Mapping[str, Any]:
        """``record`` with its counters whole. :class:`CountsBaseLostError`: differences whose base is
        not the batch this reader last saw of those nodes. Malformed values are left for the batch's
        own decoding to name."""
        if not isinstance(record, dict) or not isinstance(record.get("node_index"), list):
            return record
        deltas = "tokens_delta" in record
        prompt = ("prompt_tokens_delta" if deltas else "prompt_tokens") in record
        layout = (tuple(record["node_index"]), prompt)
        names = COUNTERS if prompt else COUNTERS[:2]
        if not deltas:
            self._last[layout] = (record.get("t"), tuple(record.get(name) for name in names))
            return record
        previous = self._last.get(layout)
        if previous is None or previous[0] != record.get(BASE_T_KEY):
            # The base kept stays: a span appended twice (cat a b) is skipped, and the line after it,
            # counted from the last batch read before it, reads again.
            raise CountsBaseLostError(
                "its counts are differences from a batch not read here (lost to damage, or before "
                "where reading began): skipped, not read wrong"
            )
        del self._last[layout]  # until this batch is read whole: a malformed one is no base
        counters = []
        for name, then in zip(names, previous[1], strict=True):
            delta = record.pop(name + DELTA_SUFFIX, None)
            try:
                base, step = np.asarray(then, np.int64), np.array(delta, dtype=np.int64)
            except (TypeError, ValueError, OverflowError):
                raise CountsBaseLostError(f"{name}{DELTA_SUFFIX} must be a list of whole numbers") from None
            if not isinstance(delta, list) or step.shape != base.shape or base.ndim != 1:
                raise CountsBaseLostError(f"{name}{DELTA_SUFFIX} must have one whole number per node")
            now = base + step  # wraps below zero past 2^63-1: refused as a negative count by the decoding
            counters.append(now)
            record[name] = now.tolist()
        record.pop(BASE_T_KEY, None)
        self._last[layout] = (record.get("t"), tuple(counters))
        return record
