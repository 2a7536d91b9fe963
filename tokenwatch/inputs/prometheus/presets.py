"""PromQL for the metrics clusters already collect, built from the one catalogue of metric names
(:mod:`tokenwatch.sources.metric_catalogue`): dcgm-exporter (GPUs), vLLM / SGLang (progress,
latency), and tokenwatch's own /metrics (so one tokenwatch can read another's fleet).

Each query is a template: ``{node}`` is the label that names the node, ``{gpu}`` the GPU index label.
GPU queries return one series per (node, gpu) in tokenwatch's units (W, MHz, MiB, %, °C); progress
queries one series per node (cumulative counters); latency queries cumulative ``le`` buckets per node.
Where the catalogue lists several families for a role, ``a or b`` takes the first one each node (or
GPU) has, as a scrape does.
"""

from __future__ import annotations

from collections.abc import Mapping

from tokenwatch.base.events import GPU_METRICS, LatencyMetric
from tokenwatch.sources.metric_catalogue import (
    GPU_PRESET_NAMES,
    PRESETS,
    QUERY_PROGRESS_PRESET_NAMES,
    MetricPreset,
    ServerNames,
)

PROGRESS_FIELDS = ("tokens", "samples", "prompt_tokens")
LATENCY_FIELDS: tuple[LatencyMetric, ...] = ("ttft", "tpot", "e2e")
GPU_FIELDS = (*GPU_METRICS, "throttle_reasons")
ALL_FIELDS = (*GPU_FIELDS, *PROGRESS_FIELDS, *LATENCY_FIELDS)


WHOLE_GPU = '{GPU_I_ID=""}'  # a GPU's own series: no MIG instance label (an absent label matches "")


def first_present(by: str, exprs: list[str]) -> str:
    """``by (a)``, or for nodes without ``a`` ``by (b)``, ...: one family per node, as a scrape picks.
    (A bare ``or`` would match per bucket and could mix two families' buckets on one node.)"""
    chosen = f"{by} ({exprs[0]})"
    for expr in exprs[1:]:
        chosen = f"{chosen} or ({by} ({expr}) unless on ({{node}}) {chosen})"
    return chosen


def gpu_queries(metrics: MetricPreset) -> dict[str, str]:
    """Field -> PromQL template. A GPU's own series (not its MIG instances', which carry ``GPU_I_ID``,
    as a scrape reads them) as their mean; the clock-reasons bitmask as the largest (a mean of bitmasks
    means nothing)."""
    queries = {}
    for column, reads in metrics.gpu.items():
        alternatives = " or ".join(r.promql(WHOLE_GPU) for r in reads)
        queries[column] = f"avg by ({{node}}, {{gpu}}) ({alternatives})"
    if metrics.throttle_reasons:
        queries["throttle_reasons"] = (
            f"max by ({{node}}, {{gpu}}) ({' or '.join(r + WHOLE_GPU for r in metrics.throttle_reasons)})"
        )
    return queries


def progress_queries(names: ServerNames) -> dict[str, str]:
    """Field -> PromQL template: counters summed per node, ``le`` buckets summed per node and bound."""
    queries = {}
    for field, families in (
        ("tokens", names.tokens),
        ("samples", names.samples),
        ("prompt_tokens", names.prompt_tokens),
    ):
        if families:
            queries[field] = first_present("sum by ({node})", list(families))
    for metric, families in names.latency.items():
        queries[metric] = first_present("sum by ({node}, le)", [f + "_bucket" for f in families])
    return queries


GPU_PRESETS: Mapping[str, Mapping[str, str]] = {n: gpu_queries(PRESETS[n]) for n in GPU_PRESET_NAMES}
PROGRESS_PRESETS: Mapping[str, Mapping[str, str]] = {
    n: progress_queries(server)
    for n in QUERY_PROGRESS_PRESET_NAMES
    if (server := PRESETS[n].server) is not None
}


class PresetError(ValueError):
    """An unknown preset or query field; the message lists the valid ones."""


def build_queries(
    *,
    gpu: bool,
    progress: bool,
    gpu_preset: str,
    progress_preset: str,
    overrides: Mapping[str, str],
    node_label: str,
    gpu_label: str,
) -> dict[str, str]:
    """Field -> PromQL with the labels filled in. An override of "" drops that field."""
    unknown = set(overrides) - set(ALL_FIELDS)
    if unknown:
        raise PresetError(
            f"unknown query field(s) {', '.join(sorted(unknown))}; fields: {', '.join(ALL_FIELDS)}"
        )
    chosen: dict[str, str] = {}
    if gpu:
        if gpu_preset not in GPU_PRESETS:
            raise PresetError(f"unknown GPU preset {gpu_preset!r}; presets: {', '.join(GPU_PRESETS)}")
        chosen.update(GPU_PRESETS[gpu_preset])
    if progress:
        if progress_preset not in PROGRESS_PRESETS:
            raise PresetError(
                f"unknown progress preset {progress_preset!r}; presets: {', '.join(PROGRESS_PRESETS)}"
            )
        chosen.update(PROGRESS_PRESETS[progress_preset])
    for key, promql in overrides.items():
        if (key in GPU_FIELDS and gpu) or (key not in GPU_FIELDS and progress):
            chosen[key] = promql
    return {k: v.replace("{node}", node_label).replace("{gpu}", gpu_label) for k, v in chosen.items() if v}
