"""What each node did: whether it stopped partway (down or stale), from when, and how much of its work.

A node figure compared with another run's (``--baseline``) means little without this: a node down from
30:00 has a measured mean over its 30 minutes of work, not over the run, and the rack's sum counts its
partial work. Every comparison carries these words beside its figures (the summary's table, its JSON, the
dashboard, the report), made here once (from a core's state: :mod:`tokenwatch.core._stopped_partway`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from tokenwatch.base.durations import format_clock
from tokenwatch.base.formatting import json_number

# "": it did not stop partway (finished, or still going); "unfinished": up when its run was cut short
# (interrupted, or a stream with no run end)
Stopped = Literal["", "down", "stale", "unfinished"]
_SINCE = {"down": "from", "stale": "from", "unfinished": "at"}

_NAMES_SHOWN = 6


@dataclass(frozen=True, slots=True)
class NodeOutcome:
    """A node's run so far. ``since_s``: run time it went down or stale (NaN: not known, or it did not
    stop); ``sample_share``: the share (0..1) of the samples its LoadGen was given that it completed
    (NaN: its plan is not known); ``worked_s``: its first report to its last growth (NaN: no work)."""

    stopped: Stopped = ""
    since_s: float = math.nan
    sample_share: float = math.nan
    worked_s: float = math.nan

    @property
    def partial(self) -> bool:
        """Whether the node stopped partway: its figure covers only part of the run."""
        return self.stopped != ""

    def text(self) -> str:
        """``down from 30:00, 37 % of its samples`` (``after 29:59 of work`` where its plan is not
        known; ``unfinished at 40:00, ...`` in a run cut short); empty for a node that did not stop."""
        if not self.partial:
            return ""
        when = f" {_SINCE[self.stopped]} {format_clock(self.since_s)}" if math.isfinite(self.since_s) else ""
        words = self.stopped + when
        if math.isfinite(self.sample_share):
            return f"{words}, {self.sample_share * 100:.0f} % of its samples"
        if math.isfinite(self.worked_s) and self.worked_s > 0:
            return f"{words}, after {format_clock(self.worked_s)} of work"
        return f"{words}, no work done"

    def to_json(self) -> dict[str, Any]:
        """``{"finished": false, "stopped": "down", "since_s": 1800.0, "sample_share": 0.37, "text": ...}``;
        a node that did not stop is ``{"finished": true, "stopped": null, ...}`` with nulls."""
        return {
            "finished": not self.partial,
            "stopped": self.stopped or None,
            "since_s": json_number(self.since_s, 3),
            "sample_share": json_number(self.sample_share, 4),
            "text": self.text() or None,
        }


WHOLE = NodeOutcome()


def covers_line(
    run: Sequence[tuple[str, NodeOutcome]],
    baseline: Sequence[tuple[str, NodeOutcome]] | None,
    word: str,
    *,
    brief: bool = False,
) -> str:
    """What a rack figure compared with a baseline's covers, in words: ``17 of 18 nodes finished in this
    run (node07 down from 30:00, 37 % of its samples); all 18 in the baseline``. Each side is (node name,
    outcome) pairs; ``word``: ``finished`` for a finished run, ``up`` for one under way. ``baseline``: the
    reference's nodes held against the run's (None: not known, as for a system result). Empty when no node
    of either stopped partway. ``brief``: the counts without the names (``17 of 18 nodes up in this run;
    all 18 up in the baseline``), for a one-line header."""
    if not any(o.partial for _, o in run) and not any(o.partial for _, o in baseline or ()):
        return ""
    sides = [(run, "this run"), *([(baseline, "the baseline")] if baseline else [])]
    parts = [_side(nodes, word, where, brief) for nodes, where in sides]
    return "; ".join(parts)


def _side(nodes: Sequence[tuple[str, NodeOutcome]], word: str, where: str, brief: bool) -> str:
    total = len(nodes)
    partial = [(name, o) for name, o in nodes if o.partial]
    if not partial:
        return f"all {total} {word} in {where}"
    head = f"{total - len(partial)} of {total} nodes {word} in {where}"
    if brief:
        return head
    if len(partial) == 1:
        name, outcome = partial[0]
        return f"{head} ({name} {outcome.text()})"
    first = partial[0][1]
    if len(partial) == total and all(
        o.stopped == first.stopped and o.since_s == first.since_s for _, o in partial
    ):
        when = (
            f" {_SINCE[first.stopped]} {format_clock(first.since_s)}" if math.isfinite(first.since_s) else ""
        )
        return f"{head} (all {total} {first.stopped}{when})"  # a run cut short: every node at once
    names = [name for name, _ in partial]
    shown = ", ".join(names[:_NAMES_SHOWN]) + (
        f", +{len(names) - _NAMES_SHOWN} more" if len(names) > _NAMES_SHOWN else ""
    )
    return f"{head} ({shown} stopped partway)"


def node_mark(run: NodeOutcome, baseline: NodeOutcome) -> str:
    """Beside a node's figure against its baseline counterpart: what either of them did, when it stopped
    partway (``this run: down from 03:00, 30 % of its samples``; ``baseline: down from 30:00, ...``);
    empty when both did their work."""
    parts = [f"{where}: {o.text()}" for where, o in (("this run", run), ("baseline", baseline)) if o.partial]
    return "; ".join(parts)
