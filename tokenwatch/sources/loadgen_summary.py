"""MLPerf LoadGen's ``mlperf_log_summary.txt``: the headline figures, validity and latency blocks.

The file is ``key : value`` lines in three sections (results, additional stats, test parameters).
Offline says ``Samples per second`` / ``Tokens per second``; Server says ``Completed samples per
second`` / ``Completed tokens per second`` and adds first-token (TTFT) and time-per-output-token
(TPOT) percentile blocks, whose spelling varies by LoadGen version ("Time to Output Token" vs
"Time per Output Token"). Latencies are in nanoseconds in the file and kept so here.

SingleStream and MultiStream summaries (edge LLM runs) state their throughput as ``QPS w/ loadgen overhead``
and ``TPS w/ loadgen overhead``: read as the samples and tokens per second (the figures with LoadGen's
overhead, as Offline's and Server's are).

A line whose number does not parse is skipped with a warning naming the file and line; a file with
no scenario, no result line or no throughput figure is not a summary (:class:`SourceFormatError`), and
one that holds nothing of a summary at all (an accuracy run's 74-byte stub, an aborted run's empty file)
is a :class:`SummaryStubError`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from tokenwatch.sources.errors import SourceFormatError, read_bounded

SUMMARY_NAME = "mlperf_log_summary.txt"
MAX_SUMMARY_BYTES = 16 << 20  # real summaries are ~3 KB

_PERCENTILE = re.compile(r"^(\d+(?:\.\d+)?)(?:th)? percentile (.+) \(ns\)$")
_STAT = re.compile(r"^(min|max|mean) (.+) \(ns\)$")
_COUNT_LINE = re.compile(r"^(no|\d+) (warning|error)s? encountered", re.IGNORECASE)
# What each latency block calls itself (lower case, after "min"/"NN percentile").
_LATENCY_NAMES = {
    "latency": "e2e",
    "first token latency": "ttft",
    "time to output token": "tpot",
    "time per output token": "tpot",
}
_FIGURES = {
    "samples per second": "samples_per_s",
    "completed samples per second": "samples_per_s",
    "scheduled samples per second": "scheduled_samples_per_s",
    "tokens per second": "tokens_per_s",
    "completed tokens per second": "tokens_per_s",
    "qps w/ loadgen overhead": "samples_per_s",  # SingleStream, MultiStream
    "tps w/ loadgen overhead": "tokens_per_s",
}


class SummaryStubError(SourceFormatError):
    """A ``mlperf_log_summary.txt`` that holds no summary (an accuracy run's stub, an empty file)."""


@dataclass(slots=True)
class LoadgenSummary:
    """One summary. ``latency_ns[metric][stat]``: metric e2e|ttft|tpot, stat min|max|mean|p50|...|p99.9."""

    path: str
    scenario: str = ""
    mode: str = ""
    sut_name: str = ""
    result: str = ""  # "VALID" / "INVALID" as printed
    samples_per_s: float = math.nan
    tokens_per_s: float = math.nan
    scheduled_samples_per_s: float = math.nan
    constraints: dict[str, bool] = field(default_factory=dict)  # "Min duration satisfied": True
    latency_ns: dict[str, dict[str, float]] = field(default_factory=dict)
    test_parameters: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # recommendations / early-stopping text
    warning_count: int | None = None
    error_count: int | None = None
    skipped: list[str] = field(default_factory=list)  # "file:line: why" for lines we could not use

    @property
    def valid(self) -> bool:
        return self.result.upper() == "VALID"

    @property
    def unmet_constraints(self) -> list[str]:
        return [name for name, ok in self.constraints.items() if not ok]

    def latency_ms(self) -> dict[str, dict[str, float]]:
        """The latency blocks in milliseconds (the JSON contract's unit)."""
        return {m: {k: v / 1e6 for k, v in stats.items()} for m, stats in self.latency_ns.items()}

    def duration_s(self) -> float:
        """Offline: the one query's samples over samples/s (the summary has no duration of its own)."""
        per_query = self.test_parameters.get("samples_per_query")
        if self.scenario == "Offline" and per_query and self.samples_per_s > 0:
            try:
                return float(per_query) / self.samples_per_s
            except ValueError:
                return math.nan
        return math.nan


def percentile_key(text: str) -> str:
    """``99.90`` -> ``p99.9``, ``50.00`` -> ``p50``."""
    return "p" + f"{float(text):.4f}".rstrip("0").rstrip(".")


def _number(value: str) -> float:
    number = float(value.strip())
    if not math.isfinite(number) or number < 0:
        raise ValueError(f"{value.strip()[:30]!r} is not a non-negative number")
    return number


def parse_summary_text(text: str, path: str = SUMMARY_NAME) -> LoadgenSummary:
    summary = LoadgenSummary(path)
    section = "results"
    note_block = False
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or set(line) == {"="}:
            continue
        lowered = line.lower()
        if lowered in ("mlperf results summary", "additional stats", "test parameters used"):
            section = lowered.split()[0]
            note_block = False
            continue
        count = _COUNT_LINE.match(line)
        if count:
            how_many = 0 if count.group(1).lower() == "no" else int(count.group(1))
            if count.group(2).lower() == "warning":
                summary.warning_count = how_many
            else:
                summary.error_count = how_many
            continue
        if line.startswith("*") or lowered.endswith("result:") or lowered == "recommendations:":
            summary.notes.append(line)
            note_block = True
            continue
        key, sep, value = line.partition(":")
        if not sep:
            if note_block or section == "test":
                summary.notes.append(line)
            continue
        note_block = False
        try:
            _assign(summary, section, " ".join(key.lower().split()), key.strip(), value.strip())
        except ValueError as exc:
            summary.skipped.append(f"{path}:{number}: skipped: {exc}")
    return summary


def _assign(summary: LoadgenSummary, section: str, key: str, raw_key: str, value: str) -> None:
    if raw_key.strip().upper() == "WARNING":
        summary.notes.append(f"{raw_key.strip()}: {value}")
        return
    if section == "test":
        summary.test_parameters[" ".join(raw_key.split())] = value
        return
    if key == "scenario":
        summary.scenario = value
    elif key == "mode":
        summary.mode = value
    elif key == "sut name":
        summary.sut_name = value
    elif key == "result is":
        summary.result = value.split()[0] if value else ""
    elif key.endswith("satisfied"):
        summary.constraints[raw_key] = value.lower().startswith("yes")
    elif key in _FIGURES:
        setattr(summary, _FIGURES[key], _number(value))
    else:
        _assign_latency(summary, key, value)


def _assign_latency(summary: LoadgenSummary, key: str, value: str) -> None:
    match = _PERCENTILE.match(key)
    if match:
        stat, name = percentile_key(match.group(1)), match.group(2)
    else:
        match = _STAT.match(key)
        if not match:
            return
        stat, name = match.group(1), match.group(2)
    metric = _LATENCY_NAMES.get(name)
    if metric is not None:
        summary.latency_ns.setdefault(metric, {})[stat] = _number(value)


def check_summary(summary: LoadgenSummary) -> None:
    """Raise :class:`SourceFormatError` unless the summary has what a result needs."""
    where = summary.path
    nothing = math.isnan(summary.samples_per_s) and math.isnan(summary.tokens_per_s)
    if not summary.scenario and not summary.result and nothing and not summary.latency_ns:
        raise SummaryStubError(f"{where}: holds no LoadGen summary (no Scenario, result or figure)")
    if not summary.scenario:
        raise SourceFormatError(f"{where}: not a LoadGen summary: no 'Scenario :' line")
    if not summary.result:
        raise SourceFormatError(f"{where}: incomplete LoadGen summary: no 'Result is :' line")
    if math.isnan(summary.samples_per_s) and math.isnan(summary.tokens_per_s):
        raise SourceFormatError(f"{where}: LoadGen summary without a samples or tokens per second figure")


def read_summary(path: Path | str) -> LoadgenSummary:
    """Read and check one summary file; every failure is one :class:`SourceFormatError` line."""
    path = Path(path)
    data = read_bounded(path, MAX_SUMMARY_BYTES, "LoadGen summary")
    if b"\x00" in data:
        raise SourceFormatError(f"{path}: binary data, not a LoadGen summary")
    summary = parse_summary_text(data.decode("utf-8", "replace"), str(path))
    check_summary(summary)
    return summary
