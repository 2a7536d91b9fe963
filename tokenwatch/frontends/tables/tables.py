"""Builds the tidy tables from a loaded run (values read from the core) and writes them."""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any

import numpy as np

from tokenwatch.base.events import NODE_STATES
from tokenwatch.base.formatting import printable
from tokenwatch.core.summary import spread_json
from tokenwatch.runs.run_data import RunData

Table = dict[str, list[Any] | np.ndarray]


class ExportError(OSError):
    """The export cannot be written; one line naming the folder."""


def summary_table(run: RunData) -> Table:
    s, e = run.summary, run.efficiency
    rows: list[tuple[str, float | None, str]] = [
        ("duration", s.duration_s, "s"),
        ("nodes", float(len(s.nodes)), ""),
        ("gpus", math.nan if s.gpus is None else float(s.gpus), ""),
        ("aggregate_tokens_per_s", s.tokens_per_s, "tokens/s"),
        ("per_gpu_tokens_per_s", s.per_gpu_tokens_per_s, "tokens/s"),
    ]
    if s.figure != "tokens":  # results that state samples/s only: their figures, tokens unknown above
        rows += [
            (f"aggregate_{s.figure}_per_s", s.aggregate, s.unit),
            (f"per_gpu_{s.figure}_per_s", s.per_gpu, s.unit),
        ]
    rows += [  # the spread is over the summary's own figure
        (
            f"node_{k}_{s.figure}_per_s" if k != "spread_pct" else "node_spread",
            v,
            "%" if k == "spread_pct" else s.unit,
        )
        for k, v in spread_json(s.spread).items()
    ]
    rows += [
        ("mean_power", e.mean_power_w, "W"),
        ("measured_tokens_per_s_per_w", e.measured_tokens_per_s_per_w, "tokens/J"),
        ("gpu_tdp", e.tdp_w, "W"),
        ("rack_tdp", e.rack_tdp_w, "W"),
        ("tdp_tokens_per_s_per_w", e.tdp_tokens_per_s_per_w, "tokens/J"),
    ]
    for metric, pcts in s.latency_ms.items():
        rows += [(f"{metric}_{k}", v, "ms") for k, v in pcts.items()]
    return {
        "run": [run.label] * len(rows),
        "figure": [r[0] for r in rows],
        "value": np.array([math.nan if r[1] is None else r[1] for r in rows], dtype=np.float64),
        "unit": [r[2] for r in rows],
    }


def nodes_table(run: RunData) -> Table:
    nodes = run.summary.nodes
    states = list(run.snapshot.nodes.state) if run.snapshot else [""] * len(nodes)
    return {
        "node": [n.name for n in nodes],
        "gpus": _gpu_counts([n.gpus for n in nodes]),
        "tokens_per_s": np.array([n.tokens_per_s for n in nodes], dtype=np.float64),
        "samples_per_s": np.array([n.samples_per_s for n in nodes], dtype=np.float64),
        "valid": ["" if n.valid is None else str(n.valid).lower() for n in nodes],
        "state_at_end": states,
    }


def node_series_table(run: RunData) -> Table | None:
    h = run.history
    if h is None:
        return None
    points, n = h.node_tokens_per_s.shape
    return {
        "t_s": np.repeat(h.times, n),
        "node": list(h.nodes) * points,
        "tokens_per_s": h.node_tokens_per_s.reshape(-1),
        "tokens_done": h.node_tokens_done.reshape(-1).astype(np.int64),
        "power_w": h.node_power_w.reshape(-1),
        "state": [NODE_STATES[c] for c in h.node_state.reshape(-1).tolist()],
    }


def gpu_series_table(run: RunData, every_s: float | None = None) -> Table | None:
    """A recording's GPU readings at its own cadence (or one mean per ``every_s``, see gpu_readings);
    a run known only by its history (no recording to read) at the history's points."""
    if run.provenance.kind == "recording" and Path(run.provenance.path).is_file():
        from tokenwatch.frontends.tables.gpu_readings import gpu_readings_table

        return gpu_readings_table(run.provenance.path, every_s)
    h = run.history
    if h is None or not len(h.gpu_times):
        return None
    points, n, g, _ = h.gpu_values.shape
    table: Table = {
        "t_s": np.repeat(h.gpu_times, n * g),
        "node": [name for name in h.nodes for _ in range(g)] * points,
        "gpu": np.tile(np.arange(g, dtype=np.int64), points * n),
    }
    for metric in h.gpu_metrics:
        table[metric] = h.gpu_metric(metric).reshape(-1)
    return table


