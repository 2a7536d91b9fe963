"""How fresh the fleet's server can be, as the server itself says: the scrape interval of the jobs that
scrape the fleet (``/api/v1/status/config``), how long a series' last sample still answers a query
(``query.lookback-delta`` in ``/api/v1/status/flags``) and how much of the newest data the engine hides
(VictoriaMetrics' ``-search.latencyOffset``, 30 s by default there; ``latency_offset`` in the fleet
config when the server does not say).

A node of the fleet is read through the server, not from the node: every ``detail_interval`` for the
alert rules, every interval while its rack is on screen. Judged by the core's default five seconds of
silence, every node of a healthy fleet went stale between two alerting passes (54 stale alerts with
all 54 nodes up). Its limit is what the reading cadence and the server's own freshness allow:
:meth:`ServerTiming.node_stale_after_s`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from tokenwatch.base.durations import DurationError, parse_duration
from tokenwatch.inputs.prometheus.api import PromApiError, PrometheusApi

PROMETHEUS_DEFAULT_SCRAPE_S = 60.0  # Prometheus' global scrape_interval when its config names none


@dataclass(frozen=True, slots=True)
class ServerTiming:
    """In seconds; None where the server did not say. ``latency_offset_s`` is the config's, else the
    server's flag, else 0."""

    scrape_interval_s: float | None
    lookback_delta_s: float | None
    latency_offset_s: float
    retention_s: float | None = None  # how much history the server keeps (its TSDB retention)

    def node_stale_after_s(self, interval_s: float, detail_interval_s: float) -> float:
        """Silence after which a node read through the server is stale: its reading cadence (one
        alerting pass), a round that comes one interval late, two scrapes (the newest sample can be a
        scrape old, and one scrape can fail) and what the engine hides."""
        scrape = self.scrape_interval_s if self.scrape_interval_s is not None else interval_s
        return detail_interval_s + interval_s + 2.0 * scrape + self.latency_offset_s

    def meta(self) -> dict[str, float]:
        """What a run's start records of it (a replay judges with the same limits)."""
        out = {"latency_offset_s": self.latency_offset_s}
        if self.scrape_interval_s is not None:
            out["scrape_interval_s"] = self.scrape_interval_s
        if self.lookback_delta_s is not None:
            out["lookback_delta_s"] = self.lookback_delta_s
        if self.retention_s is not None:
            out["retention_s"] = self.retention_s
        return out


def _seconds(value: Any) -> float | None:
    if not isinstance(value, str | int | float) or isinstance(value, bool):
        return None
    try:
        seconds = parse_duration(value)
    except DurationError:
        return None
    return seconds if math.isfinite(seconds) and seconds > 0 else None


def scrape_intervals(config_yaml: str) -> dict[str, float]:
    """Job name -> its scrape interval, from the text of Prometheus' configuration (a job without its
    own takes the global one); {} for a text that is not such a configuration."""
    try:
        doc = yaml.safe_load(config_yaml)
    except yaml.YAMLError:
        return {}
    if not isinstance(doc, Mapping):
        return {}
    glob = doc.get("global")
    default = (_seconds(glob.get("scrape_interval")) if isinstance(glob, Mapping) else None) or (
        PROMETHEUS_DEFAULT_SCRAPE_S
    )
    jobs: dict[str, float] = {}
    configs = doc.get("scrape_configs")
    for job in configs if isinstance(configs, list) else ():
        if isinstance(job, Mapping) and isinstance(job.get("job_name"), str):
            jobs[job["job_name"]] = _seconds(job.get("scrape_interval")) or default
    return jobs


async def read_server_timing(
    api: PrometheusApi, jobs: Iterable[str], configured_offset_s: float | None
) -> ServerTiming:
    """The server's timing; what it cannot say (another engine's API, an old server) is left None.
    ``jobs``: the scrape jobs of the fleet's series (none known: the slowest job of all)."""
    scrape: float | None = None
    try:
        intervals = scrape_intervals(str((await api.status("config")).get("yaml", "")))
    except PromApiError:
        intervals = {}
    wanted = [intervals[j] for j in jobs if j in intervals] or list(intervals.values())
    if wanted:
        scrape = max(wanted)
    try:
        flags = await api.status("flags")
    except PromApiError:
        flags = {}
    lookback = _seconds(flags.get("query.lookback-delta"))
    offset = configured_offset_s
    if offset is None:
        offset = _seconds(flags.get("search.latencyOffset")) or 0.0
    retention = _seconds(flags.get("storage.tsdb.retention.time"))
    return ServerTiming(scrape, lookback, offset, retention)
