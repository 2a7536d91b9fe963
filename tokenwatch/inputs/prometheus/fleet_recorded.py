"""Where the fleet's rack figures come from: the recording rules' series, where the server holds them for
every rack, else the raw queries.

The raw queries aggregate every node's series each round, so a round's cost grows with the fleet's nodes;
the recorded series (``tokenwatch rules --recording``, :mod:`tokenwatch.sources.fleet_rules`) are one per
rack and figure, computed by the server at each rule evaluation from the same PromQL. The watch looks for
them when it lists the fleet and, while it reads the raw queries, at every alerting pass (rules loaded
later are found); it takes them only when they answer for every rack it knows (rules made with another
rack label, preset or rate window answer for none), and goes back to the raw queries the round they answer
for no rack at all (rules unloaded). Each change is said in one line, and the run's start records which.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tokenwatch.base.events import Notice
from tokenwatch.inputs.prometheus.api import PrometheusApi, RangeSeries, Sample
from tokenwatch.sources.fleet_rules import COMPLETES_AN_EVALUATION, RECORDED_PREFIX, RuleSet

SOURCE = "prometheus-fleet"


class FigureQueries:
    """The rack-figure queries in use (field -> PromQL): :attr:`raw` or :attr:`recorded`."""

    def __init__(self, rule_set: RuleSet) -> None:
        self.rack_label = rule_set.rack_label
        self.raw = rule_set.expressions()
        self.recorded = rule_set.recorded()
        self.using_recorded = False
        self._decided = False

    @property
    def queries(self) -> dict[str, str]:
        return self.recorded if self.using_recorded else self.raw

    @property
    def kind(self) -> str:
        """``recorded`` or ``raw``, as the run's start records it."""
        return "recorded" if self.using_recorded else "raw"

    def probe(self) -> str:
        """The query that says which racks have recorded figures: one series per such rack."""
        return f"group by ({self.rack_label}) ({self.recorded[COMPLETES_AN_EVALUATION]})"

    def found(self, t: float, answer: list[Sample] | None, racks: Sequence[str]) -> Notice | None:
        """Judges a probe's answer (None: it failed) against the racks the watch knows; a notice when
        the choice is first made or changes."""
        covered = {labels.get(self.rack_label) for labels, _ in answer or ()}
        use = bool(racks) and covered.issuperset(racks)
        if self._decided and use == self.using_recorded:
            return None
        self._decided, self.using_recorded = True, use
        if use:
            names = f"{RECORDED_PREFIX}* ({self.recorded['nodes_total'].split('{', 1)[1].rstrip('}')})"
            return Notice(
                t,
                "info",
                f"prometheus fleet: rack figures from the recording rules' series {names}, "
                f"one series per rack and figure",
                source=SOURCE,
            )
        return Notice(
            t,
            "info",
            f"prometheus fleet: rack figures from the raw queries (no recorded series for every rack: "
            f"{self.probe()}; `tokenwatch rules --recording` makes them)",
            source=SOURCE,
        )

    def lost(self, t: float) -> Notice:
        """The recorded series answered no rack this round: the raw queries from now on."""
        self.using_recorded = False
        return Notice(
            t,
            "info",
            "prometheus fleet: the recorded series answer for no rack: rack figures from the raw queries",
            source=SOURCE,
        )

    async def range_answers(
        self, api: PrometheusApi, first: float, last: float, step: float
    ) -> tuple[dict[str, list[RangeSeries]], dict[str, BaseException]]:
        """The rack figures from ``first`` to ``last`` (Unix times, every ``step``): the recorded series
        where they are in use, and the raw queries for the steps before their first point (rules loaded
        after the run began: a history of the raw figures, never a gap the rules' start made)."""
        answered, failed = await api.query_range_all(self.queries, first, last, step)
        if not self.using_recorded:
            return answered, failed
        # The step from which the rules wrote every figure (the figure they write last: fleet_rules.py).
        firsts = [float(times[0]) for _, times, _ in answered.get(COMPLETES_AN_EVALUATION, []) if len(times)]
        recorded_from = min(firsts) if firsts else None
        if recorded_from is not None and recorded_from <= first + step / 2:
            return answered, failed
        raw_last = last if recorded_from is None else recorded_from - step
        raw, failed_raw = await api.query_range_all(self.raw, first, raw_last, step)
        for field in raw.keys() | answered.keys():  # the raw points lie before the recorded ones: both kept
            answered[field] = raw.get(field, []) + from_step(answered.get(field, []), recorded_from)
        return answered, failed | failed_raw


def from_step(series: list[RangeSeries], t: float | None) -> list[RangeSeries]:
    """Each series' points from ``t`` on (None: none). An evaluation still being written when the range
    was asked has some figures' points and not yet the last one's: those steps are the raw queries'."""
    if t is None:
        return []
    kept = []
    for labels, times, values in series:
        at = int(np.searchsorted(times, t - 1e-6))
        if at < len(times):
            kept.append((labels, times[at:], values[at:]))
    return kept