def alerts_table(run: RunData) -> Table:
    spans = run.alert_spans
    return {
        "start_s": np.array([s.start for s in spans], dtype=np.float64),
        "end_s": np.array([math.nan if s.end is None else s.end for s in spans], dtype=np.float64),
        "node": [s.node or "" for s in spans],
        "kind": [s.kind for s in spans],
        "severity": [s.severity for s in spans],
        "message": [s.message for s in spans],
    }


def latency_table(run: RunData) -> Table | None:
    if run.snapshot is None or not run.snapshot.latency:
        return None
    metrics, values, counts = [], [], []
    for metric, st in run.snapshot.latency.items():
        metrics += [metric] * len(st.bucket_values_s)
        values.append(st.bucket_values_s)
        counts.append(st.bucket_counts)
    return {
        "metric": metrics,
        "latency_s": np.concatenate(values),
        "count": np.concatenate(counts).astype(np.int64),
    }


# Every table an export may write (the file names): an input must never be one of them.
TABLE_NAMES: tuple[str, ...] = ("summary", "nodes", "alerts", "node_series", "gpu_series", "latency")


def run_tables(run: RunData, every_s: float | None = None) -> dict[str, Table]:
    """Table name -> columns. Series tables are left out for runs that have none. ``every_s``: the GPU
    series' step (None: every reading as recorded)."""
    out: dict[str, Table] = {"summary": summary_table(run), "nodes": nodes_table(run)}
    if run.snapshot is not None:
        out["alerts"] = alerts_table(run)
    for name, table in (
        ("node_series", node_series_table(run)),
        ("gpu_series", gpu_series_table(run, every_s)),
        ("latency", latency_table(run)),
    ):
        if table is not None:
            out[name] = table
    return out


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return "" if not math.isfinite(value) else plain_figure(value)
    return printable(str(value))  # names and messages come from recordings: no control characters


def plain_figure(value: float, significant: int = 10) -> str:
    """``60.512499999999996`` -> ``60.5125``: at most ``significant`` digits (more than any reading
    carries; what is cut is the float arithmetic's noise), no exponent, no trailing zeros."""
    if value == 0:
        return "0"
    decimals = max(0, significant - 1 - math.floor(math.log10(abs(value))))
    text = f"{value:.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def _prepare(folder: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ExportError(f"{folder}: cannot create the folder: {exc.strerror}") from None


def write_csv(run: RunData, folder: Path, every_s: float | None = None) -> list[Path]:
    """One CSV per table (header row; an empty cell = not measured; figures to 10 significant digits).
    Returns the files written."""
    _prepare(folder)
    written = []
    for name, table in run_tables(run, every_s).items():
        path = folder / f"{name}.csv"
        columns = [c.tolist() if isinstance(c, np.ndarray) else c for c in table.values()]
        try:
            with open(path, "w", newline="", encoding="utf-8") as fh:
                writer = csv.writer(fh, lineterminator="\n")
                writer.writerow(table.keys())
                writer.writerows([_cell(v) for v in row] for row in zip(*columns, strict=True))
        except OSError as exc:
            raise ExportError(f"{path}: cannot write: {exc.strerror}") from None
        written.append(path)
    return written


def write_parquet(run: RunData, folder: Path, every_s: float | None = None) -> list[Path]:
    """One Parquet file per table; needs the optional pyarrow (``pip install tokenwatch[parquet]``)."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ExportError(
            "--parquet needs pyarrow: pip install 'tokenwatch[parquet]' (or use --csv)"
        ) from None
    _prepare(folder)
    written = []
    for name, table in run_tables(run, every_s).items():
        path = folder / f"{name}.parquet"
        try:
            pq.write_table(
                pa.table({k: list(v) if isinstance(v, list) else v for k, v in table.items()}), path
            )
        except OSError as exc:
            raise ExportError(f"{path}: cannot write: {exc}") from None
        written.append(path)
    return written


def _gpu_counts(counts: list[int | None]) -> np.ndarray:
    """Whole numbers where every count is known, else floats with NaN (an empty CSV cell) where not."""
    if all(c is not None for c in counts):
        return np.array(counts, dtype=np.int64)
    return np.array([math.nan if c is None else c for c in counts], dtype=np.float64)
