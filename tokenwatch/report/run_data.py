"""Loading a run for the report and exports: a recording through the core, or MLPerf result folders.

Everything a report shows comes from here, read from the core (summary, snapshot, whole-run history,
efficiency); the report itself only lays it out.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokenwatch import __version__
from tokenwatch.core import RackCore, RackSnapshot, RunSummary
from tokenwatch.core.alerts import AlertSpan, alert_spans
from tokenwatch.core.efficiency import Efficiency, efficiency, gpu_power_limit_w
from tokenwatch.core.run_history import RunHistory
from tokenwatch.recording import RecordingFormatError, RecordingReader

SUMMARY_FILE = "mlperf_log_summary.txt"


class RunLoadError(ValueError):
    """A RUN argument that cannot be read; one line naming the path."""


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
    gpus_per_node: int = 1
    warnings: tuple[str, ...] = ()


def load_run(path: str | Path, *, tdp_w: float | None = None, gpus_per_node: int | None = None) -> RunData:
    """A recording file or a folder of MLPerf results. ``tdp_w`` overrides the GPUs' reported limit."""
    p = Path(path)
    if p.is_dir():
        return _load_result_folders(p, tdp_w, gpus_per_node)
    return _load_recording(p, tdp_w)


def _sha256_file(path: Path) -> tuple[str, int]:
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def _iso(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.UTC).isoformat(timespec="seconds") if epoch > 0 else ""


def ingest_recording(path: Path) -> tuple[RackCore, RecordingReader]:
    """The core after every event of the recording (the reader keeps the warnings met)."""
    try:
        reader = RecordingReader(path)
    except RecordingFormatError as exc:
        raise RunLoadError(str(exc)) from None
    core = RackCore()
    for event in reader.events():
        core.ingest(event)
    if not core.started:
        raise RunLoadError(f"{path}: the recording holds no run start")
    return core, reader


def _load_recording(path: Path, tdp_w: float | None) -> RunData:
    core, reader = ingest_recording(path)
    run = core.run
    assert run is not None
    summary = core.summary()
    snapshot = core.snapshot()
    history = core.history()
    source = "--tdp-w" if tdp_w is not None else "GPU power limit reported in telemetry"
    eff = efficiency(summary, tdp_w if tdp_w is not None else gpu_power_limit_w(snapshot), source)
    sha, size = _sha256_file(path)
    cfg = core.config
    config: dict[str, Any] = {
        "scenario": run.scenario,
        "source": run.meta.get("recorded_source", run.source),
        **{k: v for k, v in run.meta.items() if k != "recorded_source"},
        "nodes x GPUs": f"{len(run.nodes)} x {run.gpus_per_node}",
        "nominal duration (s)": run.nominal_duration_s,
        "total samples": run.total_samples,
        "core tick / window (s)": f"{cfg.tick_s:g} / {cfg.window_s:g}",
        "straggler threshold": f"{cfg.straggler_pct:g} % below the median for {cfg.straggler_hold_s:g} s",
    }
    provenance = Provenance(
        path=str(path),
        kind="recording",
        sha256=sha,
        size_bytes=size,
        recorded_with=str(reader.header.get("tokenwatch_version", "")),
        created=str(reader.header.get("created", "")),
        start_time=_iso(run.wall_epoch),
        hosts=run.nodes,
        config=config,
    )
    return RunData(
        label=run.name,
        summary=summary,
        efficiency=eff,
        provenance=provenance,
        snapshot=snapshot,
        history=history,
        alert_spans=alert_spans(history.alerts),
        gpus_per_node=run.gpus_per_node,
        warnings=tuple(reader.warnings),
    )


def result_leaf_dirs(folder: Path) -> list[Path]:
    """The folders under ``folder`` (itself included) that hold a LoadGen summary, sorted."""
    found = {Path(root) for root, _, files in os.walk(folder, followlinks=True) if SUMMARY_FILE in files}
    return sorted(found)


def _load_result_folders(folder: Path, tdp_w: float | None, gpus_per_node: int | None) -> RunData:
    leaves = result_leaf_dirs(folder)
    if not leaves:
        raise RunLoadError(f"{folder}: no {SUMMARY_FILE} in this folder or below: not MLPerf results")
    from tokenwatch.sources.loadgen_results import summarize_result_dirs

    summary, warnings = summarize_result_dirs(leaves, gpus_per_node=gpus_per_node)
    digest = hashlib.sha256()
    size = 0
    for leaf in leaves:
        data = (leaf / SUMMARY_FILE).read_bytes()
        digest.update(str(leaf.relative_to(folder)).encode() + b"\0" + data)
        size += len(data)
    eff = efficiency(summary, tdp_w, "--tdp-w")
    provenance = Provenance(
        path=str(folder),
        kind="result folders",
        sha256=digest.hexdigest(),
        size_bytes=size,
        recorded_with="",
        created="",
        start_time="",
        hosts=tuple(n.name for n in summary.nodes),
        config={"result folders": len(leaves), "scenario": summary.scenario},
    )
    per_node = summary.nodes[0].gpus if summary.nodes else 1
    return RunData(
        label=summary.name,
        summary=summary,
        efficiency=eff,
        provenance=provenance,
        gpus_per_node=per_node,
        warnings=tuple(warnings),
    )
