"""What a loaded run is: its summary and efficiency, its provenance, and (for a recording) its time series.

Built by :func:`tokenwatch.runs.load_run`; the report and the exports only lay it out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tokenwatch import __version__
from tokenwatch.core import RackSnapshot, RunSummary
from tokenwatch.core.alerts import AlertSpan
from tokenwatch.core.efficiency import Efficiency
from tokenwatch.core.run_history import RunHistory


@dataclass(frozen=True, slots=True)
class Provenance:
    path: str
    kind: str  # "recording" | "result folders"
    sha256: str
    size_bytes: int
    recorded_with: str  # tokenwatch version that wrote the recording ("" for result folders)
    created: str
    start_time: str  # ISO 8601 UTC of t = 0 ("" when unknown)
    hosts: tuple[str, ...]
    config: Mapping[str, Any] = field(default_factory=dict)
    report_version: str = __version__


@dataclass(frozen=True, slots=True, eq=False)
class RunData:
    label: str
    summary: RunSummary
    efficiency: Efficiency
    provenance: Provenance
    snapshot: RackSnapshot | None = None  # None for result folders (no time series)
    history: RunHistory | None = None
    alert_spans: tuple[AlertSpan, ...] = ()
    gpus_per_node: int | None = 1  # None: not known (result folders without a system description)
    warnings: tuple[str, ...] = ()
