"""The ``watch`` config: YAML into frozen dataclasses, checked before anything connects.

Every problem is one line naming the file, line and key (``rack.yaml:14: ssh.max_concurrent: ...``).
Passwords have no place in it: SSH authenticates with keys or the agent, and a URL carrying
``user:password@`` is refused, so neither the config nor a recording of the run holds a secret.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from tokenwatch.base.events import Scenario
from tokenwatch.base.yaml_schema import KeyPath, Reader, SchemaError, duration_field, load_yaml
from tokenwatch.inputs.fleet_access import FleetAuth, check_fleet_access, check_fleet_url, with_paths_from
from tokenwatch.inputs.hostlist import HostListError, expand_hostlist
from tokenwatch.inputs.notify_config import NotifyConfig, check_notify

GpuSourceKind = Literal[
    "nvidia-smi", "nvidia-smi-dmon", "nvml", "dcgm-exporter", "amd-smi", "xpu-smi", "prometheus", "none"
]
ProgressKind = Literal[
    "loadgen-trace", "loadgen-detail", "endpoints-events", "log", "prometheus", "prometheus-query"
]
DEFAULT_DCGM_URL = "http://localhost:9400/metrics"
_SECRET_KEYS = ("password", "passphrase", "secret", "token")


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


# Which keys each progress kind needs (all) and accepts (beyond ``kind``).
_PROGRESS_KEYS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "loadgen-trace": (("path",), ("path", "tokens_per_sample")),
    "loadgen-detail": (("path",), ("path",)),
    "endpoints-events": (("path",), ("path", "tokens_per_sample")),
    "log": (("path",), ("path", "preset", "rules", "patterns", "interval", "timestamp", "marker")),
    "prometheus": (("url", "preset"), ("url", "preset", "interval")),
    "prometheus-query": (("url",), ("url", "node_label", "interval", "preset", "lookback")),
}


def load_watch_config(path: str | Path) -> WatchConfig:
    """Read and check ``path``; raises :class:`SchemaError` (one line: file, line, key, problem)."""
    data, lines = load_yaml(path)
    reader = Reader(str(path), lines)
    if isinstance(data, Mapping):
        _refuse_secrets(reader, data, ())
    config = reader.build(WatchConfig, data)
    config = _with_path(config, str(path))
    config = dataclasses.replace(config, progress=[_rules_file_named(p, Path(path)) for p in config.progress])
    _check(reader, config, data)
    return config


def _with_path(config: WatchConfig, path: str) -> WatchConfig:
    notify, fleet = config.notify, config.fleet
    folder = Path(path).resolve().parent
    if notify is not None:  # a command named by a relative path is found beside the config
        notify = dataclasses.replace(notify, base_dir=str(folder))
    if fleet is not None and fleet.auth is not None:  # so are the fleet's token and TLS files
        fleet = dataclasses.replace(fleet, auth=with_paths_from(fleet.auth, folder))
    return dataclasses.replace(config, path=path, notify=notify, fleet=fleet)


def is_rules_file(preset: str) -> bool:
    """Whether a log ``preset`` names a rules file (``rules.yaml``, ``conf/harness.yml``), not a built-in."""
    return preset.endswith((".yaml", ".yml")) or "/" in preset


def _rules_file_named(source: ProgressSourceConfig, config_path: Path) -> ProgressSourceConfig:
    """A log entry's rules file as ``rules`` (``preset: FILE.yaml`` says the same), its path taken from
    the config's folder when relative (the config is read from anywhere, the file lies beside it)."""
    if source.kind != "log":
        return source
    rules = source.rules
    if rules is None and source.preset is not None and is_rules_file(source.preset):
        rules = source.preset
    if rules is None:
        return source
    where = Path(rules).expanduser()
    if not where.is_absolute():
        where = config_path.parent / where
    return dataclasses.replace(source, rules=str(where))


def _refuse_secrets(reader: Reader, data: Any, path: KeyPath) -> None:
    if isinstance(data, Mapping):
        for key, value in data.items():
            sub = (*path, str(key))
            if str(key).lower() in _SECRET_KEYS:
                how = (
                    "give the file or environment variable that holds it (fleet.auth: bearer_token_file, "
                    "bearer_token_env, password_file, password_env)"
                    if path[:1] == ("fleet",)
                    else "SSH uses keys or the agent"
                )
                raise reader.error(sub, f"secrets are not accepted in the config ({how})")
            _refuse_secrets(reader, value, sub)
    elif isinstance(data, list):
        for i, item in enumerate(data):
            _refuse_secrets(reader, item, (*path, i))


def _check(reader: Reader, config: WatchConfig, data: Mapping[str, Any]) -> None:
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
    _check_gpu(reader, config)
    _check_fleet(reader, config, data)
    for i, source in enumerate(config.progress):
        _check_progress(reader, source, ("progress", i), data["progress"][i])
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


def rack_label(config: WatchConfig) -> str:
    """The label that names a series' rack (``nodes.rack_label``, default ``rack``)."""
    return (config.nodes.rack_label if config.nodes else None) or "rack"


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


