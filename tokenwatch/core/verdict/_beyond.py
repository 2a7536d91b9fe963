"""Rules already broken beyond recovery: a state of the run that no query still to come can mend.

Each node is its own LoadGen run and the rack is VALID only when every node is, so one node past recovery
decides the verdict INVALID before the run ends. What is certain, node by node (counts only grow):

* a LoadGen setting that fixes a rule's outcome at the start: a Server query schedule shorter than
  ``min_duration``, fewer queries (samples) planned than ``min_query_count`` (``min_sample_count``);
* a Server latency percentile: more of its planned ``N`` queries already surely over the limit than the
  99th percentile allows (``N - floor(0.99 N) - 1``);
* early stopping: with the queries over the limit so far, even if every query still to come were under
  it, the planned ``N`` are fewer than LoadGen would need (:func:`~tokenwatch.mlperf.early_stopping.
  queries_needed`); a run planned under 459 queries cannot pass it at all.

Only surely-over counts are used (a histogram's straddling bucket is not), and only a plan LoadGen wrote
or the run's own count, so a run that ends VALID is never decided. Each reason is a sentence that ends in
what LoadGen will write, quoted in its own words (no parentheses: the headless line puts the reason in one
pair).
"""

from __future__ import annotations

import math

import numpy as np

from tokenwatch.base.formatting import group, seconds_ms
from tokenwatch.core._state import RackState
from tokenwatch.core.verdict._inputs import planned_totals
from tokenwatch.core.verdict._state import LIMIT_METRICS
from tokenwatch.mlperf.early_stopping import overlatency_budgets, queries_needed
from tokenwatch.mlperf.forecast import Forecast

_PERCENTILE = 0.99
WILL_WRITE = "LoadGen will write"  # what LoadGen's summary will say, quoted word for word after it


def beyond_recovery(state: RackState, fc: Forecast) -> str:
    """Why VALID is out of reach (``cannot be VALID: ...``), or "" while it is not (see the docstring)."""
    for rule in fc.rules:
        if rule.configured and rule.ok is False and rule.projected is not None and rule.limit is not None:
            if rule.name == "min_duration":
                return (
                    f"cannot be VALID: LoadGen's query schedule lasts {group(rule.projected)} s, under the "
                    f"{group(rule.limit)} s min_duration, so {WILL_WRITE} 'Min duration satisfied : NO'"
                )
            if rule.name == "min_queries":
                return (
                    f"cannot be VALID: LoadGen issues {group(rule.projected)} {rule.unit}, fewer than the "
                    f"{group(rule.limit)} its settings need, so {WILL_WRITE} 'Min queries satisfied : NO'"
                )
    if state.run.scenario != "Server":
        return ""
    total, _ = planned_totals(state)
    if total is None:
        return ""
    for metric in LIMIT_METRICS:
        why = _latency_beyond(state, metric, np.floor(total).astype(np.int64))
        if why:
            return why
    return ""


def _latency_beyond(state: RackState, metric: str, planned: np.ndarray) -> str:
    counts = state.verdict.counts[metric]  # type: ignore[index]
    judged, surely_over, _ = counts.totals()
    if not judged.any():
        return ""
    name = metric.upper()
    allowed = planned - np.floor(planned * _PERCENTILE).astype(np.int64) - 1
    p99_broken = np.flatnonzero((surely_over > allowed) & (judged > 0))
    if p99_broken.size:
        i = int(p99_broken[0])
        limit = float(counts.limit_s[i])
        shown = seconds_ms(limit) if math.isfinite(limit) else "its"
        return (
            f"cannot be VALID: {state.run.nodes[i]}'s {name} is over its {shown} limit in "
            f"{group(int(surely_over[i]))} queries, more than the {group(int(allowed[i]))} of its "
            f"{group(int(planned[i]))} "
            f"the 99th percentile allows, so {WILL_WRITE} 'Performance constraints satisfied : NO'"
        )
    budget = overlatency_budgets(np.asarray(planned, np.int64))
    es_broken = np.flatnonzero((surely_over > budget) & (judged > 0))
    if not es_broken.size:
        return ""
    i = int(es_broken[0])
    done, over, n = int(judged[i]), int(surely_over[i]), int(planned[i])
    more = max(0, queries_needed(over) - done)
    left = max(0, n - done)
    return (
        f"cannot be VALID: {state.run.nodes[i]}'s {name} early stopping, in LoadGen's words: "
        f"Processed {done} queries. Would need to run at least {more} more queries"
        f", and its LoadGen issues {group(left)} more, so {WILL_WRITE} 'Early stopping satisfied: NO'"
    )
