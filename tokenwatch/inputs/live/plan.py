"""From the config to each node's sources, with the parsers of :mod:`tokenwatch.sources`.

This is the one place that knows which parser reads which source; the transports, tails and
supervisors below it only move bytes.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from typing import Any

from tokenwatch.inputs.config import DEFAULT_DCGM_URL, ProgressSourceConfig, WatchConfig
from tokenwatch.inputs.live.node_sources import (
    CommandSource,
    FileTailSource,
    NodeSource,
    ScrapeSource,
    StreamParser,
)
from tokenwatch.inputs.live.nvml_source import NvmlSource
from tokenwatch.inputs.live.targets import NodeTarget

# Sources another collector serves for the whole rack (a Prometheus server), not per node.
RACK_WIDE_GPU = ("prometheus",)
RACK_WIDE_PROGRESS = ("prometheus-query",)


def node_sources(
    config: WatchConfig, target: NodeTarget, *, gpu: bool = True, nvml: Any = None, tail_poll_s: float = 0.25
) -> list[NodeSource]:
    """The sources of one node, in config order (the GPU source first)."""
    sources: list[NodeSource] = []
    g = config.gpu
    if gpu and g.source == "nvidia-smi":
        from tokenwatch.sources.nvidia_smi import DEFAULT_QUERY_FIELDS, NvidiaSmiParser, query_command

        argv = query_command(DEFAULT_QUERY_FIELDS, interval_ms=max(100, round(g.interval_s * 1000)))
        sources.append(
            CommandSource(
                "nvidia-smi",
                argv,
                lambda node_index: NvidiaSmiParser(target.name, DEFAULT_QUERY_FIELDS, node_index=node_index),
                g.interval_s,
            )
        )
    elif gpu and g.source in ("amd-smi", "xpu-smi", "nvidia-smi-dmon"):
        sources.append(_vendor_smi_source(g.source, target.name, g.interval_s))
    elif gpu and g.source == "nvml":
        sources.append(NvmlSource(g.interval_s, nvml))
    elif gpu and g.source == "dcgm-exporter":
        from tokenwatch.sources.prometheus_metrics import MetricsScrapeParser

        url = target.expand(g.url or DEFAULT_DCGM_URL)
        sources.append(
            ScrapeSource(
                "dcgm-exporter",
                url,
                lambda index: MetricsScrapeParser("dcgm", node=target.name, node_index=index),
                g.interval_s,
            )
        )
    names: set[str] = {s.name for s in sources}
    for entry in config.progress:
        source = _progress_source(entry, target, config.gpu.interval_s, tail_poll_s)
        if source is None:
            continue
        base, n = source.name, 2
        while source.name in names:  # the same file listed twice still gets its own name
            source.name = f"{base} #{n}"
            n += 1
        names.add(source.name)
        sources.append(source)
    return sources


def _vendor_smi_source(tool: str, node: str, interval_s: float) -> CommandSource:
    """AMD's amd-smi (run once per interval by a shell loop), Intel's xpu-smi dump or nvidia-smi dmon
    (streams)."""
    if tool == "nvidia-smi-dmon":
        from tokenwatch.sources.nvidia_smi_dmon import NvidiaSmiDmonParser, dmon_command

        return CommandSource(
            "nvidia-smi dmon",
            dmon_command(interval_s),
            lambda node_index: NvidiaSmiDmonParser(node, node_index=node_index),
            interval_s,
        )
    if tool == "amd-smi":
        from tokenwatch.sources.amd_smi import AmdSmiParser, loop_argv

        return CommandSource(
            "amd-smi",
            loop_argv(interval_s),
            lambda node_index: AmdSmiParser(node, node_index=node_index),
            interval_s,
            program="amd-smi",
        )
    from tokenwatch.sources.xpu_smi import XpuSmiParser, dump_command

    return CommandSource(
        "xpu-smi",
        dump_command(interval_s),
        lambda node_index: XpuSmiParser(node, node_index=node_index),
        interval_s,
    )


def _progress_source(
    entry: ProgressSourceConfig, target: NodeTarget, default_interval_s: float, tail_poll_s: float
) -> NodeSource | None:
    node = target.name
    if entry.kind == "loadgen-trace":
        from tokenwatch.sources.loadgen_trace import TraceTailParser

        path = target.expand(entry.path or "")
        per_sample = entry.tokens_per_sample
        return FileTailSource(
            f"trace {path}", path, lambda: TraceTailParser(node, tokens_per_sample=per_sample), tail_poll_s
        )
    if entry.kind == "loadgen-detail":
        from tokenwatch.sources.loadgen_detail import DetailLogParser

        path = target.expand(entry.path or "")
        return FileTailSource(f"detail {path}", path, lambda: DetailLogParser(node), tail_poll_s)
    if entry.kind == "endpoints-events":
        from tokenwatch.sources.endpoints_events import EndpointsEventsParser

        path = target.expand(entry.path or "")
        per_sample = entry.tokens_per_sample
        return FileTailSource(
            f"events {path}",
            path,
            lambda: EndpointsEventsParser(node, tokens_per_sample=per_sample),
            tail_poll_s,
        )
    if entry.kind == "log":
        path = target.expand(entry.path or "")
        return FileTailSource(f"log {path}", path, log_parser_factory(entry, node), tail_poll_s)
    if entry.kind == "prometheus":
        from tokenwatch.sources.prometheus_metrics import MetricsScrapeParser

        url = target.expand(entry.url or "")
        preset = entry.preset or ""
        return ScrapeSource(
            f"metrics {url}",
            url,
            lambda index: MetricsScrapeParser(preset, node=node, node_index=index),
            entry.interval_s or default_interval_s,
        )
    return None  # prometheus-query: rack-wide, another collector


def log_parser_factory(entry: ProgressSourceConfig, node: str) -> Callable[[], StreamParser]:
    from pathlib import Path

    from tokenwatch.sources.harness_log import LogProgressParser
    from tokenwatch.sources.log_rules import load_rules_file

    if entry.rules is not None:  # read once here (the config check read it too); each node its parser
        spec, source = load_rules_file(entry.rules), f"log:{Path(entry.rules).stem}"
        return lambda: LogProgressParser.from_spec(spec, node, source)
    if entry.patterns is not None:
        patterns, interval_s = dict(entry.patterns), entry.interval_s
        timestamp, marker = entry.timestamp, entry.marker
        return lambda: LogProgressParser(
            patterns, node, interval_s=interval_s, timestamp=timestamp, marker=marker
        )
    preset = entry.preset or ""
    return lambda: LogProgressParser.preset(preset, node)


def local_gpu_problem(config: WatchConfig, nvml: Any = None) -> str | None:
    """Why the GPU source cannot work on this machine (local mode), or None."""
    source = config.gpu.source
    tool = "nvidia-smi" if source == "nvidia-smi-dmon" else source
    if tool in ("nvidia-smi", "amd-smi", "xpu-smi") and shutil.which(tool) is None:
        return f"gpu.source {source}: {tool} is not on this machine's PATH"
    if source == "nvml":
        from tokenwatch.inputs.live.nvml_source import count_gpus, load_pynvml

        try:
            module = nvml if nvml is not None else load_pynvml()
        except ImportError:
            return "gpu.source nvml: pynvml (nvidia-ml-py) is not installed"
        if count_gpus(module) is None:
            return "gpu.source nvml: NVML cannot start here (no NVIDIA driver)"
    return None
