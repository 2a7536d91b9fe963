"""``tokenwatch rules``: one Prometheus rule file, with the alerting group, the recording group, or both."""

from __future__ import annotations

import argparse
import re
import sys

import yaml

from tokenwatch.cli.usage import UsageError

_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")


def _label(option: str, value: str) -> str:
    if not _LABEL_NAME.fullmatch(value):
        raise UsageError(f"tokenwatch rules: {option} {value!r} is not a Prometheus label name")
    return value


def rules_text(args: argparse.Namespace) -> str:
    """The rule file the options ask for (neither --alerting nor --recording: both groups)."""
    from tokenwatch.frontends.notify.alerting_rules import RuleSettings, alerting_rules
    from tokenwatch.sources.fleet_queries import FLEET_PRESETS
    from tokenwatch.sources.fleet_rules import RuleSet

    both = not args.alerting and not args.recording
    if not 0 < args.straggler_pct < 100:
        raise UsageError("tokenwatch rules: --straggler-pct must be between 0 and 100")
    rack_label = _label("--rack-label", args.rack_label)
    node_label = _label("--node-label", args.node_label)
    if args.preset not in FLEET_PRESETS:
        raise UsageError(
            f"tokenwatch rules: unknown --preset {args.preset!r}; presets: {', '.join(FLEET_PRESETS)}"
        )
    groups: list[object] = []
    kinds = []
    if args.alerting or both:
        settings = RuleSettings(args.for_s, args.straggler_pct, args.stale_after, rack_label)
        alerting = alerting_rules(settings)["groups"]
        assert isinstance(alerting, list)
        groups += alerting
        kinds.append("alerting rules")
    if args.recording or both:
        rule_set = RuleSet(args.preset, rack_label, node_label, args.rate_window)
        groups.append(rule_set.group(args.interval))
        kinds.append(f"recording rules of the fleet's rack figures (preset {args.preset})")
    header = (
        f"# Prometheus {' and '.join(kinds)}: tokenwatch rules.\n"
        "# Load them with rule_files: in prometheus.yml; check them with promtool check rules.\n"
    )
    return header + yaml.safe_dump({"groups": groups}, sort_keys=False, width=1000)


def cmd_rules(args: argparse.Namespace) -> int:
    sys.stdout.write(rules_text(args))
    return 0
