"""The headless human output, checked without the golden files: one line per snapshot saying what that
snapshot says (same run), then a blank line and the summary table saying what ``summarize --json`` of the
same recording says."""

from __future__ import annotations

import math
import re
from typing import Any

import orjson
import pytest

from tests.golden.cases import (
    HEADLESS,
    HEADLESS_CASES,
    RECORDING_SUMMARY_CASES,
    SNAPSHOTS,
    SUMMARY_JSON,
    HeadlessCase,
    RecordingSummaryCase,
)
from tests.golden.conftest import Produced

LINE = re.compile(
    r"^(?P<clock>\d{2,}:\d{2})\s+(?P<progress>[\d.]+)%\s+(?P<rate>[\d,]+) tok/s"
    r"\s+(?P<per_gpu>[\d,]+) tok/s/GPU\s+nodes (?P<up>[\d,]+)/(?P<nodes>[\d,]+)"
    r"\s+(?P<kw>[\d,.]+) kW\s+spread (?P<spread>[\d.]+)%"
    r"  (?:(?P<final>FINAL)|proj (?:—|(?P<warming>warming up)|(?P<proj>[\d,]+)(?P<k>k?) ±"
    r"(?:(?P<half>[\d.]+) %|— \(band wider than the figure\)))) (?P<decided>DECIDED )?"
    r"(?P<verdict>VALID|INVALID|UNDECIDED)(?: \((?P<reason>[^()]*)\))?"
    r"(?:  run figures; (?P<banner>.*?)(?:; (?P<note>left out by MLPerf .*?))?)?"
    r"(?:  alerts: (?P<alerts>.*))?$"
)
ROW = re.compile(r"^(?P<label>[A-Za-z][A-Za-z ()/-]*?)\s{2,}(?P<value>[\d,.]+)(?: (?P<unit>%|kW))?$")
MAX_ALERTS_IN_LINE = 4  # the docs' example line (docs/headless.md); more become "+N more"

each_case = pytest.mark.parametrize("case", HEADLESS_CASES, ids=[c.name for c in HEADLESS_CASES])


def clock(t: float) -> str:
    whole = int(t)
    return f"{whole // 60:02d}:{whole % 60:02d}"


def number(text: str) -> float:
    return float(text.replace(",", ""))


def shown(text: str, value: float | None, scale: float = 1.0) -> bool:
    """``text`` is ``value`` (times ``scale``) rounded to the digits shown."""
    assert value is not None
    decimals = len(text.split(".")[1]) if "." in text else 0
    return abs(number(text) - value * scale) <= 0.5 * 10.0**-decimals + 1e-6


def estimate_shown(text: str, value: float) -> bool:
    """A recording's percentile is the core's estimate from its 1 % buckets: ``~918``, ``value`` to three
    significant digits, marked (never a bucket's value with more digits than it holds)."""
    if not text.startswith("~"):
        return False
    unit = 10.0 ** (math.floor(math.log10(abs(value))) - 2) if value else 1.0
    return abs(number(text[1:]) - value) <= 0.5 * unit + 1e-6


def split_output(produced: Produced, case: HeadlessCase) -> tuple[list[str], list[str]]:
    text = produced(case).artefacts[HEADLESS].decode()
    lines, blank, table = text.rstrip("\n").partition("\n\n")
    assert blank, "a blank line separates the interval lines from the summary table"
    return lines.splitlines(), table.splitlines()


def summary_of(produced: Produced, case: HeadlessCase) -> dict[str, Any]:
    """``summarize --json`` of the recording this case ran or replayed."""
    same: HeadlessCase | RecordingSummaryCase = case
    if case.recording is not None:
        (same,) = [c for c in RECORDING_SUMMARY_CASES if c.recording == case.recording]
    summary: dict[str, Any] = orjson.loads(produced(same).artefacts[SUMMARY_JSON])
    return summary


@each_case
def test_nothing_on_stderr(produced: Produced, case: HeadlessCase) -> None:
    assert produced(case).stderr == dict.fromkeys(produced(case).stderr, "")


