"""LoadGen is the judge once it has written its result: its verdict and figures replace the projection.

A node's detail log ends with LoadGen's result (``result_validity`` and its figures). From then on that
node's verdict can no longer change: a node whose LoadGen wrote INVALID decides the rack INVALID at once
(each node is its own LoadGen run and the rack is VALID only when every node is), in LoadGen's own words
(the "Result is" lines that say NO), with what stopping the rest now would save; once every node's LoadGen
wrote VALID the rack is DECIDED VALID, its figure the sum of LoadGen's own (exact, no band).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from tokenwatch.core._state import RackState
from tokenwatch.core.final_figure import final_tokens_per_s
from tokenwatch.core.verdict._decided import SAVES, rest_end_s, saving_words
from tokenwatch.core.verdict.final import NodeVerdict, node_from_detail, worst_checks
from tokenwatch.mlperf.forecast import Band, Forecast, RuleForecast

_SHOWN_NODES = 3


def loadgen_results(state: RackState) -> list[NodeVerdict | None]:
    """Each node's verdict from its LoadGen result (None where its LoadGen has written none yet), judged
    again only when a detail record has arrived since."""
    verdict = state.verdict
    memo = verdict.loadgen_memo
    if memo is not None and memo[0] == verdict.details_version and len(memo[1]) == len(state.run.nodes):
        return memo[1]
    results = [node_from_detail(name, verdict.details[i]) for i, name in enumerate(state.run.nodes)]
    verdict.loadgen_memo = (verdict.details_version, results)
    return results


def judged_by_loadgen(state: RackState, now: float, fc: Forecast) -> Forecast:
    """``fc`` with LoadGen's word where its results are written (see the module's docstring)."""
    if not any("result_validity" in values for values in state.verdict.details):
        return fc
    results = loadgen_results(state)
    written = [r for r in results if r is not None]
    if not written:
        return fc
    failed = [r for r in written if r.loadgen_valid is False]
    if failed:
        waiting = np.array([r is None for r in results])
        sentence = _failed_sentence(state, failed)
        end = rest_end_s(state, now, ~waiting) if waiting.any() and not state.ended else None
        if end is not None and end > now:
            sentence += f"{SAVES}{saving_words(end - now, state.run.gpus)}"
        return dataclasses.replace(fc, rules=_rules(written, fc), valid=False, decided=sentence)
    if len(written) < len(results):
        return fc  # the nodes that wrote VALID so far decide nothing yet: the rest may still fail
    figure = final_tokens_per_s(state)
    band = Band(figure, figure, figure) if math.isfinite(figure) and figure > 0 else fc.tokens_per_s
    every = "every node's LoadGen" if len(results) > 1 else "LoadGen"
    return dataclasses.replace(
        fc, tokens_per_s=band, rules=_rules(written, fc), valid=True, decided=f"{every} wrote VALID"
    )


def _failed_sentence(state: RackState, failed: list[NodeVerdict]) -> str:
    """``cannot be VALID: node03's LoadGen wrote INVALID: Early stopping satisfied: NO; TTFT: Run
    unsuccessful. Processed 368 queries. Would need to run at least 91 more queries, ...``: the first
    failed node's "Result is" lines that say NO, and its early-stopping advice, as LoadGen wrote them."""
    first = failed[0]
    said = [line.strip() for line in first.lines if line.rstrip().endswith("NO")]
    values = state.verdict.details[state.index[first.name]]
    for metric in ("ttft", "tpot"):
        advice = values.get(f"early_stopping_{metric}_result")
        if isinstance(advice, str) and "unsuccessful" in advice:
            said.append(f"{metric.upper()}: " + " ".join(advice.replace("*", " ").split()))
    why = f": {'; '.join(said)}" if said else ""  # no parentheses: the headless line puts it in a pair
    names = [f.name for f in failed[:_SHOWN_NODES]]
    if len(failed) > _SHOWN_NODES:
        names.append(f"+{len(failed) - _SHOWN_NODES} more")
    whose = f"{names[0]}'s LoadGen" if len(failed) == 1 else f"the LoadGen runs of {', '.join(names)}"
    return f"cannot be VALID: {whose} wrote INVALID{why}"


def _rules(written: list[NodeVerdict], fc: Forecast) -> tuple[RuleForecast, ...]:
    """The rules as LoadGen judged them, each at its worst node as the final verdict shows it, then the
    projection's others."""
    worst = worst_checks([(node.name, node.verdict) for node in written if node.verdict is not None])
    judged = tuple(
        RuleForecast(
            c.name,
            c.value,
            c.value,
            c.limit,
            c.margin,
            c.ok,
            c.unit,
            configured=True,
            estimated=c.estimated,
            node=c.node,
        )
        for c in worst
    )
    named = {c.name for c in worst}
    return judged + tuple(r for r in fc.rules if r.name not in named)
