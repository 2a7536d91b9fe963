"""A fleet's per-node reading through its Prometheus server: the node reader and its queries.

The fleet collector (:mod:`tokenwatch.inputs.prometheus.fleet`) reads the nodes themselves (counters,
GPU telemetry, latency buckets) only for the racks on screen and the alerting pass. It does so with a
:class:`PrometheusQueryCollector` over the fleet's ``rack/node`` names, whose queries group by rack and
node and have the server join the two labels into one (:data:`FLEET_NODE_LABEL`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from tokenwatch.base.clock import Clock
from tokenwatch.inputs.prometheus.fleet_settings import FleetSettings
from tokenwatch.inputs.prometheus.query import PrometheusQueryCollector
from tokenwatch.inputs.prometheus.scrape_times import SCRAPED_AT, scrape_time_query
from tokenwatch.sources.fleet_queries import FleetPreset, node_metric_names, query, rack_matcher, scoped_names

FLEET_NODE_LABEL = "tokenwatch_fleet_node"  # rack/node, joined by the server for the node queries


def fleet_query(s: FleetSettings, template: str, racks: frozenset[str] | None = None) -> str:
    """``template`` with the fleet's labels and window, its selectors scoped to ``racks`` (None: all)."""
    return query(
        template,
        rack=s.rack_label,
        node=s.node_label,
        window_s=s.window_s,
        matcher=rack_matcher(s.rack_label, racks),
    )


def fleet_node_reader(
    s: FleetSettings,
    preset: FleetPreset,
    nodes: tuple[str, ...],
    gpus_per_node: int,
    now: Callable[[], float],
    clock: Clock,
) -> PrometheusQueryCollector:
    """The per-node reader (counters, GPUs, latency buckets) over the fleet's ``rack/node`` names:
    its queries group by rack and node, and the server joins the two into one label."""
    reader = PrometheusQueryCollector(
        url=s.url,
        nodes=nodes,
        gpus_per_node=gpus_per_node,
        node_label=f"{s.rack_label}, {s.node_label}",
        gpu_label="gpu",
        gpu_preset=preset.gpu_preset,
        progress_preset=preset.progress_preset,
        now=now,
        clock=clock,
        baseline=not preset.since_run_start,
    )
    scraped_at = scrape_time_query(preset.progress_preset)
    if scraped_at is not None:  # each node's counters stamped when scraped (scrape_times.py)
        reader.queries[SCRAPED_AT] = scraped_at.replace("{node}", reader.node_label)
    reader.queries = {
        field: f'label_join({promql}, "{FLEET_NODE_LABEL}", "/", "{s.rack_label}", "{s.node_label}")'
        for field, promql in reader.queries.items()
    }
    reader.node_label = FLEET_NODE_LABEL
    return reader


def fleet_node_queries(
    s: FleetSettings, preset: FleetPreset, reader_queries: Mapping[str, str], racks: frozenset[str] | None
) -> dict[str, str]:
    """The node reader's queries, for the given racks only (None: the whole fleet). Each answer
    keeps only the joined node label (and ``gpu`` or ``le``): the rack and node labels it was
    joined from are dropped by the server, a third less JSON in a 50,000-sample alerting pass."""

    drop = f"max without ({s.rack_label}, {s.node_label})"
    joined = dict(reader_queries)
    if preset.node_status:
        status = fleet_query(s, preset.node_status, racks)
        joined["status"] = (
            f'label_join({status}, "{FLEET_NODE_LABEL}", "/", "{s.rack_label}", "{s.node_label}")'
        )
    if racks is None:
        return {f: f"{drop} ({q})" for f, q in joined.items()}
    # The rack's own series only (the selectors scoped), and the join keeps out any series a
    # selector the catalogue does not name brought in.
    matcher, names = rack_matcher(s.rack_label, racks), node_metric_names(preset)
    members = fleet_query(s, f"group by ($rack) ({preset.up})", racks)
    on = f"on ({s.rack_label})"
    return {
        f: f"{drop} (({scoped_names(q, names, matcher)}) and {on} ({members}))" for f, q in joined.items()
    }
