"""The --jsonl snapshot contract, checked without the golden files: keys and types, nulls where a value is
missing, the aggregate as the sum of its nodes, and every node figure against the recording's own events
(:mod:`tests.golden.recording_facts`). A golden file regenerated from wrong output still fails here."""

from __future__ import annotations

import math
import statistics
from typing import Any

import orjson
import pytest

from tests.golden.cases import HEADLESS_CASES, SIM_FAULTS, SNAPSHOTS, HeadlessCase
from tests.golden.conftest import Produced
from tests.golden.recording_facts import RecordingFacts, node_figures, recording_facts

Types = tuple[type, ...]
NUM: Types = (float, type(None))  # every measured figure: a float, or null when it is missing
SNAPSHOT_KEYS = {"t", "progress_pct", "aggregate", "node_spread", "nodes", "alerts", "verdict"}
VERDICT_KEYS = {"benchmark", "projected", "end_s", "valid", "checks"}
CHECK_TYPES: dict[str, Types] = {
    "name": (str,),
    "now": NUM,
    "projected": NUM,
    "limit": NUM,
    "ok": (bool, type(None)),
    "margin": NUM,
}
AGGREGATE_TYPES: dict[str, Types] = {
    "tokens_per_s": NUM,
    "per_gpu_tokens_per_s": NUM,
    "nodes": (int,),
    "nodes_up": (int,),
    "gpus": (int,),
    "power_w": NUM,
}
SPREAD_KEYS = ("max", "min", "mean", "median", "spread_pct")
NODE_TYPES: dict[str, Types] = {
    "name": (str,),
    "status": (str,),
    "tokens_per_s": NUM,
    "progress_pct": NUM,
    "power_w": NUM,
    "sm_clock_mhz": NUM,
    "hbm_used_mib": NUM,
    "temp_c": NUM,
}
ALERT_TYPES: dict[str, Types] = {"t": (float,), "node": (str, type(None)), "kind": (str,), "message": (str,)}
ALERT_KINDS = {
    "down",
    "stale",
    "throttle",
    "straggler",
    "sla_ttft",
    "sla_tpot",
    "warning",
    "error",
    "verdict_invalid",
    *(f"margin_{rule}" for rule in ("min_duration", "min_queries", "ttft_p99", "tpot_p99")),
    *(f"margin_early_stopping_{m}" for m in ("ttft", "tpot")),
}
ROUNDING = 1e-3  # the contract rounds figures to 3 decimals

each_case = pytest.mark.parametrize("case", HEADLESS_CASES, ids=[c.name for c in HEADLESS_CASES])


def snapshots(produced: Produced, case: HeadlessCase) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in produced(case).artefacts[SNAPSHOTS].splitlines()]


def facts_of(produced: Produced, case: HeadlessCase) -> RecordingFacts:
    recording = produced(case).recording
    assert recording is not None
    return recording_facts(recording)


def expected_times(case: HeadlessCase, end_t: float) -> list[float]:
    """One snapshot per interval boundary from the start up to (not at) the end, then one at the end."""
    k = max(1, math.ceil(case.start_s / case.interval_s))
    times = []
    while k * case.interval_s < end_t:
        times.append(k * case.interval_s)
        k += 1
    return [*times, end_t]


def close(actual: float | None, expected: float | None, tolerance: float = ROUNDING) -> bool:
    if actual is None or expected is None:
        return actual is expected
    return abs(actual - expected) <= tolerance + 1e-9 * abs(expected)


@each_case
def test_keys_and_types(produced: Produced, case: HeadlessCase) -> None:
    for snap in snapshots(produced, case):
        assert set(snap) == SNAPSHOT_KEYS
        assert isinstance(snap["t"], float)
        assert isinstance(snap["progress_pct"], NUM)
        assert set(snap["aggregate"]) == set(AGGREGATE_TYPES)
        for key, types in AGGREGATE_TYPES.items():
            assert isinstance(snap["aggregate"][key], types), key
        assert set(snap["node_spread"]) == set(SPREAD_KEYS)
        assert all(isinstance(snap["node_spread"][k], NUM) for k in SPREAD_KEYS)
        for node in snap["nodes"]:
            assert set(node) == set(NODE_TYPES)
            for key, types in NODE_TYPES.items():
                assert isinstance(node[key], types), (node["name"], key)
            assert node["status"] in ("up", "stale", "down", "finished")
        for alert in snap["alerts"]:
            assert set(alert) == set(ALERT_TYPES)
            for key, types in ALERT_TYPES.items():
                assert isinstance(alert[key], types), key
            assert alert["kind"] in ALERT_KINDS
            assert alert["t"] <= snap["t"]
        check_verdict(snap["verdict"])


def check_verdict(verdict: dict[str, Any]) -> None:
    """The verdict's keys and types; the band around its projection; VALID only when every rule is."""
    assert set(verdict) == VERDICT_KEYS
    assert isinstance(verdict["benchmark"], str | type(None))
    projected = verdict["projected"]
    if projected is not None:
        assert set(projected) == {"tokens_per_s", "low", "high"}
        assert projected["low"] - ROUNDING <= projected["tokens_per_s"] <= projected["high"] + ROUNDING
    assert isinstance(verdict["end_s"], NUM)
    flags = []
    for check in verdict["checks"]:
        assert set(CHECK_TYPES) <= set(check) <= {*CHECK_TYPES, "missing"}
        for key, types in CHECK_TYPES.items():
            assert isinstance(check[key], types), (check["name"], key)
        assert ("missing" in check) <= (check["ok"] is None)  # a rule missing its source is undecided
        flags.append(check["ok"])
    assert verdict["valid"] is (False if False in flags else None if None in flags else True)


