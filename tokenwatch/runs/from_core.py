"""The one recording -> core loop, and every figure ``runs`` reads from the core.

All of ``runs``' calls into :class:`~tokenwatch.core.RackCore` live in this module, so a change of the
core's interface is met here and nowhere else in the loading path.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tokenwatch.base.events import GPU_METRICS
from tokenwatch.core import CoreConfig, RackCore, RunSummary
from tokenwatch.recording import RecordingFormatError, RecordingReader
from tokenwatch.runs.errors import RunLoadError

if TYPE_CHECKING:
    from tokenwatch.runs.run_data import RunData

# A summary reads node counters and GPU power only: no live view, one GPU figure decoded.
_SUMMARY_CONFIG = CoreConfig(live_view=False)
_SUMMARY_GPU_METRICS = ("power_w", "energy_j")  # energy: the GPUs' counters, where recorded
_PROGRESS_EVERY = 128  # events between progress reports (a rack's recording: ~200 a minute of run)


def ingest_recording(
    path: str | Path,
    *,
    summary_only: bool = False,
    until_s: float = math.inf,
    power_only: bool = False,
    progress: Callable[[float], None] | None = None,
) -> tuple[RackCore, RecordingReader]:
    """The core after every event of the recording with ``t <= until_s`` (the reader keeps the warnings).

    ``summary_only`` builds the lighter core that ``summarize`` needs: no live view, GPU power only;
    ``power_only`` keeps the live view (the series) but decodes GPU power only (a baseline's load).
    ``progress`` hears the share of the file read, every few thousand events (a slow start says so).
    """
    light = summary_only or power_only
    try:
        reader = RecordingReader(path, gpu_metrics=_SUMMARY_GPU_METRICS if light else GPU_METRICS)
    except RecordingFormatError as exc:
        raise RunLoadError(str(exc)) from None
    core = RackCore(_SUMMARY_CONFIG) if summary_only else RackCore()
    for count, event in enumerate(reader.events()):
        if event.t > until_s:
            break
        core.ingest(event)
        if progress is not None and count % _PROGRESS_EVERY == 0:
            progress(_share_read(core, event.t, reader))
    if not core.started:
        # The run start may have been there but refused: then its warning says why.
        why = next((w for w in reader.warnings if "run_started" in w), None)
        raise RunLoadError(why or f"{path}: the recording holds no run start")
    return core, reader


def _share_read(core: RackCore, t: float, reader: RecordingReader) -> float:
    """How far a load is: run time over the nominal length where the run says it (the file's bytes come
    in compressed frames read ahead, a few coarse steps), else the share of the file read."""
    nominal = core.run.nominal_duration_s if core.run is not None else None
    if nominal:
        return min(t / nominal, 0.99)  # a run may go on past its nominal end: never 100 % before the end
    return reader.fraction_read()


def summarize_recording(path: str | Path) -> tuple[RunSummary, list[str]]:
    """The rack summary of a recording and the reader's warnings (what ``summarize`` prints)."""
    core, reader = ingest_recording(path, summary_only=True)
    return with_losses(core.summary(), reader), reader.warnings


def with_losses(summary: RunSummary, reader: RecordingReader) -> RunSummary:
    """The summary, warning of what the recording lost or left out (damaged frames, repeated spans)."""
    if not reader.losses:
        return summary
    return dataclasses.replace(summary, warnings=(*summary.warnings, *reader.losses))


def load_recording(path: Path, tdp_w: float | None) -> RunData:
    """A recording with everything the report and exports show: summary, snapshot, history, alerts."""
    # Imported here: `summarize` imports this module for the loop above and must not pay for these.
    from tokenwatch.core.alerts import alert_spans
    from tokenwatch.core.efficiency import efficiency, gpu_power_limit_w
    from tokenwatch.runs.provenance import iso_utc, sha256_file
    from tokenwatch.runs.run_data import Provenance, RunData

    core, reader = ingest_recording(path)
    run = core.run
    assert run is not None  # ingest_recording refuses a recording without a run start
    summary = with_losses(core.summary(), reader)
    snapshot = core.snapshot()
    history = core.history()
    source = "--tdp-w" if tdp_w is not None else "GPU power limit reported in telemetry"
    eff = efficiency(summary, tdp_w if tdp_w is not None else gpu_power_limit_w(snapshot), source)
    sha, size = sha256_file(path)
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
        start_time=iso_utc(run.wall_epoch),
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
