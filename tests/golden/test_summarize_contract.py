"""The ``summarize --json`` contract, checked without the golden files: for a recording against figures
computed from its events, for MLPerf result folders against their ``mlperf_log_summary.txt`` files read
here with a few regular expressions."""

from __future__ import annotations

import json
import math
import os
import re
import statistics
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.conftest import REPO_ROOT
from tests.golden.cases import (
    HEADLESS_CASES,
    RECORDING_SUMMARY_CASES,
    RESULT_FOLDER_CASES,
    SUMMARY_JSON,
    SUMMARY_TABLE,
    HeadlessCase,
    RecordingSummaryCase,
    ResultFoldersCase,
)
from tests.golden.conftest import Produced
from tests.golden.recording_facts import recording_facts, weighted_quantile

Types = tuple[type, ...]
NUM: Types = (float, type(None))
TOP_TYPES: dict[str, Types] = {
    "name": (str,),
    "scenario": (str,),
    "duration_s": NUM,
    "complete": (bool,),
    "end_reason": (str, type(None)),
    "aggregate": (dict,),
    "node_spread": (dict,),
    "warnings": (list,),
}
AGGREGATE_TYPES: dict[str, Types] = {
    "tokens_per_s": NUM,
    "per_gpu_tokens_per_s": NUM,
    "nodes": (int,),
    "gpus": (int, type(None)),  # null: the GPUs behind LoadGen results nobody described (never assumed)
    "covers": (dict,),
}
SPREAD_KEYS = ("max", "min", "mean", "median", "spread_pct")
OPTIONAL_TOP = {"latency_ms", "power", "verdict", "layout", "not_in_aggregate"}
VERDICT_TYPES: dict[str, Types] = {
    "benchmark": (str, type(None)),
    "scenario": (str,),
    "valid": (bool, type(None)),
    "judged_by": (str,),
    "result_lines": (list,),
    "checks": (list,),
    "nodes": (list,),
}
PERCENTILES = {"p50": 0.5, "p90": 0.9, "p99": 0.99}
HISTOGRAM_ERROR = 0.02  # the core's log buckets hold 1 % relative error; quantile ranks may differ by one

RECORDED = [c for c in HEADLESS_CASES if c.recording is None] + list(RECORDING_SUMMARY_CASES)


def summary(produced: Produced, case: HeadlessCase | RecordingSummaryCase | ResultFoldersCase) -> Any:
    return orjson.loads(produced(case).artefacts[SUMMARY_JSON])


def approx(value: float | None) -> Any:
    """The contract rounds to 6 decimals; None stays None."""
    return None if value is None or math.isnan(value) else pytest.approx(value, rel=1e-9, abs=1e-6)


def check_shape(doc: dict[str, Any]) -> None:
    assert set(TOP_TYPES) <= set(doc) <= set(TOP_TYPES) | OPTIONAL_TOP | {"nodes"}
    for key, types in TOP_TYPES.items():
        assert isinstance(doc[key], types), key
    # "note": only where nodes are left out of MLPerf's figure (which, and why)
    assert set(AGGREGATE_TYPES) <= set(doc["aggregate"]) <= {*AGGREGATE_TYPES, "note"}
    assert doc["aggregate"].get("note", "left out by MLPerf").startswith("left out by MLPerf")
    for key, types in AGGREGATE_TYPES.items():
        assert isinstance(doc["aggregate"][key], types), key
    assert set(doc["aggregate"]["covers"]) == {"nodes", "gpus", "left_out"}
    assert set(doc["node_spread"]) == {*SPREAD_KEYS, "covers"}
    assert all(isinstance(doc["node_spread"][k], NUM) for k in SPREAD_KEYS)
    assert set(doc["node_spread"]["covers"]) == {"nodes", "left_out"}
    for node in doc["nodes"]:
        assert isinstance(node["name"], str)
        assert isinstance(node["gpus"], int | None)
        assert isinstance(node["tokens_per_s"], NUM)
        assert isinstance(node["samples_per_s"], NUM)
        assert isinstance(node.get("valid", False), bool)
        assert node.get("finished", False) is False  # present only to say a node did not finish
    for pcts in doc.get("latency_ms", {}).values():
        assert set(PERCENTILES) <= set(pcts)
        assert all(isinstance(v, float) for v in pcts.values())
    assert isinstance(doc["warnings"], list)  # always there, [] for a clean run
    assert all(isinstance(w, str) for w in doc["warnings"])
    if "verdict" in doc:
        check_verdict(doc)


