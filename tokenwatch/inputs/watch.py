"""Wiring a watch: from a validated config to the live collector (targets, sources, SSH, Prometheus).

The CLI calls :func:`build_collector`; everything it needs to know about the nodes is decided here,
below the CLI, so tests and other front ends build the same collector.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tokenwatch.base.clock import Clock
from tokenwatch.base.events import MAX_RUN_GPUS, Collector, GpuBatch
from tokenwatch.core import CoreConfig
from tokenwatch.inputs.config import WatchConfig, rack_label
from tokenwatch.inputs.hostlist import HostListError
from tokenwatch.inputs.live.plan import RACK_WIDE_GPU, RACK_WIDE_PROGRESS, local_gpu_problem, node_sources
from tokenwatch.inputs.live.ssh_connect import SshConnector, SshSettings
from tokenwatch.inputs.live.supervisor import LiveCollector, LiveOptions
from tokenwatch.inputs.live.targets import NodeTarget, resolve_targets

if TYPE_CHECKING:
    from tokenwatch.inputs.prometheus.fleet import FleetFocus


class WatchSetupError(ValueError):
    """A config that cannot be watched as given (one line naming the file and what is wrong)."""


def core_config(config: WatchConfig) -> CoreConfig:
    a = config.alerts
    return CoreConfig(
        straggler_pct=a.straggler_pct,
        stale_after_s=a.stale_after_s,
        ttft_sla_s=a.ttft_sla_s,
        tpot_sla_s=a.tpot_sla_s,
        benchmark=config.run.benchmark,
    )


def resolved_targets(config: WatchConfig, slurm_job: str | None) -> list[NodeTarget]:
    try:
        return resolve_targets(config, slurm_job)
    except HostListError as exc:
        raise WatchSetupError(f"{config.path}: {exc}") from None


def rack_collectors(
    config: WatchConfig, targets: list[NodeTarget], gpus_per_node: int, now: Callable[[], float]
) -> list[Collector]:
    """The rack-wide Prometheus-query collectors: one for ``gpu.source: prometheus``, one per
    ``kind: prometheus-query``. ``now`` gives the live run's time, so their events share its clock."""
    from tokenwatch.inputs.prometheus.query import PrometheusQueryCollector

    nodes = [t.name for t in targets]

    from tokenwatch.inputs.prometheus.query import DEFAULT_LOOKBACK_S

    def querying(url: str | None, label: str | None, interval_s: float, **what: Any) -> Collector:
        return PrometheusQueryCollector(
            url=url or "",
            nodes=nodes,
            gpus_per_node=gpus_per_node,
            node_label=label or "node",
            interval_s=interval_s,
            now=now,
            **what,
        )

    g = config.gpu
    collectors = []
    if g.source in RACK_WIDE_GPU:
        collectors.append(querying(g.url, g.node_label, g.interval_s, gpu=True, progress=False))
    for p in config.progress:
        if p.kind in RACK_WIDE_PROGRESS:
            preset = p.preset or "vllm"
            collectors.append(
                querying(
                    p.url,
                    p.node_label,
                    p.interval_s or 5.0,
                    gpu=False,
                    progress=True,
                    progress_preset=preset,
                    lookback_s=DEFAULT_LOOKBACK_S if p.lookback_s is None else p.lookback_s,
                )
            )
    return collectors