@each_case
def test_each_line_says_what_its_snapshot_says(produced: Produced, case: HeadlessCase) -> None:
    lines, _ = split_output(produced, case)
    snaps = [orjson.loads(raw) for raw in produced(case).artefacts[SNAPSHOTS].splitlines()]
    assert len(lines) == len(snaps)
    for line, snap in zip(lines, snaps, strict=True):
        m = LINE.match(line)
        assert m, f"not a headless line: {line!r}"
        agg = snap["aggregate"]
        assert m["clock"] == clock(snap["t"])
        assert shown(m["progress"], snap["progress_pct"]), line
        assert (number(m["up"]), number(m["nodes"])) == (agg["nodes_up"], agg["nodes"])
        assert shown(m["spread"], snap["node_spread"]["spread_pct"]), line
        if "end" in snap:  # the run's figures once it has ended, and what happened
            end = snap["end"]
            assert shown(m["rate"], end["tokens_per_s"]), line
            assert shown(m["per_gpu"], end["per_gpu_tokens_per_s"]), line
            assert shown(m["kw"], end["power_mean_w"], 1e-3), line
            assert m["banner"] == end["banner"]
            assert m["note"] == end.get("note")  # which nodes MLPerf's figure leaves out, as the JSONL says
            # The run's final verdict, with no projected figure beside the final one
            assert m["final"]
            final = summary_of(produced, case)["verdict"]["valid"] if end["complete"] else None
            if end["complete"]:
                assert m["verdict"] == {True: "VALID", False: "INVALID", None: "UNDECIDED"}[final]
            continue
        else:
            assert m["banner"] is None
            assert shown(m["rate"], agg["tokens_per_s"]), line
            assert shown(m["per_gpu"], agg["per_gpu_tokens_per_s"]), line
            assert shown(m["kw"], agg["power_w"], 1e-3), line
        verdict = snap["verdict"]
        assert m["verdict"] == {True: "VALID", False: "INVALID", None: "UNDECIDED"}[verdict["valid"]]
        # Warming up: the words in place of a number, as the JSONL says it (no projection, no VALID).
        assert (m["warming"] is not None) is verdict.get("warming_up", False), line
        assert m["warming"] is None or (verdict["projected"] is None and verdict["valid"] is not True)
        assert (m["decided"] is not None, m["reason"]) == ("decided" in verdict, verdict.get("decided")), line
        projected = verdict["projected"]
        assert (m["proj"] is None) == (projected is None), line
        if projected is not None:
            assert shown(m["proj"], projected["tokens_per_s"], 1e-3 if m["k"] else 1.0), line
            if projected["low"] is None:  # a band wider than its figure is not stated
                assert m["half"] is None, line
            else:
                half = (projected["high"] - projected["low"]) / 2 / projected["tokens_per_s"]
                assert shown(m["half"], half, 100.0), line
        messages = [a["message"] for a in snap["alerts"]]
        expected = messages[:MAX_ALERTS_IN_LINE]
        if len(messages) > MAX_ALERTS_IN_LINE:
            expected.append(f"+{len(messages) - MAX_ALERTS_IN_LINE} more")
        assert (m["alerts"] or "") == "; ".join(expected)


