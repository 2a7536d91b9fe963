"""``summarize``, ``report`` and ``export`` read the same nodes from nested result folders.

The bug this pins: with LoadGen summaries in ``rack/A/`` and ``rack/A/B/``, ``summarize`` found 2 nodes
while ``report`` found 3 (A/B counted twice, once under A and once as its own folder). Every command now
goes through the one discovery in ``tokenwatch.runs``; the figures are checked against the summaries'
own "Tokens per second" lines, read here without tokenwatch's parser.
"""

from __future__ import annotations

import csv
import html
import json
import re
import shutil
from pathlib import Path

import pytest

from tests.conftest import DATA, run_tokenwatch
from tokenwatch.base.formatting import group

ASUSTEK = DATA / "sources" / "loadgen" / "asustek-8xmi325x-offline"
# node (relative folder) -> the real per-GPU run whose summary (and detail log, where there is one) it holds
NESTED = {
    "A": "llama2-70b_offline_performance_run_1_gpu_0",
    "A/B": "llama2-70b_offline_performance_run_1_gpu_1",
    "C": "llama2-70b_offline_performance_run_1_gpu_3",
}


def _published_tokens_per_s(summary: Path) -> float:
    match = re.search(r"^Tokens per second\s*:\s*([0-9.]+)\s*$", summary.read_text(), re.MULTILINE)
    assert match is not None, summary
    return float(match.group(1))


@pytest.fixture(scope="module")
def nested_rack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rack = tmp_path_factory.mktemp("nested") / "rack"
    for node, source in NESTED.items():
        (rack / node).mkdir(parents=True, exist_ok=True)
        for file in (ASUSTEK / source).iterdir():
            shutil.copy(file, rack / node / file.name)
    return rack


def _summarize(rack: Path) -> tuple[set[str], float]:
    done = run_tokenwatch("summarize", str(rack), "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    return {n["name"] for n in data["nodes"]}, data["aggregate"]["tokens_per_s"]


def _report(rack: Path, out: Path) -> tuple[set[str], str]:
    done = run_tokenwatch("report", str(rack), "-o", str(out))
    assert done.returncode == 0, done.stderr
    page = out.read_text()
    table = re.search(r'<table id="nodes-table">.*?<tbody>(.*?)</tbody>', page, re.DOTALL)
    assert table is not None
    nodes = {html.unescape(m) for m in re.findall(r"<tr><td>([^<]*)</td>", table.group(1))}
    total = re.search(r"<td>Total aggregate</td><td>([^<]*)</td>", page)
    assert total is not None
    return nodes, total.group(1)


def _export(rack: Path, out: Path) -> tuple[set[str], float]:
    done = run_tokenwatch("export", str(rack), "--csv", str(out))
    assert done.returncode == 0, done.stderr
    with open(out / "nodes.csv", newline="") as fh:
        nodes = {row["node"] for row in csv.DictReader(fh)}
    with open(out / "summary.csv", newline="") as fh:
        figures = {row["figure"]: row["value"] for row in csv.DictReader(fh)}
    return nodes, float(figures["aggregate_tokens_per_s"])


def test_summarize_report_and_export_agree_on_nested_folders(nested_rack: Path, tmp_path: Path) -> None:
    expected_nodes = set(NESTED)
    expected_total = sum(_published_tokens_per_s(nested_rack / n / "mlperf_log_summary.txt") for n in NESTED)

    summarize_nodes, summarize_total = _summarize(nested_rack)
    report_nodes, report_total = _report(nested_rack, tmp_path / "report.html")
    export_nodes, export_total = _export(nested_rack, tmp_path / "csv")

    assert summarize_nodes == report_nodes == export_nodes == expected_nodes
    assert summarize_total == pytest.approx(expected_total, abs=1e-6)
    assert export_total == pytest.approx(expected_total, abs=1e-6)
    assert report_total == group(expected_total, 1)  # the report prints one decimal
