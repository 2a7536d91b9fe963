"""The HTML run report: rendered in headless Chromium (light and dark), self-contained, right figures."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from tests.frontends.conftest import FAILURE_RUN, SERVER_RUN, chromium
from tests.frontends.helpers import node_totals, png_pixels
from tokenwatch.base.formatting import group
from tokenwatch.frontends.report.run_report import render_run_report
from tokenwatch.runs.run_data import RunData

FIGURES_SERVER = {
    "throughput-aggregate",
    "throughput-nodes",
    "node-spread",
    "heatmap-power_w",
    "heatmap-sm_clock_mhz",
    "power-time",
    "efficiency-time",
    "latency-ttft",
    "latency-tpot",
    "latency-e2e",
    "alerts-timeline",
}


@pytest.fixture(scope="module")
def server_html(tmp_path_factory: pytest.TempPathFactory, server_run: RunData) -> Path:
    path = tmp_path_factory.mktemp("report") / "server.html"
    path.write_text(render_run_report(server_run), encoding="utf-8")
    return path


def test_report_is_self_contained(server_html: Path) -> None:
    html = server_html.read_text()
    # Nothing to fetch: no external src/href, no @import, no url() outside data: URIs, no <link>.
    assert not re.search(r"""(?:src|href)\s*=\s*["'](?!data:|#)""", html)
    assert not re.search(r"url\((?!#|data:)", html)
    assert "<link" not in html
    assert "@import" not in html
    assert "<script src" not in html


def test_summary_table_matches_independent_computation(server_html: Path) -> None:
    totals = node_totals(SERVER_RUN)
    html = server_html.read_text()
    table = html[html.index('id="summary-table"') :]
    table = table[: table.index("</table>")]
    assert f"<td>{group(totals.aggregate(), 1)}</td>" in table
    per_node = [totals.tokens_per_s(n) for n in totals.nodes]
    assert f"<td>{group(max(per_node), 1)}</td>" in table
    assert f"<td>{group(min(per_node), 1)}</td>" in table
    assert f"<td>{group(float(np.median(per_node)), 1)}</td>" in table
    assert f"<td>{group(totals.aggregate() / (len(totals.nodes) * 4), 1)}</td>" in table
    spread = (max(per_node) - min(per_node)) / min(per_node) * 100
    assert f"<td>{spread:.1f} %</td>" in table


def test_capacity_table_divides_the_measured_throughput(server_html: Path) -> None:
    aggregate = node_totals(SERVER_RUN).aggregate()
    html = server_html.read_text()
    cap = html[html.index('id="capacity-table"') :]
    cap = cap[: cap.index("</table>")]
    for name, tokens in (("Simple Q&amp;A", 650), ("RAG query", 2500), ("Multi-step agent", 10000)):
        assert f"<td>{name}</td><td>{group(tokens)}</td><td>{group(aggregate / tokens, 1)}</td>" in cap


def test_efficiency_uses_gpus_times_tdp(server_run: RunData) -> None:
    html = render_run_report(server_run)
    eff = html[html.index('id="efficiency-table"') :]
    eff = eff[: eff.index("</table>")]
    tdp_based = node_totals(SERVER_RUN).aggregate() / (72 * 1400.0)  # the profile's 1,400 W limit
    assert f"<td>{tdp_based:,.2f}</td>" in eff
    assert "100.8 kW" in eff  # 72 x 1,400 W


def test_chromium_renders_light_and_dark(server_html: Path, tmp_path: Path) -> None:
    shots = {}
    for theme in ("light", "dark"):
        shot = tmp_path / f"{theme}.png"
        result = chromium(
            tmp_path,
            "--window-size=1100,2400",
            f"--screenshot={shot}",
            f"{server_html.as_uri()}#theme={theme}",
        )
        assert shot.exists(), result.stderr.decode(errors="replace")[-2000:]
        shots[theme] = png_pixels(shot.read_bytes())
    for theme, pixels in shots.items():
        # Not blank: many distinct colours (charts, text), not one background colour.
        colours = np.unique(pixels.reshape(-1, 3), axis=0)
        assert len(colours) > 200, theme
    light_bg = np.median(shots["light"][:40, :, :].reshape(-1, 3), axis=0)
    dark_bg = np.median(shots["dark"][:40, :, :].reshape(-1, 3), axis=0)
    assert light_bg.mean() > 200, light_bg
    assert dark_bg.mean() < 60, dark_bg


def test_chromium_dom_holds_the_figures(server_html: Path, tmp_path: Path) -> None:
    result = chromium(tmp_path, "--dump-dom", server_html.as_uri())
    dom = result.stdout.decode()
    assert "</html>" in dom, result.stderr.decode(errors="replace")[-2000:]
    found = set(re.findall(r'<figure class="chart" id="([^"]+)"', dom))
    assert found >= FIGURES_SERVER
    # Every figure is a real chart: an SVG with axis labels and a legend.
    for fig in re.findall(r'<figure class="chart".*?</figure>', dom, flags=re.S):
        assert "<svg" in fig
        assert 'class="legend' in fig
        assert 'class="axis' in fig
    for section in (
        "summary",
        "throughput",
        "spread",
        "gpus",
        "power",
        "latency",
        "alerts",
        "capacity",
        "provenance",
    ):
        assert f'<section id="{section}">' in dom


def test_provenance_names_the_recording(server_run: RunData) -> None:
    import hashlib

    html = render_run_report(server_run)
    digest = hashlib.sha256(SERVER_RUN.read_bytes()).hexdigest()
    prov = html[html.index('id="provenance-list"') :]
    assert digest in prov
    assert "2025-09-09T00:00:00+00:00" in prov
    assert "node18" in prov


def test_node_failure_report_shows_the_outage(failure_run: RunData) -> None:
    html = render_run_report(failure_run)
    alerts = html[html.index('id="alerts-table"') :]
    assert "node07 down" in alerts
    nodes = html[html.index('id="nodes-table"') :]
    assert "<td>node07</td>" in nodes
    assert '<td class="bad">down</td>' in nodes
    # The heatmap shows node07's GPUs as not reporting after the outage (NaN in the history).
    h = failure_run.history
    assert h is not None
    node07 = h.nodes.index("node07")
    after = h.gpu_times > 31 * 60
    assert np.isnan(h.gpu_metric("power_w")[after, node07]).all()
    assert np.isfinite(h.gpu_metric("power_w")[after, 0]).any()


def test_offline_report_says_there_is_no_latency(failure_run: RunData) -> None:
    html = render_run_report(failure_run)
    section = html[html.index('<section id="latency">') :]
    assert "No per-request latency in this run (Offline)" in section[: section.index("</section>")]


def test_cli_report_and_errors(run_cli, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    done = run_cli("report", str(FAILURE_RUN), "-o", str(out), "--workload", "Chat=500")
    assert done.returncode == 0, done.stderr
    assert "<td>Chat</td><td>500</td>" in out.read_text()
    bad = run_cli("report", str(tmp_path / "missing.jsonl"), "-o", str(out))
    assert bad.returncode == 2
    assert bad.stderr.count("\n") == 1
    assert "no such file" in bad.stderr
    bad = run_cli("report", str(FAILURE_RUN), "-o", str(out), "--workload", "x=0")
    assert bad.returncode == 2
    assert "tokens must be between" in bad.stderr
    garbage = tmp_path / "garbage.jsonl"
    garbage.write_bytes(b"\x00\xffnot a recording\n")
    bad = run_cli("report", str(garbage), "-o", str(out))
    assert bad.returncode == 2
    assert "not a tokenwatch recording" in bad.stderr
