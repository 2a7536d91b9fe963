"""Tidy CSV (and Parquet) exports, checked against the recorded events and the core."""

from __future__ import annotations

import csv
import math
import re
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import RunCli
from tests.frontends.conftest import FAILURE_RUN, SERVER_RUN
from tests.frontends.helpers import node_totals
from tokenwatch.base.events import GPU_METRICS, GpuBatch, RunStarted
from tokenwatch.frontends.tables import run_tables, write_csv, write_parquet
from tokenwatch.recording import RecordingReader
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
    assert len(_read(csv_dir / "gpu_series.csv")) == len(gpu_readings(SERVER_RUN))  # one row a reading


def test_node_series_ends_at_each_nodes_recorded_total(csv_dir: Path) -> None:
    totals = node_totals(SERVER_RUN)
    last: dict[str, int] = {}
    for row in _read(csv_dir / "node_series.csv"):
        last[row["node"]] = int(row["tokens_done"])
    assert last == totals.tokens


def test_summary_and_nodes_match_independent_figures(csv_dir: Path) -> None:
    """To the 10 significant digits a CSV figure carries."""
    totals = node_totals(SERVER_RUN)
    summary = {r["figure"]: r for r in _read(csv_dir / "summary.csv")}
    assert float(summary["aggregate_tokens_per_s"]["value"]) == pytest.approx(totals.aggregate(), rel=1e-9)
    assert summary["aggregate_tokens_per_s"]["unit"] == "tokens/s"
    nodes = {r["node"]: float(r["tokens_per_s"]) for r in _read(csv_dir / "nodes.csv")}
    for name in totals.nodes:
        assert nodes[name] == pytest.approx(totals.tokens_per_s(name), rel=1e-9)


def test_latency_counts_sum_to_the_requests(csv_dir: Path, server_run: RunData) -> None:
    assert server_run.snapshot is not None
    counts: dict[str, int] = {}
    for row in _read(csv_dir / "latency.csv"):
        counts[row["metric"]] = counts.get(row["metric"], 0) + int(row["count"])
    assert counts == {m: s.count for m, s in server_run.snapshot.latency.items()}


def gpu_readings(path: Path) -> list[tuple[float, str, int, float]]:
    """(t, node, GPU, power W) of every GPU reading in the recording, read independently of the export."""
    rows: list[tuple[float, str, int, float]] = []
    nodes: tuple[str, ...] = ()
    for event in RecordingReader(path).events():
        if isinstance(event, RunStarted):
            nodes = event.nodes
        elif isinstance(event, GpuBatch):
            power = event.values[:, GPU_METRICS.index("power_w")]
            for i, g, w in zip(event.node_index.tolist(), event.gpu.tolist(), power.tolist(), strict=True):
                rows.append((event.t, nodes[i], g, w))
    return rows


def test_gpu_series_of_a_fault_run_is_every_reading_at_the_recordings_cadence(
    failure_run: RunData, tmp_path: Path
) -> None:
    """Not the history's 8-s points (7.0, 15.0, 23.0 ...): each reading as recorded, a down node none."""
    write_csv(failure_run, tmp_path)
    rows = _read(tmp_path / "gpu_series.csv")
    readings = gpu_readings(FAILURE_RUN)
    assert len(rows) == len(readings)
    exported = {(float(r["t_s"]), r["node"], int(r["gpu"])): r["power_w"] for r in rows}
    for t, node, gpu, watts in readings[:: len(readings) // 500]:
        assert float(exported[(t, node, gpu)]) == pytest.approx(watts, abs=1e-9)
    node01 = np.array([float(r["t_s"]) for r in rows if r["node"] == "node01" and r["gpu"] == "0"])
    recorded = np.array([t for t, node, gpu, _ in readings if node == "node01" and gpu == 0])
    np.testing.assert_array_equal(node01, recorded)
    assert np.median(np.diff(node01)) == 1.0  # the simulator's 1-s telemetry
    node07 = [float(r["t_s"]) for r in rows if r["node"] == "node07"]
    assert node07
    assert max(node07) < 30 * 60


def test_gpu_series_every_is_each_gpus_mean_over_the_step(run_cli: RunCli, tmp_path: Path) -> None:
    result = run_cli("export", str(FAILURE_RUN), "--csv", str(tmp_path), "--every", "10s")
    assert result.returncode == 0, result.stderr
    rows = [r for r in _read(tmp_path / "gpu_series.csv") if r["node"] == "node03" and r["gpu"] == "1"]
    times = [float(r["t_s"]) for r in rows]
    assert times[:3] == [10.0, 20.0, 30.0]
    assert set(np.diff(times).tolist()) == {10.0}
    readings = [(t, w) for t, node, gpu, w in gpu_readings(FAILURE_RUN) if node == "node03" and gpu == 1]
    for row in rows[::37]:
        end = float(row["t_s"])
        inside = [w for t, w in readings if end - 10 <= t < end]
        assert float(row["power_w"]) == pytest.approx(np.mean(inside), rel=1e-9)


SIGNIFICANT = re.compile(r"^-?(\d+)(?:\.(\d+))?$")


def test_csv_figures_carry_no_float_noise(csv_dir: Path) -> None:
    """``60.5125``, never ``60.512499999999996``: at most 10 significant digits, no exponent."""
    numbers = 0
    for path in csv_dir.iterdir():
        with open(path, newline="") as fh:
            for row in csv.reader(fh):
                for cell in row:
                    found = SIGNIFICANT.match(cell)
                    if found is None or "." not in cell:
                        continue
                    numbers += 1
                    digits = (found[1] + found[2]).lstrip("0")
                    assert len(digits) <= 10, f"{path.name}: {cell}"
                    assert not cell.endswith("0"), f"{path.name}: {cell}"
    assert numbers > 1000
    node_series = _read(csv_dir / "node_series.csv")
    assert any(r["power_w"] and len(r["power_w"]) < 12 for r in node_series)


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
