"""PromQL for watching a fleet through Prometheus: each rack's figures aggregated by the server.

A preset names, per node, the series the board is made of (``$rack`` and ``$node`` stand for the labels
that name a node's rack and the node; ``$window`` for the rate window): whether it is healthy, its
windowed tokens/s, the same for nodes that are running, its measured mean, its power and GPU count.
:func:`rack_queries` wraps them in ``sum by (rack)``, ``count``, ``min``/``max``, ``quantile`` and
``bottomk``, so every interval the server sends one number per rack and figure (64 racks: ~800 numbers)
instead of every node's and GPU's series.

Every selector is written with braces (``tokenwatch_node_up{}``): :func:`scoped` adds a rack matcher
inside each, which is how drill-down and history ask for one rack without touching the others' series.

Mimir (and engines like it) shard only ``sum``, ``min``, ``max``, ``count`` and ``avg`` by series:
:data:`UNSHARDED` lists the queries that use ``quantile`` and ``bottomk``, which such an engine answers
on one querier (over the fleet's per-node series, ~1,000 of them: cheap either way).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from tokenwatch.sources.metric_catalogue import PRESETS


@dataclass(frozen=True, slots=True)
class FleetPreset:
    """Per-node PromQL (one series per rack and node). ``throttling`` has a series only for nodes
    throttling now ("" = not known); ``projected_*`` one per rack where the racks serve a projection
    ("" = none); ``fleet_tokens`` a generated-token counter summed over the fleet (where the run
    began). ``gpu_preset`` / ``progress_preset`` read the nodes themselves (drill-down, alerts);
    ``since_run_start``: their counters count from the run's start (else from each server's start,
    so a first reading is a baseline). ``node_status``: each node's state as its rack's watch judged
    it (the drill-down's node states)."""

    up: str
    rate: str
    running: str
    mean: str
    power: str
    gpus: str
    throttling: str
    projected_tokens_per_s: str
    projected_valid: str
    fleet_tokens: str
    gpu_preset: str
    progress_preset: str
    since_run_start: bool
    node_status: str = ""  # one series per node of its current state (label ``status``); "" = none


# tokenwatch's own /metrics, one headless `tokenwatch watch` per rack (or one serving many racks): the
# same nodes the rack's own core judges, so the fleet's figures per rack are the rack's.
_ON = "on ($rack, $node)"
_UP_NOW = f'{_ON} (tokenwatch_node_status{{status="up"}} == 1)'
TOKENWATCH = FleetPreset(
    up="tokenwatch_node_up{}",
    rate="tokenwatch_node_tokens_per_second{}",
    # The node table's "running": up (not finished, stale or down) and some work done.
    running=(
        f"(tokenwatch_node_tokens_per_second{{}} and {_UP_NOW}"
        f" and {_ON} (tokenwatch_node_generated_tokens_total{{}} > 0))"
    ),
    mean=f"(tokenwatch_node_measured_tokens_per_second{{}} > 0) and {_ON} (tokenwatch_node_up{{}} == 1)",
    power="tokenwatch_node_power_watts{}",
    gpus="tokenwatch_node_gpus{}",
    throttling="tokenwatch_node_throttling{} == 1",
    projected_tokens_per_s="max by ($rack) (tokenwatch_rack_projected_tokens_per_second{})",
    projected_valid="max by ($rack) (tokenwatch_rack_projected_valid{})",
    fleet_tokens="sum(tokenwatch_node_generated_tokens_total{})",
    gpu_preset="tokenwatch",
    progress_preset="tokenwatch",
    since_run_start=True,
    node_status="tokenwatch_node_status{} == 1",
)


def _server_preset(name: str) -> FleetPreset:
    """An inference server's counters and dcgm-exporter's GPUs, scraped straight into Prometheus with
    the rack as a target label: rates over ``$window``; the spread is that of the windowed rates (the
    servers keep no run-long mean)."""
    server = PRESETS[name].server
    assert server is not None
    assert server.tokens
    tokens = server.tokens[0]
    rate = f"sum by ($rack, $node) (rate({tokens}{{}}[$window]))"
    return FleetPreset(
        up=f"group by ($rack, $node) ({tokens}{{}})",
        rate=rate,
        running=f"({rate}) > 0",
        mean=f"({rate}) > 0",
        power="sum by ($rack, $node) (DCGM_FI_DEV_POWER_USAGE{})",
        gpus="count by ($rack, $node) (DCGM_FI_DEV_POWER_USAGE{})",
        throttling="",
        projected_tokens_per_s="",
        projected_valid="",
        fleet_tokens=f"sum({tokens}{{}})",
        gpu_preset="dcgm",
        progress_preset=name,
        since_run_start=False,
    )


FLEET_PRESETS: Mapping[str, FleetPreset] = {
    "tokenwatch": TOKENWATCH,
    "vllm": _server_preset("vllm"),
    "sglang": _server_preset("sglang"),
}

# The rack figures (RACK_FIGURES columns, plus the worst node's name and cause) and how each is asked.
# ``quantile`` and ``bottomk`` are the queries an engine that shards only sum/min/max/count/avg
# evaluates unsharded.
UNSHARDED = ("worst", "worst_throttling", "median_tokens_per_s")


def rack_queries(preset: FleetPreset) -> dict[str, str]:
    """Field -> PromQL template (``$rack``, ``$node``, ``$window`` still to fill), one series per rack
    (``worst`` / ``worst_throttling``: per rack, its slowest running node's series)."""
    queries = {
        "nodes_total": f"count by ($rack) ({preset.up})",
        "nodes_up": f"sum by ($rack) ({preset.up})",
        "nodes_running": f"count by ($rack) ({preset.running})",
        "gpus": f"sum by ($rack) ({preset.gpus})",
        "tokens_per_s": f"sum by ($rack) ({preset.rate})",
        "power_w": f"sum by ($rack) ({preset.power})",
        "mean_max_tokens_per_s": f"max by ($rack) ({preset.mean})",
        "mean_min_tokens_per_s": f"min by ($rack) ({preset.mean})",
        "worst": f"bottomk by ($rack) (1, {preset.running})",
        "median_tokens_per_s": f"quantile by ($rack) (0.5, {preset.running})",
    }
    if preset.throttling:
        queries["worst_throttling"] = (
            f"bottomk by ($rack) (1, {preset.running}) and on ($rack, $node) ({preset.throttling})"
        )
    if preset.projected_tokens_per_s:
        queries["projected_tokens_per_s"] = preset.projected_tokens_per_s
    if preset.projected_valid:
        queries["projected_valid"] = preset.projected_valid
    return queries


_SELECTOR = re.compile(r"\{([^{}]*)\}")


def label_value(value: str) -> str:
    """A label value inside a PromQL string literal."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def rack_matcher(rack_label: str, racks: frozenset[str] | None) -> str:
    """``rack=~"a|b"`` for the racks given ("" for the whole fleet)."""
    if racks is None:
        return ""
    alternatives = "|".join(re.escape(r) for r in sorted(racks))
    return f'{rack_label}=~"{label_value(alternatives)}"'


def scoped(template: str, matcher: str) -> str:
    """Every ``{...}`` selector of ``template`` with ``matcher`` added (inserted as it is: its label
    values are never read as selectors)."""
    if not matcher:
        return template

    def add(found: re.Match[str]) -> str:
        inner = found.group(1).strip()
        return "{" + (f"{inner}, {matcher}" if inner else matcher) + "}"

    return _SELECTOR.sub(add, template)


def filled(template: str, *, rack: str, node: str, window_s: float) -> str:
    """The labels and the rate window put in."""
    return (
        template.replace("$rack", rack)
        .replace("$node", node)
        .replace("$window", f"{max(1, round(window_s))}s")
    )


def node_metric_names(preset: FleetPreset) -> frozenset[str]:
    """Every metric the node reader's catalogue queries name: its GPU and progress presets'."""
    return PRESETS[preset.gpu_preset].sample_names | PRESETS[preset.progress_preset].sample_names


def scoped_names(promql: str, names: Iterable[str], matcher: str) -> str:
    """Every selector of ``names`` (a bare name, as the catalogue's queries write them, so :func:`scoped`
    finds nothing there, or a name with matchers of its own such as ``{GPU_I_ID=""}``) with ``matcher``
    added: a drill-down then reads one rack's series instead of all the fleet's GPUs' before a join drops
    the others."""
    alternatives = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    if not matcher or not alternatives:
        return promql
    # String literals, label lists and existing selectors are matched first and kept as they are.
    token = re.compile(
        rf'("(?:[^"\\]|\\.)*"|\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)|\{{[^}}]*\}})'
        rf"|(?<![\w:])({alternatives})(\{{[^}}]*\}})?(?![\w:(])"
    )

    def add(found: re.Match[str]) -> str:
        name, selector = found.group(2), found.group(3)
        if name is None:
            return found.group(0)
        inner = selector[1:-1].strip().rstrip(",") if selector else ""  # a name's own matchers stay
        return f"{name}{{{inner},{matcher}}}" if inner else f"{name}{{{matcher}}}"

    return token.sub(add, promql)


def query(template: str, *, rack: str, node: str, window_s: float, matcher: str = "") -> str:
    """The PromQL to send: labels filled in first (label names, never braces), then the matcher."""
    return scoped(filled(template, rack=rack, node=node, window_s=window_s), matcher)