def _gpu_count_here(config: WatchConfig) -> int | None:
    if config.gpu.source == "nvml":
        from tokenwatch.inputs.live.nvml_source import count_gpus, load_pynvml

        return count_gpus(load_pynvml())
    if config.gpu.source in ("nvidia-smi", "nvidia-smi-dmon") and shutil.which("nvidia-smi"):
        try:
            listed = subprocess.run(
                ["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20, check=False
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        count = sum(1 for line in listed.stdout.splitlines() if line.startswith("GPU "))
        return count or None
    if config.gpu.source == "amd-smi" and shutil.which("amd-smi"):
        return _amd_gpu_count()
    return None


def _amd_gpu_count() -> int | None:
    """The GPUs one ``amd-smi metric --json`` names (None where it cannot say)."""
    from tokenwatch.sources.amd_smi import parse_capture

    try:
        listed = subprocess.run(
            ["amd-smi", "metric", "--json"], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    batches = [e for e in parse_capture(listed.stdout) if isinstance(e, GpuBatch)]
    return len(batches[0].gpu) if batches else None


def _client_keys(config: WatchConfig) -> tuple[Any, ...] | None:
    """The configured keys, loaded now: a missing or encrypted key is one error before connecting."""
    if config.ssh.client_keys is None:
        return None
    import asyncssh

    keys = []
    for name in config.ssh.client_keys:
        path = Path(name).expanduser()
        try:
            keys.append(asyncssh.read_private_key(str(path)))
        except FileNotFoundError:
            raise WatchSetupError(f"{config.path}: ssh.client_keys: {path}: no such file") from None
        except asyncssh.KeyEncryptionError:
            raise WatchSetupError(
                f"{config.path}: ssh.client_keys: {path} is passphrase-protected: load it into the SSH agent "
                "(ssh-add) and leave it out of client_keys"
            ) from None
        except (OSError, asyncssh.KeyImportError) as exc:
            raise WatchSetupError(f"{config.path}: ssh.client_keys: {path}: {exc}") from None
    return tuple(keys)


@dataclass(frozen=True, slots=True)
class WatchPlan:
    """What a watch decided before connecting anywhere: the nodes, their GPU count, which sources run
    where, and the SSH keys (loaded, so a missing or encrypted key is an error now)."""

    targets: list[NodeTarget]
    gpus_per_node: int
    gpu_here: bool  # a per-node GPU source runs (nvidia-smi, NVML, dcgm-exporter)
    rack_wide: bool  # a rack-wide Prometheus-query collector runs
    client_keys: tuple[Any, ...] | None


def plan_watch(
    config: WatchConfig, *, slurm_job: str | None = None, warn: Callable[[str], None] | None = None
) -> WatchPlan:
    """Every decision ``watch`` makes before it connects, and every refusal: ``check`` runs exactly this,
    so it fails on every config that ``watch`` would refuse. Raises :class:`WatchSetupError` (one line);
    ``warn`` hears what would be watched with less than asked (e.g. no GPU telemetry on this machine)."""
    if config.fleet is not None:  # the fleet's nodes come from its Prometheus, when the watch starts
        gpus = config.nodes.gpus_per_node if config.nodes and config.nodes.gpus_per_node else 1
        return WatchPlan([], gpus, gpu_here=False, rack_wide=True, client_keys=None)
    targets = resolved_targets(config, slurm_job)
    rack_wide = config.gpu.source in RACK_WIDE_GPU or any(
        p.kind in RACK_WIDE_PROGRESS for p in config.progress
    )
    gpu_here = config.gpu.source not in ("none", *RACK_WIDE_GPU)
    keys = None
    if config.local:
        problem = local_gpu_problem(config) if gpu_here else None
        if problem is not None:
            gpu_here = False
            if not config.progress and not rack_wide:
                raise WatchSetupError(f"{config.path}: nothing to watch: {problem}, and no progress source")
            if warn is not None:
                warn(f"{problem}; watching without GPU telemetry")
        nodes = config.nodes
        gpus = (
            (nodes.gpus_per_node if nodes else None) or (_gpu_count_here(config) if gpu_here else None) or 1
        )
    else:
        keys = _client_keys(config)
        gpus = config.nodes.gpus_per_node if config.nodes and config.nodes.gpus_per_node else 1
    if len(targets) * gpus > MAX_RUN_GPUS:
        raise WatchSetupError(
            f"{config.path}: {len(targets):,} nodes x {gpus} GPUs = {len(targets) * gpus:,} GPUs: "
            f"a run watches at most {MAX_RUN_GPUS:,} GPUs"
        )
    if not gpu_here and not rack_wide and not config.progress:
        raise WatchSetupError(
            f"{config.path}: nothing to watch: gpu.source is none and there is no progress source"
        )
    return WatchPlan(targets, gpus, gpu_here, rack_wide, keys)


def build_collector(
    config: WatchConfig,
    *,
    slurm_job: str | None = None,
    accept_new_host_keys: bool = False,
    options: LiveOptions | None = None,
    clock: Clock | None = None,
    warn: Callable[[str], None] = lambda _message: None,
) -> LiveCollector:
    """The live collector for ``config``: targets resolved, sources planned, SSH set up.

    Raises :class:`WatchSetupError` (one line) for a config that cannot be watched (see
    :func:`plan_watch`).
    """
    plan = plan_watch(config, slurm_job=slurm_job, warn=warn)
    if config.fleet is not None:
        return fleet_watch(config, options=options, clock=clock)
    connector = None
    if not config.local:
        connector = SshConnector(
            SshSettings(
                known_hosts=config.ssh.known_hosts,
                client_keys=plan.client_keys,
                connect_timeout_s=config.ssh.connect_timeout_s,
                keepalive_s=max(1.0, config.alerts.stale_after_s),
                max_concurrent=config.ssh.max_concurrent,
                accept_new_host_keys=accept_new_host_keys,
            )
        )
    collector = LiveCollector(
        config,
        plan.targets,
        lambda target: node_sources(config, target, gpu=plan.gpu_here),
        gpus_per_node=plan.gpus_per_node,
        connector=connector,
        options=options,
        clock=clock,
    )
    if plan.rack_wide:
        collector.rack_collectors = rack_collectors(config, plan.targets, plan.gpus_per_node, collector.now)
    return collector


def fleet_watch(
    config: WatchConfig, *, options: LiveOptions | None = None, clock: Clock | None = None
) -> LiveCollector:
    """A fleet watched through its Prometheus: no SSH, no node sources; one collector asks the server
    for each rack's figures (and for the nodes on screen), finds the racks and nodes when the watch
    starts and fills in the run's history. ``collector.rack_collectors[0].focus`` is what the
    dashboard sets to drill down."""
    from tokenwatch.inputs.fleet_access import server_access
    from tokenwatch.inputs.prometheus.fleet import FleetSettings, PrometheusFleetCollector

    fleet = config.fleet
    assert fleet is not None
    gpus = config.nodes.gpus_per_node if config.nodes else None
    collector = LiveCollector(
        config, [], lambda _target: [], gpus_per_node=gpus or 1, options=options, clock=clock
    )
    settings = FleetSettings(
        url=fleet.url,
        preset=fleet.preset,
        rack_label=rack_label(config),
        node_label=fleet.node_label,
        interval_s=fleet.interval_s,
        detail_interval_s=fleet.detail_interval_s,
        lookback_s=fleet.lookback_s,
        window_s=fleet.rate_window_s,
        gpus_per_node=gpus,
        access=server_access(fleet.auth, fleet.headers),
        latency_offset_s=fleet.latency_offset_s,
    )
    collector.rack_collectors = [PrometheusFleetCollector(settings, now=collector.now, clock=collector.clock)]
    collector.meta_extra = {"gpu_source": "prometheus-fleet", "local": False}
    return collector


def fleet_focus(collector: LiveCollector) -> FleetFocus | None:
    """The racks-on-screen switch of a fleet watch (what the dashboard points at the rack it shows, so
    that rack's nodes are fetched every interval); None for a watch of nodes."""
    from tokenwatch.inputs.prometheus.fleet import PrometheusFleetCollector

    return next((c.focus for c in collector.rack_collectors if isinstance(c, PrometheusFleetCollector)), None)