@each_case
def test_the_summary_table_says_what_summarize_json_says(produced: Produced, case: HeadlessCase) -> None:
    _, table = split_output(produced, case)
    summary = summary_of(produced, case)
    agg, spread = summary["aggregate"], summary["node_spread"]
    head = f"{summary['name']} · {summary['scenario']} · {agg['nodes']} nodes, {agg['gpus']} GPUs"
    if not summary["complete"]:  # a cut-short run says so first
        status, table = table[0], table[1:]
        snap = orjson.loads(produced(case).artefacts[SNAPSHOTS].splitlines()[-1])
        if summary["end_reason"] == "interrupted":
            assert status == snap["end"]["banner"]
        else:
            assert status.startswith(f"INCOMPLETE: no run end; covers the run up to {clock(snap['t'])} (")
    assert table[0] == f"{head} · {clock(summary['duration_s'])}"
    assert table[1].split() == ["tokens/s"]
    rows: dict[str, str] = {}
    rest = table[2:]
    while rest and (m := ROW.match(rest[0])):
        rows[m["label"]] = m["value"]
        rest = rest[1:]
    expected: dict[str, tuple[float | None, float]] = {
        "Total aggregate": (agg["tokens_per_s"], 1),
        "Max single-node": (spread["max"], 1),
        "Min single-node": (spread["min"], 1),
        "Average single-node": (spread["mean"], 1),
        "Median single-node": (spread["median"], 1),
        "Per GPU": (agg["per_gpu_tokens_per_s"], 1),
        "Node spread (max-min)/min": (spread["spread_pct"], 1),
    }
    if "power" in summary:
        expected["Mean power"] = (summary["power"]["mean_w"], 1e-3)
        expected["Tokens per joule"] = (summary["power"]["tokens_per_joule"], 1)
    assert list(rows) == list(expected)
    for label, (value, scale) in expected.items():
        assert shown(rows[label], value, scale), (label, rows[label], value)
    covers, in_spread = agg["covers"], spread["covers"]
    if not covers["left_out"] and not in_spread["left_out"]:
        assert rest[0] == f"Covers all {agg['nodes']} nodes."
        rest = rest[1:]
    else:
        assert rest[0].startswith(
            f"Aggregate and per GPU: {covers['nodes']} of {agg['nodes']} nodes ({covers['gpus']} GPUs)"
        )
        assert rest[1].startswith(
            f"Single-node figures and spread: {in_spread['nodes']} of {agg['nodes']} nodes"
        )
        for name in in_spread["left_out"]:
            assert name in rest[1]
        rest = rest[2:]
    if "note" in agg:  # the nodes MLPerf's figure leaves out, in the words of every other surface
        assert rest[0] == agg["note"][0].upper() + agg["note"][1:] + "."
        rest = rest[1:]
    if "latency_ms" in summary:
        assert rest[0] == ""
        assert rest[1].split() == ["Latency", "(ms)", "p50", "p90", "p99"]
        for metric, row in zip(summary["latency_ms"], rest[2:5], strict=True):
            label, *cells = row.split()
            assert label == metric.upper()
            for cell, key in zip(cells, ("p50", "p90", "p99"), strict=True):
                assert estimate_shown(cell, summary["latency_ms"][metric][key]), (metric, key, cell)
        rest = rest[5:]
    if summary.get("verdict") is not None:  # the final verdict, a row per check as the JSON states it
        verdict = summary["verdict"]
        word = {True: "VALID", False: "INVALID", None: "UNDECIDED"}[verdict["valid"]]
        assert rest[0] == ""
        assert rest[1].startswith(
            f"Verdict: {word} ({verdict['benchmark']}, {summary['scenario']}), judged by "
        )
        assert rest[1].endswith("; the nodes left out above have no LoadGen result") is ("note" in agg)
        for check, row in zip(verdict["checks"], rest[2:], strict=False):
            cells = row.split()
            assert cells[0] == {True: "✓", False: "✗", None: "?"}[check["ok"]], row
            assert cells[1] == check["name"], row
            assert cells[2].startswith("~") is check.get("estimated", False), row
            if check["name"].endswith("_p99") and check["value"] is not None:  # the latency table's digits
                ms = check["value"] * 1000.0
                assert cells[3] == "ms", row
                assert estimate_shown(cells[2], ms) if check.get("estimated") else shown(cells[2], ms), row
            node = check.get("node")
            assert (cells[-1] == node) if node else cells[-1] in ("%", "—"), row
            percent = cells[-3] if node else cells[-2]
            if check["margin"] is not None:
                assert shown(percent, check["margin"], 100.0), (row, check["margin"])
        if not verdict["checks"]:  # LoadGen's result lines say what there is
            assert rest[2] == "  " + " / ".join(line.strip() for line in verdict["result_lines"])
        rest = rest[2 + max(len(verdict["checks"]), 1) :]
    flagged = [n["name"] for n in summary["nodes"] if n.get("valid") is False]
    if flagged:
        assert rest[0] == f"Flagged node results (see the warnings): {', '.join(flagged)}"
        rest = rest[1:]
    assert rest == [f"warning: {w}" for w in summary.get("warnings", [])]


@each_case
def test_the_last_projection_is_the_final_figure(produced: Produced, case: HeadlessCase) -> None:
    """Once the run has ended nothing is left to project: the verdict's figure is the run's aggregate as
    ``summarize`` reports it (each node's tokens over its own span, summed), a node that never finished
    included (its work up to then; the note names it)."""
    snaps = [orjson.loads(raw) for raw in produced(case).artefacts[SNAPSHOTS].splitlines()]
    last = snaps[-1]
    if "end" not in last:
        return  # a recording cut off with no run end: still a projection
    summary = summary_of(produced, case)
    projected = last["verdict"]["projected"]
    assert projected["low"] == projected["tokens_per_s"] == projected["high"]
    assert projected["tokens_per_s"] == pytest.approx(summary["aggregate"]["tokens_per_s"], abs=1e-3)