def check_verdict(doc: dict[str, Any]) -> None:
    """The verdict's shape, and the rack's validity as every node's (LoadGen's own where it said)."""
    verdict = doc["verdict"]
    # A recording's verdict carries the run's final figure (the aggregate's) and, where nodes are left out
    # of MLPerf's figure, the aggregate's note
    assert set(VERDICT_TYPES) <= set(verdict) <= {*VERDICT_TYPES, "tokens_per_s", "note"}
    if "tokens_per_s" in verdict:
        assert verdict["tokens_per_s"] == doc["aggregate"]["tokens_per_s"]
    assert verdict.get("note") == doc["aggregate"].get("note")
    for key, types in VERDICT_TYPES.items():
        assert isinstance(verdict[key], types), key
    assert [n["name"] for n in verdict["nodes"]] == [n["name"] for n in doc["nodes"]]
    flags = [n["valid"] for n in verdict["nodes"]]
    rack = False if False in flags else None if None in flags else True
    assert verdict["valid"] is rack
    assert verdict["result_lines"][0] == "Result is : " + {True: "VALID", False: "INVALID", None: "?"}[rack]
    node_names = {n["name"] for n in doc["nodes"]}
    for check in verdict["checks"]:
        assert {"name", "value", "limit", "ok", "margin", "detail"} <= set(check)
        assert set(check) <= {"name", "value", "limit", "ok", "margin", "detail", "node", "estimated"}
        assert check.get("node", next(iter(node_names), "")) in node_names  # one of the run's own nodes
        assert check.get("estimated", True) is True  # present only where true
        if check["value"] is not None and check["limit"] is not None and check["name"] == "min_duration":
            assert check["ok"] is (check["value"] >= check["limit"])


def check_rack_figures(doc: dict[str, Any]) -> None:
    """Aggregate = sum of the tokens/s of the nodes that did work; per GPU = aggregate / their GPUs (the
    GPUs that took part); spread over the nodes that did work and finished it; each says what it covers."""
    nodes, agg, spread = doc["nodes"], doc["aggregate"], doc["node_spread"]
    counted = [n for n in nodes if n["tokens_per_s"] is not None and n["tokens_per_s"] > 0]
    whole = [n for n in counted if n.get("finished", True)]
    rates = [n["tokens_per_s"] for n in counted]
    counted_gpus = [n["gpus"] for n in counted]
    gpus = None if None in counted_gpus else sum(counted_gpus)
    assert agg["nodes"] == len(nodes)
    counts = [n["gpus"] for n in nodes]
    assert agg["gpus"] == (None if None in counts else sum(counts))
    assert agg["covers"] == {
        "nodes": len(counted),
        "gpus": gpus,
        "left_out": [n["name"] for n in nodes if n not in counted],
    }
    assert agg["tokens_per_s"] == pytest.approx(sum(rates), abs=1e-6 * len(nodes))
    if gpus is None:
        assert agg["per_gpu_tokens_per_s"] is None
    else:
        assert agg["per_gpu_tokens_per_s"] == pytest.approx(sum(rates) / gpus, abs=1e-6)
    values = [n["tokens_per_s"] for n in whole]
    assert spread == {
        "max": approx(max(values)),
        "min": approx(min(values)),
        "mean": approx(statistics.fmean(values)),
        "median": approx(statistics.median(values)),
        "spread_pct": approx((max(values) - min(values)) / min(values) * 100),
        "covers": {"nodes": len(whole), "left_out": [n["name"] for n in nodes if n not in whole]},
    }
    flagged = [n["name"] for n in nodes if n.get("valid") is False]
    for name in flagged:
        assert any(w.startswith((f"{name}:", f"{name} ")) for w in doc["warnings"]), (
            f"no warning names {name}"
        )


def clock(t: float) -> str:
    return f"{int(t) // 60:02d}:{int(t) % 60:02d}"


# ------------------------------------------------------------------------------------------ recordings
@pytest.mark.parametrize("case", RECORDED, ids=[c.name for c in RECORDED])
def test_recording_summary_follows_its_events(
    produced: Produced, case: HeadlessCase | RecordingSummaryCase
) -> None:
    doc = summary(produced, case)
    recording = produced(case).recording
    assert recording is not None
    facts = recording_facts(recording)
    check_shape(doc)
    check_rack_figures(doc)
    end = facts.last_t
    assert (doc["name"], doc["scenario"], doc["duration_s"]) == (facts.run.name, facts.run.scenario, end)
    tokens, samples = facts.means_at(end), facts.means_at(end, "samples")
    for i, node in enumerate(doc["nodes"]):
        name = facts.names[i]
        assert node["name"] == name
        assert node["gpus"] == facts.run.gpus_per_node
        assert node["tokens_per_s"] == approx(tokens[i]), name
        assert node["samples_per_s"] == approx(samples[i]), name
        unfinished = facts.nodes[i].state(end) in ("down", "stale")  # the run ended (or stops) without it
        assert node.get("valid") is (False if unfinished else None), name
        assert node.get("finished", True) is (not unfinished), name
    # Complete only when the recording ends with a run end that is not an interruption.
    ended = facts.end is not None
    assert doc["complete"] is (ended and facts.end.reason != "interrupted")  # type: ignore[union-attr]
    assert doc["end_reason"] == (facts.end.reason if facts.end is not None else None)
    if not doc["complete"]:
        assert any(f"at {clock(end)}" in w or f"stops at {clock(end)}" in w for w in doc["warnings"])
    # Whole-run power: mean power x the time energy covers (the run's end; with no end, the last 1-s tick
    # before the last event) is the energy the tokens per joule divide by.
    covered = end if facts.end is not None else math.ceil(end) - 1.0
    if "power" in doc:
        power = doc["power"]
        assert power["tokens_per_joule"] * power["mean_w"] * covered == pytest.approx(
            facts.total_tokens(), rel=1e-5
        )
    assert ("latency_ms" in doc) == bool(facts.latency) == (facts.run.scenario == "Server")
    for metric, pcts in doc.get("latency_ms", {}).items():
        values, counts = facts.latency[metric]
        for key, q in PERCENTILES.items():
            want = weighted_quantile(values, counts, q) * 1000
            assert pcts[key] == pytest.approx(want, rel=HISTOGRAM_ERROR), (metric, key)


