"""The watch config's checks, after it is read: the run, nodes (host lists, a Slurm job), ssh, the
fleet and alerts here, the GPU and progress sources in :mod:`._source_checks`; each problem one line
naming the file, line and key."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from tokenwatch.base.yaml_schema import Reader
from tokenwatch.inputs.config._schema import HostEntry, WatchConfig
from tokenwatch.inputs.config._source_checks import check_gpu, check_progress
from tokenwatch.inputs.fleet_access import check_fleet_access, check_fleet_url
from tokenwatch.inputs.hostlist import HostListError, expand_hostlist
from tokenwatch.inputs.notify_config import check_notify


def check_config(reader: Reader, config: WatchConfig, data: Mapping[str, Any]) -> None:
    run = config.run
    if not run.name.strip():
        raise reader.error(("run", "name"), "must not be empty")
    if run.duration_s is not None and run.duration_s <= 0:
        raise reader.error(("run", "duration"), "must be longer than zero")
    if run.total_samples is not None and run.total_samples < 1:
        raise reader.error(("run", "total_samples"), "must be at least 1")
    if run.benchmark is not None:
        from tokenwatch.mlperf.rules import BENCHMARKS, normalize_benchmark

        if normalize_benchmark(run.benchmark) is None:
            known = ", ".join([*BENCHMARKS, "llama2-70b", "<name>-interactive"])
            raise reader.error(
                ("run", "benchmark"), f"unknown MLPerf benchmark {run.benchmark!r} (known: {known})"
            )
    _check_nodes(reader, config)
    ssh = config.ssh
    if ssh.max_concurrent < 1:
        raise reader.error(("ssh", "max_concurrent"), "must be at least 1")
    if ssh.connect_timeout_s <= 0:
        raise reader.error(("ssh", "connect_timeout"), "must be longer than zero")
    check_gpu(reader, config)
    _check_fleet(reader, config, data)
    for i, source in enumerate(config.progress):
        check_progress(reader, source, ("progress", i), data["progress"][i])
    if config.notify is not None:
        check_notify(reader, config.notify, ("notify",))
    alerts = config.alerts
    if alerts.stale_after_s <= 0:
        raise reader.error(("alerts", "stale_after"), "must be longer than zero")
    if not 0 < alerts.straggler_pct < 100:
        raise reader.error(("alerts", "straggler_pct"), "must be between 0 and 100")


def _check_nodes(reader: Reader, config: WatchConfig) -> None:
    nodes = config.nodes
    if nodes is None:
        return
    if nodes.gpus_per_node is not None and not 1 <= nodes.gpus_per_node <= 64:
        raise reader.error(("nodes", "gpus_per_node"), "must be between 1 and 64")
    if config.local:
        return
    if nodes.gpus_per_node is None:
        raise reader.error(("nodes",), "missing required key 'gpus_per_node'")
    if nodes.hosts is not None and nodes.slurm_job is not None:
        raise reader.error(("nodes", "slurm_job"), "give either hosts or slurm_job, not both")
    if isinstance(nodes.hosts, str):
        try:
            expand_hostlist(nodes.hosts)
        except HostListError as exc:
            raise reader.error(("nodes", "hosts"), str(exc)) from None
    elif isinstance(nodes.hosts, list):
        if not nodes.hosts:
            raise reader.error(("nodes", "hosts"), "the list is empty")
        seen: set[str] = set()
        for i, entry in enumerate(nodes.hosts):
            name = entry if isinstance(entry, str) else entry.name
            if not name.strip():
                raise reader.error(("nodes", "hosts", i), "empty host name")
            if name in seen:
                raise reader.error(("nodes", "hosts", i), f"node {name!r} is listed twice")
            seen.add(name)
            if isinstance(entry, HostEntry) and entry.port is not None and not 1 <= entry.port <= 65535:
                raise reader.error(("nodes", "hosts", i, "port"), "must be 1..65535")
    if nodes.slurm_job is not None and not re.fullmatch(r"[0-9]+(_[0-9]+)?", nodes.slurm_job):
        raise reader.error(("nodes", "slurm_job"), f"not a Slurm job id: {nodes.slurm_job!r}")


_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")


def _check_fleet(reader: Reader, config: WatchConfig, data: Mapping[str, Any]) -> None:
    nodes = config.nodes
    if nodes is not None and nodes.rack_label is not None and not _LABEL_NAME.fullmatch(nodes.rack_label):
        raise reader.error(("nodes", "rack_label"), f"not a Prometheus label name: {nodes.rack_label!r}")
    if nodes is not None and nodes.rack is not None and not nodes.rack.strip():
        raise reader.error(("nodes", "rack"), "must not be empty")
    fleet = config.fleet
    if fleet is None:
        return
    from tokenwatch.sources.fleet_queries import FLEET_PRESETS

    if nodes is not None and (nodes.hosts is not None or nodes.slurm_job is not None):
        key = "hosts" if nodes.hosts is not None else "slurm_job"
        raise reader.error(("nodes", key), "a fleet's nodes are what its Prometheus knows: no host list")
    for section in ("progress", "gpu"):
        if section in data:
            raise reader.error(
                (section,), f"not used with fleet (the fleet's Prometheus serves the {section})"
            )
    check_fleet_url(reader, ("fleet", "url"), fleet.url)
    check_fleet_access(reader, fleet.url, fleet.auth, fleet.headers)
    if fleet.preset not in FLEET_PRESETS:
        known = ", ".join(FLEET_PRESETS)
        raise reader.error(("fleet", "preset"), f"unknown preset {fleet.preset!r} (known: {known})")
    if not _LABEL_NAME.fullmatch(fleet.node_label):
        raise reader.error(("fleet", "node_label"), f"not a Prometheus label name: {fleet.node_label!r}")
    if fleet.interval_s < 1:
        raise reader.error(("fleet", "interval"), "must be at least 1s")
    if fleet.detail_interval_s < fleet.interval_s:
        raise reader.error(("fleet", "detail_interval"), "must be at least the interval")
    if not 0 <= fleet.lookback_s <= 24 * 3600:
        raise reader.error(("fleet", "lookback"), "must be between 0s (no history) and 24h")
    if fleet.rate_window_s < 1:
        raise reader.error(("fleet", "rate_window"), "must be at least 1s")
    if fleet.latency_offset_s is not None and fleet.latency_offset_s > 3600:
        raise reader.error(("fleet", "latency_offset"), "must be at most 1h")
