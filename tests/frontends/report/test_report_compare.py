"""Two runs side by side: the ratios are B / A of independently computed figures."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.frontends.conftest import SERVER_RUN, chromium
from tests.frontends.helpers import node_totals
from tokenwatch.base.formatting import group
from tokenwatch.core.capacity import Workload, capacity
from tokenwatch.core.comparison import Better, ComparedFigure, compare_runs
from tokenwatch.frontends.report.compare_report import render_comparison
from tokenwatch.runs.loading import load_run


@pytest.fixture(scope="module")
def comparison_html(gb200_recording: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    a, b = load_run(gb200_recording), load_run(SERVER_RUN)
    path = tmp_path_factory.mktemp("compare") / "compare.html"
    path.write_text(render_comparison(a, b), encoding="utf-8")
    return path


def test_ratios_are_b_over_a(comparison_html: Path, gb200_recording: Path) -> None:
    agg_a, agg_b = node_totals(gb200_recording).aggregate(), node_totals(SERVER_RUN).aggregate()
    html = comparison_html.read_text()
    table = html[html.index('id="comparison-table"') :]
    row = re.search(r"<td>Throughput: Total aggregate \(tokens/s\)</td>(.*?)</tr>", table)
    assert row is not None
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", row.group(1))
    assert cells == [group(agg_a, 1), group(agg_b, 1), f"x{agg_b / agg_a:.3f}"]
    per_gpu = re.search(r"<td>Throughput: Per GPU \(tokens/s\)</td>(.*?)</tr>", table)
    assert per_gpu is not None
    assert f"x{(agg_b / 72) / (agg_a / 72):.3f}" in per_gpu.group(1)
    # gb200's 1,200 W vs gb300's 1,400 W TDP: the TDP-based efficiency uses each run's own TDP.
    tdp = re.search(r"<td>Power: TDP-based tokens/s per W.*?</td>(.*?)</tr>", table)
    assert tdp is not None
    expected = (agg_b / (72 * 1400)) / (agg_a / (72 * 1200))
    assert f"x{expected:.3f}" in tdp.group(1)
    # Latency only in B (Server): shown, with no ratio.
    assert "<td>Latency: TTFT p99 (ms)</td><td>—</td>" in table


def test_comparison_renders_in_chromium(comparison_html: Path, tmp_path: Path) -> None:
    dom = chromium(tmp_path, "--dump-dom", comparison_html.as_uri()).stdout.decode()
    assert "</html>" in dom
    ids = set(re.findall(r'<figure class="chart" id="([^"]+)"', dom))
    assert {"compare-ratios", "compare-throughput", "compare-nodes", "compare-power"} <= ids


@pytest.mark.parametrize(
    ("a", "b", "better", "verdict"),
    [
        (100.0, 120.0, "higher", True),
        (100.0, 80.0, "higher", False),
        (50.0, 40.0, "lower", True),
        (50.0, 50.0, "lower", None),
        (0.0, 5.0, "higher", None),
        (float("nan"), 1.0, "higher", None),
    ],
)
def test_compared_figure_verdicts(a: float, b: float, better: Better, verdict: bool | None) -> None:
    fig = ComparedFigure("s", "x", "", a, b, better)
    assert fig.b_is_better is verdict


def test_compare_runs_lists_latency_only_when_measured(server_run, failure_run) -> None:
    rows = compare_runs(
        failure_run.summary, failure_run.summary, failure_run.efficiency, failure_run.efficiency
    )
    assert not [r for r in rows if r.section == "Latency"]
    rows = compare_runs(
        failure_run.summary, server_run.summary, failure_run.efficiency, server_run.efficiency
    )
    assert {r.label for r in rows if r.section == "Latency"} >= {"TTFT p99", "TPOT p50", "E2E p90"}


@pytest.mark.parametrize(
    ("tokens_per_s", "tokens", "expected"),
    [(1_100_948.3, 650, 1693.766615), (1_100_948.3, 10_000, 110.09483)],
)
def test_capacity_is_throughput_over_tokens(tokens_per_s: float, tokens: float, expected: float) -> None:
    (row,) = capacity(tokens_per_s, 72, [Workload("w", tokens)])
    assert row.interactions_per_s == pytest.approx(expected, rel=1e-6)
    assert row.interactions_per_s_per_gpu == pytest.approx(expected / 72, rel=1e-6)
    assert row.interactions_per_hour == pytest.approx(expected * 3600, rel=1e-6)


def test_cli_compare(run_cli, gb200_recording: Path, tmp_path: Path) -> None:
    out = tmp_path / "c.html"
    done = run_cli("report", str(gb200_recording), str(SERVER_RUN), "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert 'id="comparison-table"' in out.read_text()
    three = run_cli("report", str(SERVER_RUN), str(SERVER_RUN), str(SERVER_RUN), "-o", str(out))
    assert three.returncode == 2
    assert "give one RUN, or two" in three.stderr
