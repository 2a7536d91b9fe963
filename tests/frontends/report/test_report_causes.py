"""The report's cause section and power note, over a seeded simulator recording with two faults of known
cause (tests/frontends/tui/recordings.py CAUSE_FAULTS): node03 throttled from 1:30 and node05's power
limit lowered to 1,200 W from 2:00. The stragglers and the limit changes are checked against the recorded
events themselves. Cost: ~1 s (a 5-minute Offline run)."""

from __future__ import annotations

import html as html_text
import re
from pathlib import Path

import numpy as np
import pytest

from tests.frontends.tui.recordings import cause_run_events, write_recording
from tokenwatch.base.events import GPU_METRICS, GpuBatch, RunStarted
from tokenwatch.core import CoreConfig
from tokenwatch.frontends.report.run_report import render_run_report
from tokenwatch.recording import RecordingReader
from tokenwatch.runs.loading import load_run

_LIMIT = GPU_METRICS.index("power_limit_w")


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("causes") / "faults.jsonl.zst"
    return write_recording(path, cause_run_events())


def limit_changes(path: Path) -> list[tuple[float, str, float, float]]:
    """(t, node, old W, new W) of every GPU whose recorded power limit moved, straight from the events."""
    nodes: tuple[str, ...] = ()
    last: dict[tuple[int, int], float] = {}
    out: list[tuple[float, str, float, float]] = []
    for event in RecordingReader(path).events():
        if isinstance(event, RunStarted):
            nodes = event.nodes
        elif isinstance(event, GpuBatch):
            for n, g, limit in zip(
                event.node_index.tolist(), event.gpu.tolist(), event.values[:, _LIMIT].tolist(), strict=True
            ):
                if not np.isfinite(limit):
                    continue
                old = last.get((n, g))
                if old is not None and abs(limit - old) >= 1.0:
                    out.append((event.t, nodes[n], old, limit))
                last[(n, g)] = limit
    return out


def section(html: str, section_id: str) -> str:
    part = html[html.index(f'<section id="{section_id}">') :]
    return part[: part.index("</section>")]


def rows(html: str, table_id: str) -> list[list[str]]:
    table = html[html.index(f'id="{table_id}"') :]
    table = table[: table.index("</table>")]
    return [
        [
            html_text.unescape(re.sub(r"<[^>]+>", "", cell))
            for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
        ]
        for row in re.findall(r"<tr[^>]*>(.*?)</tr>", table, re.S)
        if "<td" in row
    ]


def test_the_cause_section_names_each_straggler_and_the_limit_change(recording: Path) -> None:
    html = render_run_report(load_run(recording))
    causes = section(html, "causes")
    stragglers = rows(causes, "causes-table")
    by_node = {r[0]: r for r in stragglers if r[3] != "hint now"}
    # node03's four GPUs are throttled (HW slowdown): its hint is the clock, since within one straggler
    # window of the fault's start (the alert itself comes once the slowness has held for a window).
    node03 = by_node["node03"]
    since = re.search(r"since (\d+):(\d+)", node03[4])
    assert since is not None
    assert 90 <= int(since[1]) * 60 + int(since[2]) <= 90 + CoreConfig().straggler_window_s
    assert "SM clock" in node03[4]
    assert "HW slowdown" in node03[4]
    # node05 is slow because its limit was lowered: the hint says so with both limits.
    assert "power limit lowered 1,400 -> 1,200 W" in by_node["node05"][4]
    assert set(by_node) == {"node03", "node05"}

    recorded = limit_changes(recording)
    assert {(t, node, old, new) for t, node, old, new in recorded} == {(120.0, "node05", 1400.0, 1200.0)}
    assert len(recorded) == 4  # all four GPUs of node05, at one moment
    assert rows(causes, "power-limit-table") == [["02:00", "node05", "GPU0-3", "1,400 -> 1,200 W"]]


def test_the_power_note_says_where_the_energy_comes_from(recording: Path) -> None:
    html = render_run_report(load_run(recording))
    # The simulator's GPUs carry energy counters, which the recording keeps.
    assert any(
        isinstance(e, GpuBatch) and np.isfinite(e.values[:, GPU_METRICS.index("energy_j")]).all()
        for e in RecordingReader(recording).events()
    )
    assert "their own cumulative energy counters" in section(html, "power")


def test_a_healthy_run_has_no_cause(tmp_path: Path) -> None:
    path = write_recording(tmp_path / "healthy.jsonl.zst", cause_run_events(180.0, faults=""))
    causes = section(render_run_report(load_run(path)), "causes")
    assert "No straggler and no power-limit change during the run." in causes
    assert "causes-table" not in causes
