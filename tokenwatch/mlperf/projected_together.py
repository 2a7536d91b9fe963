"""Many racks' nodes projected in one pass: what each rack's own :func:`project_nodes` would make.

A fleet's verdict tick forecasts every rack as a run of its own. The projection of a node reads only its
own progress and, for a node with no usual pace or one far below its peers, its rack's running nodes:
so the racks' progress joined end to end and projected once, their peers read rack by rack
(:func:`project_groups`), gives each rack's nodes the figures its own projection gives them, bit for bit,
in a few dozen numpy calls for the fleet instead of a few dozen for each of 64 racks.

Only progress that reads alike is joined: the same scenario, time and kinds of input (a rack with a
sample count where another has none is projected on its own), paces measured over the same spans.

Likewise the latency rules' counts (Server): each node's count over a limit projected to its end and
its early-stopping budget read node by node (:func:`counts_together`), the rules then read per rack.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from tokenwatch.base.events import FloatArray
from tokenwatch.mlperf.pace import Assumptions, Pace
from tokenwatch.mlperf.rules_forecast import OverLimit, count_projection
from tokenwatch.mlperf.throughput_forecast import NodeProgress, NodeProjection, project_groups

# The per-node fields of NodeProgress a projection reads, joined end to end (times_s and tokens, the
# series, are read only to measure a pace, which joined progress brings with it).
_PER_NODE = (
    "tokens_done",
    "samples_done",
    "start_s",
    "last_change_s",
    "finished",
    "total_samples",
    "schedule_end_s",
    "final_latency_s",
    "timing_s",
    "end_gap_s",
)
_WHOLE = ("scenario", "now_s", "tokens_per_sample")


def project_together(progress: Sequence[NodeProgress], a: Assumptions) -> list[NodeProjection] | None:
    """Each of ``progress``'s projection (as :func:`project_nodes` makes it), made in one pass; None
    where they do not read alike (each is then projected on its own)."""
    if len(progress) < 2 or not _alike(progress):
        return None
    groups = _end_to_end([len(p.tokens_done) for p in progress])
    first = progress[0]
    joined: dict[str, Any] = {
        name: None if getattr(first, name) is None else np.concatenate([getattr(p, name) for p in progress])
        for name in _PER_NODE
    }
    paces = [p.pace for p in progress if p.pace is not None]  # _alike: every one measured
    pace = Pace(
        np.concatenate([q.now for q in paces]),
        np.concatenate([q.usual for q in paces]),
        np.concatenate([q.noise for q in paces]),
        paces[0].window_s,
        paces[0].block_s,
    )
    whole = dataclasses.replace(first, **joined, pace=pace, times_s=np.zeros(0), tokens=np.zeros(0))
    nodes, projectable = project_groups(whole, a, groups)
    return [_rows(nodes, g, ok) for g, ok in zip(groups, projectable, strict=True)]


def _end_to_end(sizes: list[int]) -> list[slice]:
    """Where each of groups of ``sizes`` nodes lies once they are joined end to end."""
    ends = np.cumsum(sizes).tolist()
    return [slice(end - size, end) for size, end in zip(sizes, ends, strict=True)]


def _alike(progress: Sequence[NodeProgress]) -> bool:
    """Whether ``progress`` can be joined: the same whole-run inputs, the same kinds of per-node input
    (each given or each None), paces measured over the same spans."""
    first = progress[0]
    for p in progress:
        if p.pace is None or p.projection is not None:
            return False
        if any(getattr(p, name) != getattr(first, name) for name in _WHOLE):
            return False
        for name in _PER_NODE:
            mine, theirs = getattr(p, name), getattr(first, name)
            if (mine is None) != (theirs is None) or (mine is not None and mine.dtype != theirs.dtype):
                return False  # joined, a dtype of their own would be cast to another
        assert first.pace is not None
        if (p.pace.window_s, p.pace.block_s) != (first.pace.window_s, first.pace.block_s):
            return False
    return True


def _rows(nodes: NodeProjection, rows: slice, projectable: bool) -> NodeProjection:
    """The projection of the nodes ``rows`` of ``nodes``, whose group's flag is ``projectable``."""
    arrays = {
        f.name: getattr(nodes, f.name)[rows]
        for f in dataclasses.fields(NodeProjection)
        if f.name != "projectable"
    }
    return NodeProjection(**arrays, projectable=projectable)


def counts_together(
    latency: Sequence[Sequence[OverLimit]], totals: Sequence[FloatArray]
) -> list[list[OverLimit]] | None:
    """Each rack's over-limit counts (``latency``, each rack's metrics in the same order; ``totals``: its
    nodes' final sample counts) with their projection to the end made in one pass
    (:attr:`OverLimit.projected`); None where the racks count different metrics."""
    if len(latency) < 2 or any(
        [o.metric for o in rack] != [o.metric for o in latency[0]] for rack in latency
    ):
        return None
    sizes = [len(total) for total in totals]
    groups = _end_to_end(sizes)
    total = np.concatenate(totals)
    out: list[list[OverLimit]] = [[] for _ in latency]
    for m, first in enumerate(latency[0]):
        metric = [rack[m] for rack in latency]
        if any(len(o.completed) != size for o, size in zip(metric, sizes, strict=True)):
            return None
        joined = OverLimit(
            first.metric,
            first.limit_s,
            np.concatenate([o.completed for o in metric]),
            np.concatenate([o.low for o in metric]),
            np.concatenate([o.high for o in metric]),
        )
        projected = count_projection(joined, total)
        for r, (o, g) in enumerate(zip(metric, groups, strict=True)):
            out[r].append(dataclasses.replace(o, projected=projected.rows(g)))
    return out
