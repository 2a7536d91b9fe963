"""What a client-side benchmark says about a run, in one shape for every tool that measures from the client.

AIPerf, GenAI-Perf, ``vllm bench serve`` and SGLang's ``bench_serving`` each send requests to a server and
time the answers; their result files state the same few figures under different names. A
:class:`ClientResult` holds them in tokenwatch's units (seconds, tokens, tokens/s, requests/s, ms), each
one NaN where the file does not state it or states something unusable: unknown, never a guessed 0.

:class:`Figures` reads the numbers out of a parsed JSON document and says, in one warning naming the file
(and line, for a JSONL file) and the key, why a figure it expected is unknown.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

NAN = math.nan
# Latency statistics kept per metric (ms): the mean, the percentiles the tables show, and the maximum.
LATENCY_STATS = ("mean", "p50", "p90", "p99", "max")
# The latency metrics, named as the core names the server's: TTFT, TPOT (time per output token after the
# first, what AIPerf and GenAI-Perf call inter-token latency), ITL (vLLM's and SGLang's gap between two
# chunks) and end-to-end.
CLIENT_LATENCY_METRICS = ("ttft", "tpot", "itl", "e2e")


@dataclass(frozen=True, slots=True)
class Interval:
    """One of a benchmark's own time slices (AIPerf's ``--slice-duration``): its window in seconds from
    the first slice's start, and what completed inside it."""

    start_s: float
    end_s: float
    requests: float
    output_tokens: float
    output_tokens_per_s: float


@dataclass(frozen=True, slots=True)
class ClientResult:
    """One client-side benchmark run as its tool states it.

    ``output_tokens_per_s`` is the tool's own figure. ``output_tokens`` is the count the tool used;
    ``server_output_tokens`` the server's own count where the tool gives both (usage fields, or the
    count before a client retokenizes the text), NaN where it does not. ``latency_ms`` maps a metric of
    :data:`CLIENT_LATENCY_METRICS` to the statistics of :data:`LATENCY_STATS` the file states.
    """

    tool: str
    source: str
    duration_s: float = NAN
    requests: float = NAN
    failed: float = NAN
    input_tokens: float = NAN
    output_tokens: float = NAN
    server_output_tokens: float = NAN
    requests_per_s: float = NAN
    output_tokens_per_s: float = NAN
    total_tokens_per_s: float = NAN
    concurrency: float = NAN
    latency_ms: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    intervals: tuple[Interval, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def server_tokens_per_s(self) -> float:
        """The server's own token count over the tool's window (NaN where the tool gives no such count)."""
        if math.isfinite(self.server_output_tokens) and self.duration_s > 0:
            return self.server_output_tokens / self.duration_s
        return NAN


def finite(value: object) -> float:
    """A JSON value as a finite float, or NaN (missing, null, text, a bool, NaN or an infinity)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return NAN
    try:
        number = float(value)
    except OverflowError:  # an integer literal beyond any float (JSON allows 400 digits)
        return NAN
    return number if math.isfinite(number) else NAN


class Figures:
    """Numbers out of one JSON object, each problem one warning naming ``where`` and the key."""

    def __init__(self, document: Mapping[str, Any], where: str, warnings: list[str]) -> None:
        self.document = document
        self.where = where
        self.warnings = warnings

    def number(self, key: str, *, required: bool = True, minimum: float = 0.0) -> float:
        """``document[key]`` as a finite number >= ``minimum``; NaN, with a warning where it was expected
        (``required``) or present but unusable."""
        if key not in self.document or self.document[key] is None:
            if required:
                self.warn(f"{key}: not stated: unknown")
            return NAN
        return self.checked(key, self.document[key], minimum)

    def checked(self, key: str, raw: object, minimum: float = 0.0) -> float:
        value = finite(raw)
        if math.isnan(value):
            shown = repr(raw)
            shown = shown if len(shown) <= 40 else shown[:40] + "…"
            self.warn(f"{key}: {shown} is not a finite number: unknown")
            return NAN
        if value < minimum:
            self.warn(f"{key}: {value:g} is below {minimum:g}: unknown")
            return NAN
        return value

    def warn(self, message: str) -> None:
        self.warnings.append(f"{self.where}: {message}")
