"""Capacity planning: interactions per second a measured throughput serves, per workload profile.

A workload profile is a kind of user interaction and the generated tokens it costs. The default
profiles are those of the published analysis; a report may pass its own.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


class WorkloadError(ValueError):
    """A workload profile that cannot be read; the message names the text."""


@dataclass(frozen=True, slots=True)
class Workload:
    name: str
    tokens: float  # generated tokens per interaction


DEFAULT_WORKLOADS: tuple[Workload, ...] = (
    Workload("Simple Q&A", 650),
    Workload("RAG query", 2500),
    Workload("Document summarization", 2500),
    Workload("Multi-step agent", 10000),
)


@dataclass(frozen=True, slots=True)
class CapacityRow:
    workload: Workload
    interactions_per_s: float
    interactions_per_s_per_gpu: float
    interactions_per_hour: float


def capacity(tokens_per_s: float, gpus: int, workloads: Sequence[Workload]) -> tuple[CapacityRow, ...]:
    """Interactions per second at ``tokens_per_s`` (NaN when the throughput is unknown)."""
    rows = []
    for w in workloads:
        per_s = tokens_per_s / w.tokens if math.isfinite(tokens_per_s) and w.tokens > 0 else math.nan
        rows.append(CapacityRow(w, per_s, per_s / gpus if gpus else math.nan, per_s * 3600.0))
    return tuple(rows)


def parse_workload(text: str) -> Workload:
    """``"Simple Q&A=650"`` -> Workload; the name is everything before the last ``=``."""
    name, sep, tokens_text = text.rpartition("=")
    name = name.strip()
    if not sep or not name:
        raise WorkloadError(f"bad workload {text!r}: use NAME=TOKENS, e.g. 'RAG query=2500'")
    try:
        tokens = float(tokens_text.strip().replace(",", "").replace("_", ""))
    except ValueError:
        raise WorkloadError(f"bad workload {text!r}: {tokens_text.strip()!r} is not a number") from None
    if not math.isfinite(tokens) or not 1 <= tokens <= 1e9:
        raise WorkloadError(f"bad workload {text!r}: tokens must be between 1 and 1e9")
    if len(name) > 80 or not name.isprintable():
        raise WorkloadError(f"bad workload {text!r}: the name must be printable and at most 80 characters")
    return Workload(name, tokens)
