"""Tidy CSV (and Parquet) exports, checked against the recorded events and the core."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import pytest

from tests.report.conftest import SERVER_RUN
from tests.report.helpers import node_totals
from tokenwatch.frontends.tables import run_tables, write_csv, write_parquet
from tokenwatch.runs.run_data import RunData


def _read(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def csv_dir(server_run: RunData, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("csv")
    write_csv(server_run, out)
    return out


def test_csv_files_and_shapes(csv_dir: Path, server_run: RunData) -> None:
    names = sorted(p.name for p in csv_dir.iterdir())
    assert names == sorted(
        f"{n}.csv" for n in ("summary", "nodes", "alerts", "node_series", "gpu_series", "latency")
    )
    h = server_run.history
    assert h is not None
    assert len(_read(csv_dir / "node_series.csv")) == h.points * 18
    assert len(_read(csv_dir / "gpu_series.csv")) == len(h.gpu_times) * 72


def test_node_series_ends_at_each_nodes_recorded_total(csv_dir: Path) -> None:
    totals = node_totals(SERVER_RUN)
    last: dict[str, int] = {}
    for row in _read(csv_dir / "node_series.csv"):
        last[row["node"]] = int(row["tokens_done"])
    assert last == totals.tokens


def test_summary_and_nodes_match_independent_figures(csv_dir: Path) -> None:
    totals = node_totals(SERVER_RUN)
    summary = {r["figure"]: r for r in _read(csv_dir / "summary.csv")}
    assert float(summary["aggregate_tokens_per_s"]["value"]) == pytest.approx(totals.aggregate(), rel=1e-12)
    assert summary["aggregate_tokens_per_s"]["unit"] == "tokens/s"
    nodes = {r["node"]: float(r["tokens_per_s"]) for r in _read(csv_dir / "nodes.csv")}
    for name in totals.nodes:
        assert nodes[name] == pytest.approx(totals.tokens_per_s(name), rel=1e-12)


def test_latency_counts_sum_to_the_requests(csv_dir: Path, server_run: RunData) -> None:
    assert server_run.snapshot is not None
    counts: dict[str, int] = {}
    for row in _read(csv_dir / "latency.csv"):
        counts[row["metric"]] = counts.get(row["metric"], 0) + int(row["count"])
    assert counts == {m: s.count for m, s in server_run.snapshot.latency.items()}


def test_gpu_series_missing_values_are_empty_cells(failure_run: RunData, tmp_path: Path) -> None:
    write_csv(failure_run, tmp_path)
    rows = [r for r in _read(tmp_path / "gpu_series.csv") if r["node"] == "node07" and float(r["t_s"]) > 2000]
    assert rows
    assert all(r["power_w"] == "" for r in rows)


def test_parquet_holds_the_same_tables(server_run: RunData, tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet", reason="pyarrow is the optional [parquet] extra")
    write_parquet(server_run, tmp_path)
    for name, table in run_tables(server_run).items():
        read = pq.read_table(tmp_path / f"{name}.parquet").to_pydict()
        assert list(read) == list(table)
        for column, values in table.items():
            got = read[column]
            expected = values.tolist() if isinstance(values, np.ndarray) else list(values)
            assert len(got) == len(expected)
            for g, e in zip(got, expected, strict=True):
                assert (isinstance(e, float) and math.isnan(e) and (g is None or math.isnan(g))) or g == e


def test_cli_export_errors(run_cli, tmp_path: Path) -> None:
    none = run_cli("export", str(SERVER_RUN))
    assert none.returncode == 2
    assert "--csv DIR" in none.stderr
    blocker = tmp_path / "file"
    blocker.write_text("x")
    bad = run_cli("export", str(SERVER_RUN), "--csv", str(blocker / "sub"))
    assert bad.returncode == 2
    assert "cannot create the folder" in bad.stderr
    assert bad.stderr.count("\n") == 1
    ok = run_cli("export", str(SERVER_RUN), "--csv", str(tmp_path / "out"))
    assert ok.returncode == 0
    assert (tmp_path / "out" / "summary.csv").exists()