POWER_CASES = [pytest.param(c, id=c.name) for c in RECORDED]


@pytest.mark.parametrize("case", POWER_CASES)
def test_mean_power_is_the_rack_power_over_the_run(
    produced: Produced, case: HeadlessCase | RecordingSummaryCase
) -> None:
    """The rack's power as the snapshots count it (every GPU with a fresh reading), averaged over the run."""
    recording = produced(case).recording
    assert recording is not None
    mean_w = summary(produced, case)["power"]["mean_w"]
    assert mean_w == pytest.approx(recording_facts(recording).mean_rack_power_w(), rel=1e-3)


# -------------------------------------------------------------------------------------- result folders
SUMMARY_FILE = "mlperf_log_summary.txt"
LATENCY_LINES = {  # LoadGen's summary wording, percentiles in ns
    "e2e": r"{p} percentile latency \(ns\)",
    "ttft": r"{p} percentile first token latency \(ns\)",
    "tpot": r"{p} percentile time to output token \(ns\)",
}


def loadgen_field(text: str, label: str) -> str | None:
    m = re.search(rf"^\s*{label}\s*:\s*(\S+)\s*$", text, re.MULTILINE)
    return m[1] if m else None


def read_loadgen_summary(path: Path) -> dict[str, Any]:
    text = path.read_text()
    tokens = loadgen_field(text, "Tokens per second") or loadgen_field(text, "Completed tokens per second")
    samples = loadgen_field(text, "Samples per second") or loadgen_field(text, "Completed samples per second")
    latency: dict[str, dict[str, float]] = {}
    for metric, pattern in LATENCY_LINES.items():
        pcts = {}
        for key, p in (("p50", "50.00"), ("p90", "90.00"), ("p99", "99.00")):
            value = loadgen_field(text, pattern.format(p=re.escape(p)))
            if value is not None:
                pcts[key] = int(value) / 1e6
        if pcts:
            latency[metric] = pcts
    return {
        "scenario": loadgen_field(text, "Scenario"),
        "result": loadgen_field(text, "Result is"),
        "tokens_per_s": float(tokens) if tokens else None,
        "samples_per_s": float(samples) if samples else None,
        "latency_ms": latency,
    }


def result_nodes(case: ResultFoldersCase, *, apart: bool = False) -> list[tuple[str, str, dict[str, Any]]]:
    """(name, path as given, summary) per folder holding a LoadGen performance summary, in sorted order
    (``apart``: the ranging and compliance runs instead). A summary file without a Scenario line (an
    accuracy run's stub) is no result.

    A node is named by its folder's path below the DIR given, or by DIR's own name when DIR is the folder;
    with several DIRs, by its path below the folder they have in common.
    """
    out = []
    common = (
        Path(os.path.commonpath([REPO_ROOT / f for f in case.folders])) if len(case.folders) > 1 else None
    )
    for folder in case.folders:
        root = REPO_ROOT / folder
        for found in sorted(Path(d) for d, _, files in os.walk(root) if SUMMARY_FILE in files):
            below = found.relative_to(root)
            name = root.name if below == Path() else below.as_posix()
            if common is not None:
                name = found.relative_to(common).as_posix()
            path = (Path(folder) / below).as_posix()
            summary = read_loadgen_summary(found / SUMMARY_FILE)
            other = "ranging" in found.parts or any(re.fullmatch(r"TEST\d+", p) for p in found.parts)
            if summary["scenario"] is not None and other == apart:
                out.append((name, path, summary))
    return out