@each_case
def test_one_snapshot_per_interval_then_the_end(produced: Produced, case: HeadlessCase) -> None:
    facts = facts_of(produced, case)
    assert facts.end is not None
    assert [s["t"] for s in snapshots(produced, case)] == expected_times(case, facts.end.t)


@each_case
def test_aggregate_is_the_sum_of_its_nodes(produced: Produced, case: HeadlessCase) -> None:
    facts = facts_of(produced, case)
    for snap in snapshots(produced, case):
        agg, nodes = snap["aggregate"], snap["nodes"]
        assert [n["name"] for n in nodes] == list(facts.names)
        assert agg["nodes"] == len(facts.names)
        assert agg["gpus"] == len(facts.names) * facts.run.gpus_per_node
        assert agg["nodes_up"] == sum(n["status"] in ("up", "finished") for n in nodes)
        rates = [n["tokens_per_s"] for n in nodes if n["tokens_per_s"] is not None]
        assert close(agg["tokens_per_s"], sum(rates), ROUNDING * len(nodes))
        assert close(agg["per_gpu_tokens_per_s"], agg["tokens_per_s"] / agg["gpus"])
        powers = [n["power_w"] for n in nodes if n["power_w"] is not None]
        assert close(agg["power_w"], sum(powers) if powers else None, ROUNDING * len(nodes))


def expected_progress(facts: RecordingFacts, t: float) -> tuple[float, list[float]]:
    """Rack and node progress (%): samples against the run's sample count (an equal share per node), or
    run time against the nominal duration where the run has no sample count (Server)."""
    run, n = facts.run, len(facts.names)
    ended = facts.end is not None and t >= facts.end.t
    if run.total_samples:
        done = [node.counter_at(t, "samples") for node in facts.nodes]
        rack = min(100.0, sum(done) / run.total_samples * 100)
        nodes = [min(100.0, d / (run.total_samples / n) * 100) for d in done]
    else:
        assert run.nominal_duration_s, "the simulator's runs have a sample count or a nominal duration"
        rack = 100.0 if ended else min(100.0, t / run.nominal_duration_s * 100)
        nodes = [min(100.0, t / run.nominal_duration_s * 100)] * n
    return rack, [
        100.0 if node.state(t) == "finished" else p for node, p in zip(facts.nodes, nodes, strict=True)
    ]


@each_case
def test_node_figures_follow_the_recording(produced: Produced, case: HeadlessCase) -> None:
    facts = facts_of(produced, case)
    snaps = snapshots(produced, case)
    tables = facts.gpu_tables_at([s["t"] for s in snaps])
    for snap, table in zip(snaps, tables, strict=True):
        t = snap["t"]
        rack_progress, node_progress = expected_progress(facts, t)
        assert close(snap["progress_pct"], rack_progress)
        for i, (node, want) in enumerate(zip(snap["nodes"], facts.nodes, strict=True)):
            where = f"t={t} {node['name']}"
            state = want.state(t)
            assert node["status"] == state, where
            rate = 0.0 if state == "down" else want.window_rate(t)  # a down node contributes nothing now
            assert close(node["tokens_per_s"], rate), where
            assert close(node["progress_pct"], node_progress[i]), where
            figures = node_figures(table, i)
            if state in ("down", "stale"):  # a silent node's last readings are not figures of now
                figures = dict.fromkeys(figures)
            for key, value in figures.items():
                assert close(node[key], value), (where, key)


@each_case
def test_node_spread_is_over_the_measured_means(produced: Produced, case: HeadlessCase) -> None:
    facts = facts_of(produced, case)
    for snap in snapshots(produced, case):
        means = facts.means_at(snap["t"])
        means = means[[not math.isnan(m) for m in means]]
        spread = snap["node_spread"]
        expected = {
            "max": float(means.max()),
            "min": float(means.min()),
            "mean": float(means.mean()),
            "median": statistics.median(means.tolist()),
            "spread_pct": float((means.max() - means.min()) / means.min() * 100),
        }
        for key, value in expected.items():
            assert spread[key] == pytest.approx(value, rel=1e-6, abs=1e-6), (snap["t"], key)


@each_case
def test_down_and_stale_nodes_raise_their_alerts(produced: Produced, case: HeadlessCase) -> None:
    facts = facts_of(produced, case)
    for snap in snapshots(produced, case):
        t = snap["t"]
        active = {(a["node"], a["kind"]): a for a in snap["alerts"]}
        for name, node in zip(facts.names, facts.nodes, strict=True):
            state, since, reason = node.reported_state(t)
            if state == "down":
                alert = active[(name, "down")]
                assert alert["t"] == since
                assert alert["message"] == f"{name} down: {reason}"
            else:
                assert (name, "down") not in active, (t, name)
            assert ((name, "stale") in active) == (node.state(t) == "stale"), (t, name)


def test_the_fault_run_shows_nulls_and_every_alert_kind(produced: Produced) -> None:
    snaps = snapshots(produced, SIM_FAULTS)
    kinds = {a["kind"] for s in snaps for a in s["alerts"]}
    assert {"down", "stale", "throttle", "straggler"} <= kinds
    never_reported = next(n for n in snaps[-1]["nodes"] if n["name"] == "node09")  # down from the start
    assert never_reported["status"] == "down"
    assert [never_reported[k] for k in ("power_w", "sm_clock_mhz", "hbm_used_mib", "temp_c")] == [None] * 4
    assert all(n["power_w"] is None for s in snaps for n in s["nodes"] if n["status"] == "down")
