"""Client-side benchmark results beside the server's own figures: what ``summarize`` prints for them.

A client benchmark (AIPerf, GenAI-Perf, ``vllm bench serve``, SGLang ``bench_serving``) times a run from
outside the server; tokenwatch's summary of the same run (a recording of the server's logs or
``/metrics``, or LoadGen's result folders) states the server's side. Each figure is shown as each side
states it, over each side's own window (their durations are shown too); the difference is the client's
figure against the server's, in %, where both are known.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenwatch.base.formatting import json_number
from tokenwatch.core.final_figure import rack_sum
from tokenwatch.core.summary import RunSummary
from tokenwatch.runs.errors import RunLoadError
from tokenwatch.sources.client_result import ClientResult
from tokenwatch.sources.client_results import read_client_results
from tokenwatch.sources.errors import SourceFormatError

# The rows of the side-by-side table: key, label. Latency rows are "<metric>_<stat>" (ms).
ROWS: tuple[tuple[str, str], ...] = (
    ("duration_s", "duration (s)"),
    ("output_tokens_per_s", "output tokens/s"),
    ("requests_per_s", "requests/s"),
    ("output_tokens", "output tokens"),
    ("requests", "requests"),
    ("ttft_p50", "TTFT p50 (ms)"),
    ("ttft_p99", "TTFT p99 (ms)"),
    ("tpot_p50", "TPOT p50 (ms)"),
    ("tpot_p99", "TPOT p99 (ms)"),
    ("e2e_p50", "E2E p50 (ms)"),
    ("e2e_p99", "E2E p99 (ms)"),
)
COMPARED = ("output_tokens_per_s", "requests_per_s")  # the rates a difference is given for


@dataclass(frozen=True, slots=True)
class Column:
    """One side's figures by row key (NaN: not stated), with a heading and notes."""

    heading: str
    source: str
    figures: Mapping[str, float]
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SideBySide:
    """The server's column (None where only client results were given) and one column per client run."""

    server: Column | None
    clients: tuple[Column, ...]
    results: tuple[ClientResult, ...]

    def difference_pct(self, client: Column, key: str) -> float:
        """The client's figure against the server's, in % (NaN where either is unknown)."""
        if self.server is None:
            return math.nan
        mine, theirs = client.figures.get(key, math.nan), self.server.figures.get(key, math.nan)
        return (mine / theirs - 1.0) * 100.0 if theirs > 0 and math.isfinite(mine) else math.nan

    def to_json(self) -> dict[str, Any]:
        clients = []
        for column, result in zip(self.clients, self.results, strict=True):
            clients.append(
                {
                    "tool": result.tool,
                    "source": result.source,
                    **{key: json_number(column.figures.get(key), 6) for key, _ in ROWS[:5]},
                    "failed": json_number(result.failed, 6),
                    "input_tokens": json_number(result.input_tokens, 6),
                    "server_output_tokens": json_number(result.server_output_tokens, 6),
                    "total_tokens_per_s": json_number(result.total_tokens_per_s, 6),
                    "concurrency": json_number(result.concurrency, 6),
                    "latency_ms": {
                        m: {k: json_number(v, 6) for k, v in stats.items()}
                        for m, stats in result.latency_ms.items()
                    },
                    "intervals": [
                        {
                            "start_s": json_number(i.start_s, 6),
                            "end_s": json_number(i.end_s, 6),
                            "requests": json_number(i.requests, 6),
                            "output_tokens": json_number(i.output_tokens, 6),
                            "output_tokens_per_s": json_number(i.output_tokens_per_s, 6),
                        }
                        for i in result.intervals
                    ],
                    "vs_server_pct": {
                        key: json_number(self.difference_pct(column, key), 3) for key in COMPARED
                    },
                    "notes": list(result.notes),
                }
            )
        server: dict[str, Any] | None = None
        if self.server is not None:
            server = {"name": self.server.source}
            server |= {key: json_number(self.server.figures.get(key), 6) for key, _ in ROWS}
        return {"server": server, "clients": clients}


def client_column(result: ClientResult) -> Column:
    figures: dict[str, float] = {
        "duration_s": result.duration_s,
        "output_tokens_per_s": result.output_tokens_per_s,
        "requests_per_s": result.requests_per_s,
        "output_tokens": result.output_tokens,
        "requests": result.requests,
    }
    for metric in ("ttft", "tpot", "e2e"):
        stats = result.latency_ms.get(metric, {})
        for stat in ("p50", "p99"):
            figures[f"{metric}_{stat}"] = stats.get(stat, math.nan)
    return Column(result.tool, result.source, figures, result.notes)


def server_column(summary: RunSummary) -> Column:
    """The server's side, as tokenwatch's summary states it (tokens unknown for a samples-only result)."""
    rates = [n.samples_per_s for n in summary.nodes]
    samples = rack_sum(rates) if any(math.isfinite(r) and r > 0 for r in rates) else math.nan
    tokens = summary.tokens_per_s
    figures: dict[str, float] = {
        "duration_s": summary.duration_s,
        "output_tokens_per_s": tokens,
        "requests_per_s": samples,
        # Counts are not stated beside a summary's rates (a product of rate and duration would be a guess).
        "output_tokens": math.nan,
        "requests": math.nan,
    }
    for metric in ("ttft", "tpot", "e2e"):
        stats = summary.latency_ms.get(metric, {})
        for stat in ("p50", "p99"):
            figures[f"{metric}_{stat}"] = stats.get(stat, math.nan)
    return Column("server (tokenwatch)", summary.name, figures)


def side_by_side(summary: RunSummary | None, results: Sequence[ClientResult]) -> SideBySide:
    return SideBySide(
        None if summary is None else server_column(summary),
        tuple(client_column(r) for r in results),
        tuple(results),
    )


def read_clients(paths: Sequence[Path]) -> tuple[list[ClientResult], list[str]]:
    """Every run in the client result files; a file that holds none is one line (RunLoadError)."""
    results: list[ClientResult] = []
    warnings: list[str] = []
    for path in paths:
        try:
            found, more = read_client_results(path)
        except SourceFormatError as exc:
            raise RunLoadError(str(exc)) from None
        results += found
        warnings += more
    return results, warnings