def described_gpus(case: ResultFoldersCase, path: str) -> int | None:
    """The GPUs a submission's systems/<system>.json gives a result (<submitter>/results/<system>/...)."""
    parts = Path(path).parts
    if "results" in parts:
        at = parts.index("results")
        system = REPO_ROOT / Path(*parts[:at]) / "systems" / f"{parts[at + 1]}.json"
        if system.is_file():
            doc = json.loads(system.read_text())
            return int(doc["accelerators_per_node"]) * int(doc["number_of_nodes"])
    return case.gpus_per_node


@pytest.mark.parametrize("case", RESULT_FOLDER_CASES, ids=[c.name for c in RESULT_FOLDER_CASES])
def test_result_folder_summary_follows_the_loadgen_files(produced: Produced, case: ResultFoldersCase) -> None:
    doc = summary(produced, case)
    check_shape(doc)
    check_rack_figures(doc)
    expected = result_nodes(case)
    gpus = [described_gpus(case, path) for _, path, _ in expected]  # systems/*.json, the flag, else unknown
    assert doc["layout"] == ("system" if len(expected) == 1 else "per-node")
    others = result_nodes(case, apart=True)
    assert [n["name"] for n in doc.get("not_in_aggregate", [])] == [name for name, _, _ in others]
    for node, (_, _, want) in zip(doc.get("not_in_aggregate", []), others, strict=True):
        assert node["tokens_per_s"] == pytest.approx(want["tokens_per_s"])
        assert node["valid"] is (want["result"] == "VALID")
    assert doc["name"] == " + ".join(Path(f).name for f in case.folders)
    assert {doc["scenario"]} == {s["scenario"] for _, _, s in expected}
    assert [n["name"] for n in doc["nodes"]] == [name for name, _, _ in expected]
    for node, (name, path, want) in zip(doc["nodes"], expected, strict=True):
        assert node["gpus"] == described_gpus(case, path)
        assert node["path"] == path
        assert node["result"] == want["result"]
        assert node["valid"] is (want["result"] == "VALID"), name
        assert node["tokens_per_s"] == pytest.approx(want["tokens_per_s"])
        assert node["samples_per_s"] == pytest.approx(want["samples_per_s"])
        for metric, pcts in want["latency_ms"].items():
            for key, value in pcts.items():
                assert node["latency_ms"][metric][key] == pytest.approx(value, abs=1e-6), (name, metric, key)
    # Percentiles of different nodes cannot be combined: the rack has them only when it is one node.
    if len(expected) == 1:
        assert doc["latency_ms"] == {
            m: {k: approx(v) for k, v in p.items()} for m, p in expected[0][2]["latency_ms"].items()
        }
    else:
        assert "latency_ms" not in doc
    # warnings: an invalid node, or GPUs nobody described
    stubs = [
        d
        for f in case.folders
        for d, _, files in os.walk(REPO_ROOT / f)
        if SUMMARY_FILE in files and read_loadgen_summary(Path(d) / SUMMARY_FILE)["scenario"] is None
    ]
    invalid = any(n.get("valid") is False for n in doc["nodes"])
    assert (invalid or None in gpus or bool(stubs)) == bool(doc["warnings"])
    assert sum("holds no summary" in w for w in doc.get("warnings", [])) == len(stubs)
    assert (doc["complete"], doc["end_reason"]) == (True, None)  # a LoadGen summary is written at the end


@pytest.mark.parametrize(
    "case", [c for c in RESULT_FOLDER_CASES if c.table], ids=[c.name for c in RESULT_FOLDER_CASES if c.table]
)
def test_result_folder_table_says_what_the_json_says(produced: Produced, case: ResultFoldersCase) -> None:
    doc = summary(produced, case)
    table = produced(case).artefacts[SUMMARY_TABLE].decode().splitlines()
    agg = doc["aggregate"]
    gpus = "GPUs unknown" if agg["gpus"] is None else f"{agg['gpus']} GPUs"
    what = (
        f"system result: one LoadGen run for the whole system, {gpus}"
        if doc["layout"] == "system"
        else f"{agg['nodes']} per-node results (one LoadGen run each), {gpus}"
    )
    assert table[0].startswith(f"{doc['name']} · {doc['scenario']} · {what}")
    (total,) = [line.split()[-1] for line in table if line.startswith("Total aggregate ")]
    assert total == f"{agg['tokens_per_s']:,.1f}"
    flagged = [n["name"] for n in doc["nodes"] if n.get("valid") is False]
    assert (f"Flagged node results (see the warnings): {', '.join(flagged)}" in table) == bool(flagged)
    for other in doc.get("not_in_aggregate", []):
        assert any(
            line.startswith(f"Not in the aggregate: {other['name']} ({other['kind']} run") for line in table
        )
    warnings = [line.removeprefix("warning: ") for line in table if line.startswith("warning: ")]
    assert warnings == doc.get("warnings", [])
