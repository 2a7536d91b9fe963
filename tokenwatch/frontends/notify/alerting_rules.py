"""``tokenwatch rules --alerting``: Prometheus alerting rules over the series tokenwatch's exporter serves
(the rule file, with the recording group beside them, is made in ``cli/rules_cmd.py``).

A fleet then alerts through its own Prometheus and Alertmanager, with no tokenwatch open. The rules read
the fleet's own queries (:data:`tokenwatch.sources.fleet_queries.TOKENWATCH`: a node's health and a rack's
projected verdict, as the fleet board reads them) and the exporter's per-node series, and carry the
alert names tokenwatch's own notifications use, so a receiver routes both the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

from tokenwatch.frontends.notify.notification import kind_of
from tokenwatch.sources.fleet_queries import TOKENWATCH, filled


@dataclass(frozen=True, slots=True)
class RuleSettings:
    """``for_s``: how long a condition holds before it fires; ``straggler_pct``: how far below the median
    node a node's windowed tokens/s must be (the core's default threshold); ``stale_s``: how long a rack
    that was reporting may be silent; ``rack_label``: the label that names a series' rack."""

    for_s: float = 60.0
    straggler_pct: float = 5.0
    stale_s: float = 60.0
    rack_label: str = "rack"


def _duration(seconds: float) -> str:
    return f"{max(0, round(seconds))}s"


def alerting_rules(settings: RuleSettings) -> dict[str, object]:
    """The rule file as a document (``groups:``), ready for ``yaml.safe_dump``."""
    rack = settings.rack_label

    def query(template: str) -> str:
        return filled(template, rack=rack, node="node", window_s=60.0)

    def rule(core_kind: str, expr: str, severity: str, summary: str, for_s: float) -> dict[str, object]:
        _, alertname, _ = kind_of(core_kind)
        return {
            "alert": alertname,
            "expr": expr,
            "for": _duration(for_s),
            "labels": {"severity": severity, "rule": core_kind, "source": "prometheus"},
            "annotations": {"summary": summary},
        }

    where = f"{{{{ $labels.{rack} }}}}"
    node = "{{ $labels.node }}"
    # A rack that has reported in the last ten minutes, has not ended, and has no sample now: its
    # exporter stopped answering (Prometheus marks its series stale at the first failed scrape).
    seen = f"max by ({rack}) (last_over_time(tokenwatch_run_ended{{}}[10m]) == 0)"
    stale = f"{seen} unless max by ({rack}) (tokenwatch_run_ended{{}})"
    rules = [
        rule(
            "verdict_invalid",
            f"{query(TOKENWATCH.projected_valid)} == 0",
            "critical",
            f"{where}: the MLPerf verdict is projected INVALID",
            settings.for_s,
        ),
        rule(
            "down",
            f"{query(TOKENWATCH.up)} == 0",
            "critical",
            f"{node} of {where} is down or stale",
            settings.for_s,
        ),
        rule(
            "straggler",
            f"tokenwatch_node_delta_vs_median_percent{{}} < -{settings.straggler_pct:g}",
            "warning",
            f'{node} of {where}: tokens/s {{{{ $value | printf "%.1f" }}}} % against the median node\'s',
            settings.for_s,
        ),
        rule(
            "rack_stale",
            stale,
            "critical",
            f"{where} has stopped reporting (its tokenwatch exporter does not answer)",
            settings.stale_s,
        ),
    ]
    rules[-1]["alert"] = "TokenwatchRackStale"
    return {"groups": [{"name": "tokenwatch", "rules": rules}]}
