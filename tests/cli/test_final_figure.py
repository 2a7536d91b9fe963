"""One final figure: every surface that shows a rack's final tokens/s shows the same number, and every one
that names the nodes MLPerf's figure has no result for names them in the same words.

For each sample run and a fault run of every kind the simulator has, the figure is read from the headless
end line, the JSONL ``end`` and ``verdict``, ``summarize --json`` (aggregate and verdict), the report's
headline card and verdict, the snapshot the dashboard draws (header, rack table, verdict panel and badge)
and ``/metrics``; each must equal the figure computed straight from the recording's events
(tests/golden/recording_facts.py: each node's tokens over its own span, summed). A node that did not
finish is in that sum (the node-failure sample's 1,087,903.4 tok/s, where the verdict once said
1,050,666, "LoadGen's figure", a projection of node07 finishing).
"""

from __future__ import annotations

import html
import math
import re
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest

from tests.conftest import REPO_ROOT, RunCli
from tests.golden.recording_facts import recording_facts
from tokenwatch.base.formatting import group
from tokenwatch.core import RackCore
from tokenwatch.frontends.metrics.exposition import render
from tokenwatch.frontends.metrics.families import take_view
from tokenwatch.frontends.tui.widgets.verdict_badge import badge_text
from tokenwatch.recording import read_events

SAMPLES = REPO_ROOT / "sample_runs"
# An 80-minute sample replayed, summarized, reported and read back three times: minutes on a loaded machine.
pytestmark = pytest.mark.timeout(900)


@dataclass(frozen=True, slots=True)
class Case:
    name: str
    recording: Path | None  # a sample run (replayed), or None: a sim run recorded on the way
    faults: str = ""


CASES = [
    *(Case(f"sample-{kind}", SAMPLES / f"gb300-nvl72-{kind}.jsonl.zst") for kind in ("offline", "server")),
    Case("sample-node-failure", SAMPLES / "gb300-nvl72-node-failure.jsonl.zst"),
    Case("fault-down", None, "node07:down@1m"),
    Case("fault-stale", None, "node05:stale@1m"),
    Case("fault-throttle", None, "node03:throttle@1m-2m"),
    Case("fault-slow", None, "node11:slow@1m-2m"),
    Case("fault-powercap", None, "node05:powercap=1200@1m-2m"),
    Case("fault-hot", None, "node12/gpu2:hot@1m"),
]


def _figure_in(text: str) -> int:
    """The first ``1,087,903 tok/s`` in a line, as an integer."""
    found = re.search(r"([\d,]+) tok/s", text)
    assert found is not None, text
    return int(found.group(1).replace(",", ""))


