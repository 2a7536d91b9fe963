"""Prometheus recording rules for the fleet's rack figures, made from the PromQL the fleet watch asks.

Every interval the fleet watch asks the server for a dozen figures per rack (:func:`rack_queries`), each an
aggregation over every node's series: at 1,000 racks that is ~18,000 node series read for each figure,
every round, by every watch open. A recording rule has the server compute each figure once per
evaluation and keep it as one series per rack (``tokenwatch_rack:tokens_per_s{rack="rack07"}``): a watch
then reads 1,000 series per figure, however many nodes and GPUs the racks hold.

The rules' expressions are the fleet watch's own raw queries (:func:`RuleSet.expressions`, filled by the
same :func:`query` with the same labels and rate window), so a recorded figure is the raw query's value at
the rule's last evaluation, never a second formula that could drift. Each recorded series carries the
preset it was made for (and, where the preset's queries take a rate window, that window), so a watch with
another preset or window does not read them as its own.
"""

from __future__ import annotations

from dataclasses import dataclass

from tokenwatch.sources.fleet_queries import FLEET_PRESETS, label_value, query, rack_queries

RECORDED_PREFIX = "tokenwatch_rack:"  # the recorded series' names: rack level, then the figure's field
PRESET_LABEL = "tokenwatch_preset"  # which fleet preset's queries a recorded series holds
WINDOW_LABEL = "tokenwatch_rate_window"  # the rate window they were made with (presets that take one)
GROUP_NAME = "tokenwatch-rack-figures"


# The figure whose recorded series says that the rules' evaluation wrote every figure (see RuleSet.rules).
COMPLETES_AN_EVALUATION = "nodes_total"


def recorded_name(field: str) -> str:
    """The recorded series of a rack figure (``nodes_up`` -> ``tokenwatch_rack:nodes_up``)."""
    return RECORDED_PREFIX + field


def window_text(window_s: float) -> str:
    """A rate window as the queries write it (``60s``)."""
    return f"{max(1, round(window_s))}s"


@dataclass(frozen=True, slots=True)
class RuleSet:
    """The fleet's rack figures for one preset, its labels and its rate window (``window_s``, seconds;
    read only by presets that take ``rate()``): what a fleet config's ``fleet:`` section asks."""

    preset: str = "tokenwatch"
    rack_label: str = "rack"
    node_label: str = "node"
    window_s: float = 60.0

    def templates(self) -> dict[str, str]:
        """Field -> the fleet's PromQL template (labels and window still to fill)."""
        return rack_queries(FLEET_PRESETS[self.preset])

    def expressions(self) -> dict[str, str]:
        """Field -> the raw PromQL the fleet watch asks for the whole fleet (no rack matcher)."""
        return {
            field: query(template, rack=self.rack_label, node=self.node_label, window_s=self.window_s)
            for field, template in self.templates().items()
        }

    def labels(self) -> dict[str, str]:
        """The labels each recorded series carries beside the expression's own."""
        labels = {PRESET_LABEL: self.preset}
        if any("$window" in template for template in self.templates().values()):
            labels[WINDOW_LABEL] = window_text(self.window_s)
        return labels

    def recorded(self) -> dict[str, str]:
        """Field -> the selector of its recorded series (what a watch asks where the rules run)."""
        matchers = ", ".join(f'{k}="{label_value(v)}"' for k, v in self.labels().items())
        return {field: f"{recorded_name(field)}{{{matchers}}}" for field in self.templates()}

    def rules(self) -> list[dict[str, object]]:
        """The recording rules, one per figure, as a rule file lists them: ``nodes_total``'s last.

        A group's rules are evaluated one after another at one timestamp, each one's series written as
        it is done. The watch takes a rack's recorded ``nodes_total`` for "this rack's figures are
        recorded" (its probe, and the backfill's first recorded step), so it is the last written: a
        server read during the rules' first evaluation had ``nodes_total`` and none of the figures after
        it, and that step's rack figures were unknown in the recorded history where the raw had them."""
        labels = self.labels()
        expressions = self.expressions()
        order = [field for field in expressions if field != COMPLETES_AN_EVALUATION] + [
            COMPLETES_AN_EVALUATION
        ]
        return [{"record": recorded_name(f), "expr": expressions[f], "labels": dict(labels)} for f in order]

    def group(self, interval_s: float) -> dict[str, object]:
        """The rule group, evaluated every ``interval_s`` (the fleet watch's interval: a recorded figure
        is at most that much older than the raw query's)."""
        return {"name": GROUP_NAME, "interval": window_text(interval_s), "rules": self.rules()}
