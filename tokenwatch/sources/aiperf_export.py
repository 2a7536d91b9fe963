"""AIPerf's and GenAI-Perf's JSON exports -> :class:`ClientResult`.

Both write one JSON object whose metrics are ``{"unit": ..., "avg": ..., "p50": ...}`` records
(``profile_export_aiperf.json``; GenAI-Perf, AIPerf's predecessor, ``profile_export_genai_perf.json``),
beside their configuration (``input_config``). AIPerf adds ``schema_version`` and ``aiperf_version`` and the
run's totals (``benchmark_duration``, ``total_output_tokens``, and where the server reports usage
``total_usage_completion_tokens``); GenAI-Perf states rates and percentiles only, so its duration and
token totals are unknown.

AIPerf's per-interval export (``--slice-duration``, ``profile_export_aiperf_timeslices.json``) holds the
same records per time slice (``start_ns``, ``end_ns``): each slice becomes an :class:`Interval`, and the
slices' sums make the run's totals (a slice that lacks a total makes the run's total unknown, not smaller).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from tokenwatch.sources.client_result import NAN, ClientResult, Figures, Interval, finite

KNOWN_SCHEMA_MAJOR = "1"  # AIPerf's export schema 1.x (1.4 in AIPerf 0.13.0)
# Time units a record may carry, in ms (latencies) or s (durations).
_MS_PER = {"ms": 1.0, "us": 1e-3, "ns": 1e-6, "sec": 1e3, "s": 1e3}
_S_PER = {"sec": 1.0, "s": 1.0, "ms": 1e-3}
# Each latency metric's record name, and each statistic's key in a record.
_LATENCY = {
    "ttft": "time_to_first_token",
    "tpot": "inter_token_latency",  # AIPerf's and GenAI-Perf's per-request (e2e - ttft) / (tokens - 1)
    "itl": "inter_chunk_latency",
    "e2e": "request_latency",
}
_STAT_KEYS = {"mean": "avg", "p50": "p50", "p90": "p90", "p99": "p99", "max": "max"}


def is_aiperf_export(document: Mapping[str, Any]) -> bool:
    return (
        "aiperf_version" in document or "schema_version" in document or "output_token_throughput" in document
    )


class _Records(Figures):
    """Figures out of ``{"unit", "avg", ...}`` records (a record's unknown unit said once, not per stat)."""

    def __init__(self, document: Mapping[str, Any], where: str, warnings: list[str]) -> None:
        super().__init__(document, where, warnings)
        self._bad_units: set[str] = set()

    def stat(
        self, name: str, key: str = "avg", *, required: bool = False, per: Mapping[str, float] | None = None
    ) -> float:
        record = self.document.get(name)
        if record is None:
            if required:
                self.warn(f"{name}: not stated: unknown")
            return NAN
        if not isinstance(record, Mapping):
            self.warn(f"{name}: {_short(record)} is not a metric record: unknown")
            return NAN
        if key not in record or record[key] is None:
            if required:
                self.warn(f"{name}.{key}: not stated: unknown")
            return NAN
        value = self.checked(f"{name}.{key}", record[key])
        if per is None or math.isnan(value):
            return value
        unit = record.get("unit")
        if not isinstance(unit, str) or unit not in per:
            if name not in self._bad_units:
                self._bad_units.add(name)
                self.warn(
                    f"{name}: unit {_short(unit)} is not one this reader knows ({', '.join(per)}): unknown"
                )
            return NAN
        return value * per[unit]

    def latency(self) -> dict[str, dict[str, float]]:
        out: dict[str, dict[str, float]] = {}
        for metric, name in _LATENCY.items():
            if name not in self.document:
                continue
            stats = {stat: self.stat(name, key, per=_MS_PER) for stat, key in _STAT_KEYS.items()}
            stats = {k: v for k, v in stats.items() if math.isfinite(v)}
            if stats:
                out[metric] = stats
        return out


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:60] + "…"


