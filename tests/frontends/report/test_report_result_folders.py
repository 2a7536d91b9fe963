"""Reports of MLPerf result folders: eight real per-GPU LoadGen summaries (ASUSTeK MI325X, v5.1)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.frontends.conftest import DATA
from tokenwatch.base.formatting import group

FOLDER = DATA / "asustek-mi325x"
# tokens/s of each summary as published (SOURCES.md of the shared real data): independent of our parser.
PUBLISHED = (4103.7, 4163.89, 4089.58, 4212.49, 4119.21, 4204.21, 4157.72, 4187.86)


def test_report_of_result_folders(run_cli, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    # one GPU behind each summary: ASUSTeK measured per GPU (nothing in the folders says so)
    done = run_cli("report", str(FOLDER), "-o", str(out), "--tdp-w", "1000", "--gpus-per-node", "1")
    assert done.returncode == 0, done.stderr
    html = out.read_text()
    assert f"<td>Total aggregate</td><td>{group(sum(PUBLISHED), 1)}</td>" in html
    assert f"<td>Max single-node</td><td>{group(max(PUBLISHED), 1)}</td>" in html
    assert f"<td>{sum(PUBLISHED) / (8 * 1000):,.2f}</td>" in html  # TDP-based: 8 GPUs x 1,000 W
    unknown = tmp_path / "unknown.html"
    done = run_cli("report", str(FOLDER), "-o", str(unknown), "--tdp-w", "1000")
    assert done.returncode == 0, done.stderr
    assert "GPUs unknown" in unknown.read_text()  # without the count, no per-GPU figure is made up
    assert f"<td>{sum(PUBLISHED) / (8 * 1000):,.2f}</td>" not in unknown.read_text()
    assert re.search(r'<figure class="chart" id="node-spread"', html)
    assert "No time series" in html  # said, not faked


def test_export_of_result_folders(run_cli, tmp_path: Path) -> None:
    done = run_cli("export", str(FOLDER), "--csv", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["nodes.csv", "summary.csv"]
    rows = (tmp_path / "nodes.csv").read_text().splitlines()[1:]
    assert sorted(float(r.split(",")[2]) for r in rows) == sorted(PUBLISHED)
