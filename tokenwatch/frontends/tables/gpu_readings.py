"""The ``gpu_series`` table from the recording itself: every GPU reading at the cadence it was recorded,
or, with ``every_s``, each GPU's mean over every step of that length.

The run's history (what the report draws) keeps the whole run in at most ~1,000 points, so an 80-minute
run's GPU points were 8 s apart whatever the run's cadence; an export is for analysis elsewhere, so it
reads the readings again instead.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from tokenwatch.base.events import GPU_METRICS, GpuBatch, GpuSample, RunStarted
from tokenwatch.core.config import GPU_SERIES_METRICS
from tokenwatch.recording import RecordingReader

_COLUMNS = [GPU_METRICS.index(m) for m in GPU_SERIES_METRICS]


def gpu_readings_table(path: str | Path, every_s: float | None = None) -> dict[str, Any] | None:
    """Columns ``t_s, node, gpu`` and one per metric of :data:`GPU_SERIES_METRICS` (NaN: not reported),
    in time order, or None when the recording holds no GPU readings. ``every_s``: one row per GPU per
    step that has readings, ``t_s`` the step's end and each figure the mean of the step's readings."""
    nodes: tuple[str, ...] = ()
    times: list[np.ndarray] = []
    node_rows: list[np.ndarray] = []
    gpu_rows: list[np.ndarray] = []
    values: list[np.ndarray] = []
    for event in RecordingReader(path, gpu_metrics=GPU_SERIES_METRICS).events():
        if isinstance(event, RunStarted) and not nodes:
            nodes = event.nodes
        elif isinstance(event, GpuBatch):
            times.append(np.full(len(event.gpu), event.t))
            node_rows.append(np.asarray(event.node_index, dtype=np.int64))
            gpu_rows.append(np.asarray(event.gpu, dtype=np.int64))
            values.append(event.values[:, _COLUMNS])
        elif isinstance(event, GpuSample) and event.node in nodes:
            times.append(np.array([event.t]))
            node_rows.append(np.array([nodes.index(event.node)], dtype=np.int64))
            gpu_rows.append(np.array([event.gpu], dtype=np.int64))
            values.append(np.array([[getattr(event, m) for m in GPU_SERIES_METRICS]], dtype=np.float64))
    if not times:
        return None
    t = np.concatenate(times)
    node = np.concatenate(node_rows)
    gpu = np.concatenate(gpu_rows)
    block = np.concatenate(values)
    known = (node >= 0) & (node < len(nodes))  # a batch row outside the run (the core skips it too)
    t, node, gpu, block = t[known], node[known], gpu[known], block[known]
    if every_s is not None:
        t, node, gpu, block = _step_means(t, node, gpu, block, every_s)
    order = np.lexsort((gpu, node, t))  # time, then node, then GPU: as the readings came
    table: dict[str, Any] = {
        "t_s": t[order],
        "node": [nodes[i] for i in node[order].tolist()],
        "gpu": gpu[order],
    }
    for k, metric in enumerate(GPU_SERIES_METRICS):
        table[metric] = block[order, k]
    return table


def _step_means(
    t: np.ndarray, node: np.ndarray, gpu: np.ndarray, block: np.ndarray, every_s: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One row per (step, node, GPU) with readings: the step's end time and the mean of each metric over
    the readings that reported it (NaN where none did)."""
    step = np.floor(t / every_s).astype(np.int64)
    keys = np.stack([step, node, gpu], axis=1)
    unique, inverse = np.unique(keys, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    reported = ~np.isnan(block)
    sums = np.zeros((len(unique), block.shape[1]))
    counts = np.zeros((len(unique), block.shape[1]))
    np.add.at(sums, inverse, np.where(reported, block, 0.0))
    np.add.at(counts, inverse, reported)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = np.where(counts > 0, sums / np.maximum(counts, 1), math.nan)
    ends = (unique[:, 0] + 1) * every_s
    return ends.astype(np.float64), unique[:, 1], unique[:, 2], means