def _metric(exposition: str, name: str) -> float:
    found = re.search(rf"^{name}(?:\{{[^}}]*\}})? (\S+)$", exposition, re.M)
    assert found is not None, name
    return float(found.group(1))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_every_surface_shows_the_one_final_figure(case: Case, run_cli: RunCli, tmp_path: Path) -> None:
    snapshots = tmp_path / "snaps.jsonl"
    if case.recording is None:
        recording = tmp_path / "run.jsonl.zst"
        headless = run_cli(
            "sim", "--seed", "5", "--duration", "3m", "--speed", "0", "--faults", case.faults, "--headless",
            "--interval", "3m", "--jsonl", str(snapshots), "--record", str(recording), timeout=900,
        )  # fmt: skip
    else:
        recording = case.recording
        headless = run_cli(
            "replay", str(recording), "--speed", "0", "--headless", "--interval", "90m",
            "--jsonl", str(snapshots), timeout=900,
        )  # fmt: skip
    assert headless.returncode == 0, headless.stderr

    # The independent reading: each node's tokens over its own span, summed over the nodes that did work.
    facts = recording_facts(recording)
    means = facts.means_at(facts.last_t)
    expected = float(sum(m for m in means if math.isfinite(m) and m > 0))
    left_out = [
        name
        for node, name in zip(facts.nodes, facts.names, strict=True)
        if node.state(facts.last_t) != "finished"
    ]

    def same(value: float) -> None:
        assert value == pytest.approx(expected, rel=1e-9, abs=1e-3)

    # Headless: the end line's figure (and its note), the JSONL end and the verdict's projection, arrived.
    end_line = next(line for line in headless.stdout.splitlines() if "run figures" in line)
    assert _figure_in(end_line) == round(expected)
    last = orjson.loads(snapshots.read_bytes().splitlines()[-1])
    same(last["end"]["tokens_per_s"])
    projected = last["verdict"]["projected"]
    for key in ("tokens_per_s", "low", "high"):
        same(projected[key])

    # summarize --json: the aggregate and the verdict.
    summary = run_cli("summarize", "--json", str(recording), timeout=900)
    assert summary.returncode == 0, summary.stderr
    summary_json = orjson.loads(summary.stdout)
    same(summary_json["aggregate"]["tokens_per_s"])
    same(summary_json["verdict"]["tokens_per_s"])

    # The report: its headline card and its verdict's headline.
    page = tmp_path / "report.html"
    report = run_cli("report", str(recording), "-o", str(page), timeout=900)
    assert report.returncode == 0, report.stderr
    text = html.unescape(page.read_text())
    assert group(expected) in text  # the "aggregate tokens/s" card
    verdict_head = re.search(r"Final verdict: [A-Z]+ at ([\d,.]+) tokens/s", text)
    assert verdict_head is not None
    assert verdict_head.group(1) == group(expected, 1)

    # The dashboard's snapshot: header and rack table (the summary), verdict panel and badge; /metrics.
    core = RackCore()
    events, _ = read_events(recording)
    for event in events:
        core.ingest(event)
    snap = core.snapshot()
    assert snap.summary is not None
    assert snap.run_figures is not None
    assert snap.verdict is not None
    same(snap.summary.tokens_per_s)
    same(snap.run_figures.tokens_per_s)
    band = snap.verdict.forecast.tokens_per_s
    assert band is not None
    same(band.value)
    assert badge_text(snap).endswith(f" {group(expected)}")
    exposition = render(take_view(core)).decode()
    same(_metric(exposition, "tokenwatch_rack_measured_tokens_per_second"))
    same(_metric(exposition, "tokenwatch_rack_projected_tokens_per_second"))

    # The rules at the end: each the final verdict names, with its value, its word, the node it is read
    # at and whether it is a histogram's estimate, is the same in the JSONL's last verdict and in the
    # dashboard's verdict rows (these add only the row of the nodes that did not finish). A node down for
    # good once left the duration rule undecided there, passed in the summary.
    final_rules = {
        c["name"]: (c["value"], c["ok"], c.get("node", ""), c.get("estimated", False))
        for c in summary_json["verdict"]["checks"]
    }
    assert final_rules
    in_jsonl = {
        c["name"]: (c["projected"], c["ok"], c.get("node", ""), c.get("estimated", False))
        for c in last["verdict"]["checks"]
    }
    in_panel = {r.name: (r.projected, r.ok, r.node, r.estimated) for r in snap.verdict.forecast.rules}
    for name, (value, ok, node, estimated) in final_rules.items():
        for surface in (in_jsonl, in_panel):
            assert surface[name][0] == pytest.approx(value, abs=1e-6), name
            assert surface[name][1] is ok, name
            assert surface[name][2:] == (node, estimated), name
    assert set(in_jsonl) - set(final_rules) <= {"every_node_finished"}
    assert last["verdict"]["valid"] == summary_json["verdict"]["valid"] == snap.verdict.valid
    # summarize's text: the verdict's word, and a row per rule with its mark, its node and its estimate.
    plain = run_cli("summarize", str(recording), timeout=900)
    assert plain.returncode == 0, plain.stderr
    word = {True: "VALID", False: "INVALID", None: "UNDECIDED"}[summary_json["verdict"]["valid"]]
    assert f"Verdict: {word} " in plain.stdout
    rows = {
        line.split()[1]: line.split()
        for line in plain.stdout.splitlines()
        if line.startswith("  ") and line.split()[0] in ("✓", "✗", "?")
    }
    assert set(rows) == set(final_rules)
    for name, (_value, ok, node, estimated) in final_rules.items():
        assert rows[name][0] == {True: "✓", False: "✗", None: "?"}[ok], name
        assert rows[name][2].startswith("~") is estimated, name
        assert (rows[name][-1] == node) if node else rows[name][-1].endswith("%") or rows[name][-1] == "—"

    # The nodes MLPerf's figure leaves out: named, in the same words, wherever the figure is.
    note = snap.summary.left_out_note
    if not left_out:
        assert note == ""
        assert "note" not in last["end"]
        assert "note" not in summary_json["verdict"]
        return
    assert all(f"{name} (" in note for name in left_out)
    assert note.startswith("left out by MLPerf (no LoadGen result): ")
    assert note in end_line
    assert last["end"]["note"] == summary_json["aggregate"]["note"] == summary_json["verdict"]["note"] == note
    assert note in text
    assert snap.run_figures.note == note