def read_aiperf_export(document: Mapping[str, Any], where: str, warnings: list[str]) -> ClientResult:
    """An AIPerf (``aiperf_version``) or GenAI-Perf export, already parsed."""
    figures = _Records(document, where, warnings)
    aiperf = "aiperf_version" in document or "schema_version" in document
    notes: list[str] = []
    if aiperf:
        version = document.get("aiperf_version")
        tool = f"AIPerf {version}" if isinstance(version, str) and version else "AIPerf"
        schema = document.get("schema_version")
        if not isinstance(schema, str) or schema.split(".")[0] != KNOWN_SCHEMA_MAJOR:
            figures.warn(
                f"schema_version {schema!r} is not one this reader knows ({KNOWN_SCHEMA_MAJOR}.x): "
                "read by the 1.x names, figures it does not find are unknown"
            )
        if document.get("was_cancelled") is True or document.get("is_complete") is False:
            notes.append(f"{tool} says the run did not complete (cancelled or cut short)")
    else:
        tool = "GenAI-Perf"
    requests = figures.stat("completed_request_count")
    if math.isnan(requests):
        requests = figures.stat("request_count")
    failed = figures.stat("error_request_count")
    if math.isnan(failed) and document.get("error_summary") == []:
        failed = 0.0  # AIPerf lists every error kind it met: an empty list is no error
    output_tokens = figures.stat("total_output_tokens")
    if math.isnan(output_tokens):
        output_tokens = figures.stat("total_osl")
    server_tokens = figures.stat("total_usage_completion_tokens")
    result = ClientResult(
        tool,
        where,
        duration_s=figures.stat("benchmark_duration", required=aiperf, per=_S_PER),
        requests=requests,
        failed=failed,
        input_tokens=figures.stat("total_isl"),
        output_tokens=output_tokens,
        server_output_tokens=server_tokens,
        requests_per_s=figures.stat("request_throughput", required=True),
        output_tokens_per_s=figures.stat("output_token_throughput", required=True),
        total_tokens_per_s=figures.stat("total_token_throughput"),
        concurrency=figures.stat("effective_concurrency"),
        latency_ms=figures.latency(),
    )
    return _with_token_note(result, notes)


def _with_token_note(result: ClientResult, notes: list[str]) -> ClientResult:
    """Say where the tool's token count is not the server's (a client tokenizer counts the text again)."""
    counted, server = result.output_tokens, result.server_output_tokens
    if math.isfinite(counted) and math.isfinite(server) and server > 0 and abs(counted / server - 1) > 0.01:
        notes.append(
            f"{result.tool} counted {counted:,.0f} output tokens with its own tokenizer, the server's usage "
            f"says {server:,.0f} ({(counted / server - 1) * 100:+.1f} %): its output tok/s counts its own"
        )
    if not notes:
        return result
    return replace(result, notes=(*result.notes, *notes))


def read_aiperf_timeslices(document: Mapping[str, Any], where: str, warnings: list[str]) -> ClientResult:
    """AIPerf's per-interval export: one :class:`Interval` per slice, the run's totals their sums."""
    slices = document.get("timeslices")
    if not isinstance(slices, list):
        warnings.append(f"{where}: timeslices: {_short(slices)} is not a list of slices: none read")
        slices = []
    intervals: list[Interval] = []
    origin = NAN
    sums = {"requests": 0.0, "output": 0.0, "server": 0.0}
    for number, item in enumerate(slices, start=1):
        at = f"{where}: slice {number}"
        if not isinstance(item, Mapping):
            warnings.append(f"{at}: {_short(item)} is not a slice: skipped, the run's totals unknown")
            sums = dict.fromkeys(sums, NAN)
            continue
        figures = _Records(item, at, warnings)
        start_ns, end_ns = finite(item.get("start_ns")), finite(item.get("end_ns"))
        if not (math.isfinite(start_ns) and math.isfinite(end_ns) and end_ns > start_ns):
            figures.warn("start_ns/end_ns missing or out of order: skipped, the run's totals unknown")
            sums = dict.fromkeys(sums, NAN)
            continue
        if math.isnan(origin):
            origin = start_ns
        requests = figures.stat("request_count", required=True)
        output = figures.stat("total_output_tokens", required=True)
        sums["requests"] += requests
        sums["output"] += output
        sums["server"] += figures.stat("total_usage_completion_tokens")
        intervals.append(
            Interval(
                (start_ns - origin) / 1e9,
                (end_ns - origin) / 1e9,
                requests,
                output,
                figures.stat("output_token_throughput", required=True),
            )
        )
    duration = intervals[-1].end_s - intervals[0].start_s if intervals else NAN
    result = ClientResult(
        "AIPerf (per-interval export)",
        where,
        duration_s=duration,
        requests=sums["requests"] if intervals else NAN,
        output_tokens=sums["output"] if intervals else NAN,
        server_output_tokens=sums["server"] if intervals else NAN,
        requests_per_s=sums["requests"] / duration if duration > 0 else NAN,
        output_tokens_per_s=sums["output"] / duration if duration > 0 else NAN,
        intervals=tuple(intervals),
    )
    return _with_token_note(result, [])
