"""The watch config's schema: frozen dataclasses, one per YAML section (read by
:mod:`tokenwatch.base.yaml_schema`; durations in seconds, ``*_s``, written as ``10s``, ``5m``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from tokenwatch.base.events import Scenario
from tokenwatch.base.yaml_schema import duration_field
from tokenwatch.inputs.fleet_access import FleetAuth
from tokenwatch.inputs.notify_config import NotifyConfig

GpuSourceKind = Literal[
    "nvidia-smi", "nvidia-smi-dmon", "nvml", "dcgm-exporter", "amd-smi", "xpu-smi", "prometheus", "none"
]
ProgressKind = Literal[
    "loadgen-trace", "loadgen-detail", "endpoints-events", "log", "prometheus", "prometheus-query"
]
DEFAULT_DCGM_URL = "http://localhost:9400/metrics"


@dataclass(frozen=True, slots=True)
class RunConfig:
    name: str
    scenario: Scenario = "Offline"
    duration_s: float | None = duration_field(None, key="duration")
    total_samples: int | None = None
    benchmark: str | None = None  # MLPerf benchmark whose rules the verdict applies (llama2-70b, ...)


@dataclass(frozen=True, slots=True)
class HostEntry:
    """One node spelled out: ``name`` is what the dashboard shows, ``host`` what SSH dials."""

    name: str
    host: str | None = None
    port: int | None = None
    user: str | None = None


@dataclass(frozen=True, slots=True)
class NodesConfig:
    hosts: str | list[str | HostEntry] | None = None
    gpus_per_node: int | None = None
    slurm_job: str | None = None
    rack: str | None = None  # this rack's name on /metrics (default: from the host range, else the run's)
    rack_label: str | None = None  # the Prometheus label that names a series' rack (default "rack")


@dataclass(frozen=True, slots=True)
class FleetConfig:
    """A fleet of racks watched through the Prometheus server that scrapes it (no host list: the racks
    and nodes are what the server knows)."""

    url: str
    preset: str = "tokenwatch"  # tokenwatch (the racks' own exporters) | vllm | sglang (+ dcgm-exporter)
    node_label: str = "node"
    interval_s: float = duration_field(5.0, key="interval")
    detail_interval_s: float = duration_field(30.0, key="detail_interval")  # every node, for alerts
    lookback_s: float = duration_field(3 * 3600.0, key="lookback")  # where to seek the run's start
    rate_window_s: float = duration_field(60.0, key="rate_window")  # rate() window of server presets
    auth: FleetAuth | None = None  # bearer token / basic auth from a file or variable, TLS (fleet_access.py)
    headers: dict[str, str] | None = None  # sent with every query (X-Scope-OrgID: a Mimir tenant)
    # How much of the newest data the engine hides (VictoriaMetrics' -search.latencyOffset); None: what
    # the server's flags say, else 0.
    latency_offset_s: float | None = duration_field(None, key="latency_offset")


@dataclass(frozen=True, slots=True)
class SshConfig:
    user: str | None = None
    known_hosts: str = "~/.ssh/known_hosts"
    client_keys: list[str] | None = None
    connect_timeout_s: float = duration_field(10.0, key="connect_timeout")
    max_concurrent: int = 128


@dataclass(frozen=True, slots=True)
class GpuConfig:
    source: GpuSourceKind = "nvidia-smi"
    interval_s: float = duration_field(1.0, key="interval")
    url: str | None = None  # dcgm-exporter (node-local, default :9400) or the Prometheus server
    node_label: str | None = None  # prometheus: the label that names the node


@dataclass(frozen=True, slots=True)
class ProgressSourceConfig:
    """One progress source; ``{name}`` and ``{host}`` in ``path``/``url`` expand per node."""

    kind: ProgressKind
    path: str | None = None
    url: str | None = None
    preset: str | None = None  # a built-in name, or (kind log) a rules file: FILE.yaml
    rules: str | None = None  # kind log: a rules file (as the docs describe), relative to the config's folder
    patterns: dict[str, str] | None = None
    timestamp: str | list[str] | None = None  # kind log with patterns: how its lines state time
    marker: str | None = None  # kind log with patterns: the lines the patterns are for
    node_label: str | None = None
    interval_s: float | None = duration_field(None, key="interval")
    tokens_per_sample: float | None = None  # loadgen-trace, endpoints-events: they count samples, not tokens
    lookback_s: float | None = duration_field(
        None, key="lookback"
    )  # prometheus-query: where to seek the start


@dataclass(frozen=True, slots=True)
class AlertsConfig:
    straggler_pct: float = 5.0
    stale_after_s: float = duration_field(5.0, key="stale_after")
    ttft_sla_s: float = duration_field(2.0, key="ttft_sla")
    tpot_sla_s: float = duration_field(0.2, key="tpot_sla")


@dataclass(frozen=True, slots=True)
class WatchConfig:
    run: RunConfig
    nodes: NodesConfig | None = None
    ssh: SshConfig = field(default_factory=SshConfig)
    gpu: GpuConfig = field(default_factory=GpuConfig)
    progress: list[ProgressSourceConfig] = field(default_factory=list)
    alerts: AlertsConfig = field(default_factory=AlertsConfig)
    fleet: FleetConfig | None = None
    notify: NotifyConfig | None = None  # where alerts are pushed (inputs/notify_config.py)
    path: str = ""  # where it was read from (not a YAML key: set by the loader)

    @property
    def local(self) -> bool:
        """No hosts and no Slurm job: tokenwatch runs on the node it watches."""
        return self.nodes is None or (self.nodes.hosts is None and self.nodes.slurm_job is None)


def rack_label(config: WatchConfig) -> str:
    """The label that names a series' rack (``nodes.rack_label``, default ``rack``)."""
    return (config.nodes.rack_label if config.nodes else None) or "rack"
