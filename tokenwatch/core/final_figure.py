"""The rack's final figure: one number for every surface (header, rack table, verdict panel and badge,
headless end line, JSONL ``end``, ``summarize``, the report, ``/metrics``), and one sentence for the nodes
MLPerf would leave out of it.

The figure is the published rack method: the sum of the nodes' own figures, each node's generated tokens
over its own first-to-last-change span (:meth:`RackState.measured_means`), over every node that did
work. A node that never finished its LoadGen run (down, stale or still running when the run ended) has no
LoadGen result, so MLPerf's figure has no place for it and the run is INVALID; its work up to then is in
the sum, and :func:`left_out_note` says which nodes those are and why, the same words everywhere.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tokenwatch.base.durations import format_clock
from tokenwatch.base.events import FloatArray
from tokenwatch.core._state import RackState
from tokenwatch.core.config import STATE_CODE

_UP, _STALE, _DOWN, _FINISHED, _IDLE = (STATE_CODE[s] for s in ("up", "stale", "down", "finished", "idle"))
_NAMES_SHOWN = 6


@dataclass(frozen=True, slots=True)
class LeftOut:
    """A node MLPerf's figure has no result for: its name and why (``down since 30:00``)."""

    name: str
    why: str


def node_figures(state: RackState) -> list[float]:
    """Each node's own figure (tokens/s over its own span; NaN where it did no work), in node order."""
    tokens_per_s, _ = state.measured_means()
    return [float(x) for x in tokens_per_s]


def did_work(tokens_per_s: float) -> bool:
    """Whether a node's figure counts (a node that never produced a token has none)."""
    return math.isfinite(tokens_per_s) and tokens_per_s > 0


def rack_sum(figures: list[float] | FloatArray) -> float:
    """The rack figure from node figures: their sum over the nodes that did work, added in node order (the
    same float whichever surface asks). An array's nodes are picked in one numpy pass (18,000 nodes at
    every snapshot), then added as a list's are."""
    if isinstance(figures, np.ndarray):
        with np.errstate(invalid="ignore"):
            return float(sum(figures[np.isfinite(figures) & (figures > 0)].tolist()))
    return float(sum(x for x in figures if did_work(x)))


def final_tokens_per_s(state: RackState) -> float:
    """The rack's final figure (tokens/s): the sum of the nodes' own figures."""
    return rack_sum(node_figures(state))


def left_out(state: RackState) -> tuple[LeftOut, ...]:
    """The nodes without a LoadGen result once the run has ended (none before, nor for an interrupted run,
    which says so itself)."""
    if not state.ended or state.end_reason == "interrupted":
        return ()
    codes = state.effective_state(state.now)
    out = []
    for i in np.flatnonzero(codes != _FINISHED).tolist():
        code = int(codes[i])
        if code in (_UP, _IDLE):
            why = "still running" if code == _UP else "idle"
        else:
            since, _ = state.why_stopped(i, code)
            why = "down" if code == _DOWN else "stale"
            if math.isfinite(since):
                why += f" since {format_clock(since)}"
        out.append(LeftOut(state.run.nodes[i], why))
    return tuple(out)


def left_out_note(nodes: tuple[LeftOut, ...]) -> str:
    """``left out by MLPerf (no LoadGen result): node07 (down since 30:00); the figure counts its work up to
    then`` ("" when every node finished)."""
    if not nodes:
        return ""
    shown = [f"{n.name} ({n.why})" for n in nodes[:_NAMES_SHOWN]]
    if len(nodes) > _NAMES_SHOWN:
        shown.append(f"+{len(nodes) - _NAMES_SHOWN} more")
    whose = "its" if len(nodes) == 1 else "their"
    listed = ", ".join(shown)
    return f"left out by MLPerf (no LoadGen result): {listed}; the figure counts {whose} work up to then"
