"""A fleet's racks projected together: each rack's view of the state handed the inputs and projection of
its forecast, made for all racks in one pass (:mod:`tokenwatch.mlperf.projected_together`).

A fleet's verdict tick forecasts each of its racks as a run of its own, through a view of the state that
holds the rack's rows (core/fleet/_rack_view.py). Their projections, a few dozen numpy calls each on 18
nodes, were most of each forecast: made together, their peers read rack by rack, they are the same
figures for a fraction of the cost; so are their latency rules' counts projected to the end and their
early-stopping budgets (Server). Each view's forecast then finds its inputs and projection made
(``VerdictState.progress_memo``, under the key its projection asks for) and makes the rest (its rules,
warm-up, the decided verdict) as it would on its own.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from tokenwatch.core._state import RackState
from tokenwatch.core.verdict._inputs import node_progress, over_limits, projected_nodes, projection_key
from tokenwatch.mlperf.forecast import latency_sample_totals
from tokenwatch.mlperf.projected_together import counts_together, project_together


def project_racks_together(views: Sequence[RackState], now: float) -> None:
    """Hand each of ``views`` (a fleet's racks, standing still until their forecasts are made) the
    projection inputs its forecast at ``now`` reads, projected together where they read alike. A run
    that has ended is judged on the nodes that finished, rack by rack: nothing is handed over."""
    if not views or any(view.ended for view in views):
        return
    keys, progress, latency = [], [], []
    for view in views:
        _, keep = projected_nodes(view, now)
        keys.append(projection_key(view, now, keep))
        progress.append(node_progress(view, now, keep))
        latency.append(over_limits(view, keep))
    together = project_together(progress, views[0].config.forecast)
    counted = counts_together(latency, [latency_sample_totals(p) for p in progress]) if latency[0] else None
    for i, (view, key, made) in enumerate(zip(views, keys, progress, strict=True)):
        if together is not None:
            made = dataclasses.replace(made, projection=together[i])
        view.verdict.progress_memo = (key, made, latency[i] if counted is None else counted[i])