def _check_gpu(reader: Reader, config: WatchConfig) -> None:
    gpu = config.gpu
    if gpu.interval_s < 0.1:
        raise reader.error(("gpu", "interval"), "must be at least 100ms")
    if gpu.source == "nvml" and not config.local:
        raise reader.error(
            ("gpu", "source"),
            "nvml reads the GPUs of the machine tokenwatch runs on; "
            "with nodes use nvidia-smi or dcgm-exporter",
        )
    if gpu.source in ("xpu-smi", "nvidia-smi-dmon") and gpu.interval_s < 1:
        raise reader.error(("gpu", "interval"), f"{gpu.source} samples at most once a second: use 1s or more")
    if gpu.source == "prometheus" and gpu.url is None:
        raise reader.error(("gpu",), "source prometheus needs 'url' (the Prometheus server)")
    if gpu.url is not None:
        if gpu.source not in ("dcgm-exporter", "prometheus"):
            raise reader.error(("gpu", "url"), "only for source dcgm-exporter or prometheus")
        _check_url(reader, ("gpu", "url"), gpu.url)
    if gpu.source == "prometheus" and (config.nodes is None or config.nodes.gpus_per_node is None):
        raise reader.error(("nodes",), "gpu.source prometheus needs nodes.gpus_per_node")
    if gpu.node_label is not None and gpu.source != "prometheus":
        raise reader.error(("gpu", "node_label"), "only for source prometheus")


def _check_progress(reader: Reader, source: ProgressSourceConfig, path: KeyPath, raw: Any) -> None:
    needed, allowed = _PROGRESS_KEYS[source.kind]
    present = {str(k) for k in raw} - {"kind"}
    for key in sorted(present - set(allowed)):
        raise reader.error((*path, key), f"not a key of kind {source.kind} (it takes {', '.join(allowed)})")
    for key in needed:
        if key not in present:
            raise reader.error(path, f"kind {source.kind} needs {key!r}")
    if source.kind == "log":
        _check_log_keys(reader, source, path, present)
    _check_parser_settings(reader, source, path, present)
    if source.path is not None and not source.path.strip():
        raise reader.error((*path, "path"), "must not be empty")
    if source.url is not None:
        _check_url(reader, (*path, "url"), source.url)
    if source.interval_s is not None and source.interval_s < 0.1:
        raise reader.error((*path, "interval"), "must be at least 100ms")
    if source.lookback_s is not None and not 0 <= source.lookback_s <= 24 * 3600:
        raise reader.error((*path, "lookback"), "must be between 0s (no history) and 24h")


def _check_log_keys(reader: Reader, source: ProgressSourceConfig, path: KeyPath, present: set[str]) -> None:
    """One of preset, rules and patterns; a rules file or preset carries its own interval, timestamp and
    marker, inline patterns may give them beside."""
    given = [key for key in ("preset", "rules", "patterns") if key in present]
    if len(given) != 1:
        why = "gives " + " and ".join(repr(k) for k in given) if given else "gives none"
        raise reader.error(
            path, f"kind log needs one of 'preset', 'rules' (a rules file) or 'patterns' ({why})"
        )
    if source.patterns is None:
        for key in ("interval", "timestamp", "marker"):
            if key in present:
                raise reader.error(
                    (*path, key), f"only beside 'patterns' (the {given[0]} gives its own {key})"
                )


def _check_parser_settings(
    reader: Reader, source: ProgressSourceConfig, path: KeyPath, present: set[str]
) -> None:
    """Presets, rules files and patterns are checked by the parsers' own rules, reported at the config
    line (a rules file's own problems at its line: ``rules.yaml:4: patterns.done: ...``)."""
    from tokenwatch.sources.harness_log import LogPatternError, compile_rule, preset_names
    from tokenwatch.sources.log_rules import check_inline_settings, load_rules_file
    from tokenwatch.sources.metric_catalogue import QUERY_PROGRESS_PRESET_NAMES, SCRAPE_PROGRESS_PRESET_NAMES

    if source.patterns is not None:
        if not source.patterns:
            raise reader.error((*path, "patterns"), "no patterns given")
        for name, pattern in source.patterns.items():
            try:
                compile_rule(name, pattern)
            except LogPatternError as exc:
                raise reader.error((*path, "patterns", name), str(exc)) from None
        problem = check_inline_settings(source.timestamp, source.marker)
        if problem is not None:
            raise reader.error((*path, problem[0]), problem[1])
    if source.rules is not None:
        try:
            load_rules_file(source.rules)
        except (LogPatternError, SchemaError) as exc:
            named = reader.error((*path, "rules" if "rules" in present else "preset"), "").args[0]
            raise SchemaError(f"{exc} (the rules file named at {named.rstrip(': ')})") from None
        return
    if source.preset is not None:
        known = {
            "log": preset_names(),
            "prometheus": sorted(SCRAPE_PROGRESS_PRESET_NAMES),
            "prometheus-query": sorted(QUERY_PROGRESS_PRESET_NAMES),
        }.get(source.kind, [])
        if source.preset not in known:
            raise reader.error(
                (*path, "preset"), f"unknown preset {source.preset!r} (known: {', '.join(known)})"
            )
    if source.tokens_per_sample is not None and not 0 <= source.tokens_per_sample < 1e7:
        raise reader.error((*path, "tokens_per_sample"), "must be a number of tokens, 0 or more")


def _check_url(reader: Reader, path: KeyPath, url: str) -> None:
    probe = url.replace("{name}", "node").replace("{host}", "host")
    try:
        parts = urlsplit(probe)
        _ = parts.port  # raises on a port that is not a number or out of range
    except ValueError as exc:
        raise reader.error(path, f"bad URL {url!r}: {exc}") from None
    if parts.scheme != "http":
        raise reader.error(path, f"bad URL {url!r}: only http:// is supported")
    if not parts.hostname:
        raise reader.error(path, f"bad URL {url!r}: no host")
    if parts.password is not None:
        raise reader.error(path, "passwords are not accepted in the config (remove user:password@)")
