"""The --jsonl snapshot contract, checked without the golden files: keys and types, nulls where a value is
missing, the aggregate as the sum of its nodes, the node spread over the nodes that run, the stopped
nodes apart, the run's figures at its end, and every node figure against the recording's own events
(:mod:`tests.golden.recording_facts`). A golden file regenerated from wrong output still fails here."""

from __future__ import annotations

import math
import statistics
from typing import Any

import numpy as np
import orjson
import pytest

from tests.golden.cases import (
    HEADLESS_CASES,
    SIM_CUT_OFF,
    SIM_FAULTS,
    SIM_FAULTS_AT_END,
    SIM_INTERRUPTED,
    SNAPSHOTS,
    SUMMARY_JSON,
    HeadlessCase,
)
from tests.golden.conftest import Produced
from tests.golden.recording_facts import RecordingFacts, node_figures, recording_facts
from tokenwatch.core.causes import CAUSE_KINDS

Types = tuple[type, ...]
NUM: Types = (float, type(None))  # every measured figure: a float, or null when it is missing
SNAPSHOT_KEYS = {
    "t",
    "progress_pct",
    "clock",
    "aggregate",
    "node_spread",
    "stopped_nodes",
    "nodes",
    "alerts",
    "verdict",
}
CLOCK_TYPES: dict[str, Types] = {
    "nominal_s": NUM,
    "end_s": NUM,
    "end_low_s": NUM,
    "end_high_s": NUM,
    "end": (str, type(None)),
    "eta_s": NUM,
}
VERDICT_KEYS = {"benchmark", "projected", "end_s", "energy_to_finish_j", "valid", "checks"}
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
    "gpus_reporting": (int,),
    "power_w": NUM,
}
SPREAD_KEYS = ("max", "min", "mean", "median", "spread_pct")
STOPPED_TYPES: dict[str, Types] = {
    "name": (str,),
    "state": (str,),
    "since": NUM,
    "reason": (str,),
    "mean_tokens_per_s": NUM,
    "progress_pct": NUM,
}
END_TYPES: dict[str, Types] = {
    "reason": (str,),
    "banner": (str,),
    "complete": (bool,),
    "tokens_per_s": NUM,
    "per_gpu_tokens_per_s": NUM,
    "gpus": (int,),
    "power_mean_w": NUM,
    "tokens_per_joule": NUM,
    "nodes_finished": (int,),
}
NODE_TYPES: dict[str, Types] = {
    "name": (str,),
    "status": (str,),
    "tokens_per_s": NUM,
    "progress_pct": NUM,
    "power_w": NUM,
    "sm_clock_mhz": NUM,
    "hbm_used_mib": NUM,
    "temp_c": NUM,
    "tokens_per_joule": NUM,
    "cause": (dict, type(None)),
}
CAUSE_TYPES: dict[str, Types] = {"kind": (str,), "text": (str,), "gpu": (int, type(None)), "since_t": NUM}
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
    "verdict_decided",
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
    snaps = snapshots(produced, case)
    ended = facts_of(produced, case).end is not None
    for k, snap in enumerate(snaps):
        last = k == len(snaps) - 1
        assert set(snap) == SNAPSHOT_KEYS | ({"end"} if last and ended else set())
        assert isinstance(snap["t"], float)
        assert isinstance(snap["progress_pct"], NUM)
        clock = snap["clock"]
        assert set(clock) == set(CLOCK_TYPES)
        for key, types in CLOCK_TYPES.items():
            assert isinstance(clock[key], types), key
        # One clock: the end is the run's actual one at its end, else the verdict's projected one, and
        # the ETA counts down to it.
        assert (clock["end"] == "actual") is (last and ended)
        if clock["end"] == "actual":
            assert close(clock["end_s"], snap["t"])
            assert clock["eta_s"] == 0.0
        if clock["end"] == "projected":
            assert close(clock["end_s"], snap["verdict"]["end_s"])
        if clock["end_s"] is not None and clock["end"] != "actual":
            assert close(clock["eta_s"], max(0.0, clock["end_s"] - snap["t"]), 2 * ROUNDING)
        assert set(snap["aggregate"]) == set(AGGREGATE_TYPES)
        for key, types in AGGREGATE_TYPES.items():
            assert isinstance(snap["aggregate"][key], types), key
        assert set(snap["node_spread"]) == {*SPREAD_KEYS, "nodes"}
        assert all(isinstance(snap["node_spread"][k], NUM) for k in SPREAD_KEYS)
        assert isinstance(snap["node_spread"]["nodes"], int)
        for stopped in snap["stopped_nodes"]:
            assert set(stopped) == set(STOPPED_TYPES)
            for key, types in STOPPED_TYPES.items():
                assert isinstance(stopped[key], types), key
            assert stopped["state"] in ("down", "stale")
        if "end" in snap:
            assert set(END_TYPES) <= set(snap["end"]) <= {*END_TYPES, "energy_source", "note"}
            assert snap["end"].get("energy_source", "counter") in ("counter", "power", "mixed")
            # only where nodes are left out of MLPerf's figure: which, and why
            assert snap["end"].get("note", "left out by MLPerf").startswith("left out by MLPerf")
            for key, types in END_TYPES.items():
                assert isinstance(snap["end"][key], types), key
        for node in snap["nodes"]:
            assert set(node) == set(NODE_TYPES)
            for key, types in NODE_TYPES.items():
                assert isinstance(node[key], types), (node["name"], key)
            assert node["status"] in ("up", "stale", "down", "finished", "idle")
            check_cause(node["cause"], node["name"], snap)
        for alert in snap["alerts"]:
            assert set(alert) == set(ALERT_TYPES)
            for key, types in ALERT_TYPES.items():
                assert isinstance(alert[key], types), key
            assert alert["kind"] in ALERT_KINDS
            assert alert["t"] <= snap["t"]
        check_verdict(snap["verdict"])


def check_cause(cause: dict[str, Any] | None, node: str, snap: dict[str, Any]) -> None:
    """A node has a cause hint exactly while it is a straggler (its straggler alert is active), and the
    straggler alert's message ends with the hint it was raised with."""
    straggling = [a for a in snap["alerts"] if a["kind"] == "straggler" and a["node"] == node]
    assert (cause is not None) == bool(straggling), node
    if cause is None:
        return
    assert set(cause) == set(CAUSE_TYPES)
    for key, types in CAUSE_TYPES.items():
        assert isinstance(cause[key], types), (node, key)
    assert cause["kind"] in CAUSE_KINDS
    assert cause["since_t"] is None or cause["since_t"] <= snap["t"]
    assert "; " in straggling[0]["message"]  # "nodeX straggler: 6.2% below the median node; <hint>"


def check_verdict(verdict: dict[str, Any]) -> None:
    """The verdict's keys and types; the band around its projection; VALID only when every rule is."""
    assert VERDICT_KEYS <= set(verdict) <= {*VERDICT_KEYS, "decided", "warming_up"}
    if "warming_up" in verdict:  # the pace still climbs: no figure, no end, no VALID
        assert verdict["warming_up"] is True
        assert verdict["projected"] is None
        assert verdict["end_s"] is None
        assert verdict["valid"] is not True
    if "decided" in verdict:  # decided before the end: INVALID, and the sentence that says why
        assert verdict["valid"] is False
        assert verdict["decided"].startswith("cannot be VALID: ")
    assert isinstance(verdict["benchmark"], str | type(None))
    projected = verdict["projected"]
    if projected is not None:
        assert set(projected) == {"tokens_per_s", "low", "high"}
        assert projected["low"] - ROUNDING <= projected["tokens_per_s"] <= projected["high"] + ROUNDING
    assert isinstance(verdict["end_s"], NUM)
    energy = verdict["energy_to_finish_j"]
    if energy is not None:
        assert set(energy) == {"value", "low", "high"}
        assert 0 <= energy["low"] <= energy["value"] <= energy["high"]
    flags = []
    for check in verdict["checks"]:
        assert set(CHECK_TYPES) <= set(check) <= {*CHECK_TYPES, "missing", "node", "estimated"}
        assert isinstance(check.get("node", ""), str)
        assert check.get("estimated", True) is True  # present only where true
        for key, types in CHECK_TYPES.items():
            assert isinstance(check[key], types), (check["name"], key)
        assert ("missing" in check) <= (check["ok"] is None)  # a rule missing its source is undecided
        flags.append(check["ok"])
    assert verdict["valid"] is (False if False in flags else None if None in flags else True)


@each_case
def test_one_snapshot_per_interval_then_the_end(produced: Produced, case: HeadlessCase) -> None:
    """... the run's end, or the last time a recording with no run end covers."""
    facts = facts_of(produced, case)
    assert (facts.end is None) == (case.cut_s is not None and not case.interrupted)
    assert [s["t"] for s in snapshots(produced, case)] == expected_times(case, facts.last_t)


@each_case
def test_aggregate_is_the_sum_of_its_nodes(produced: Produced, case: HeadlessCase) -> None:
    facts = facts_of(produced, case)
    for snap in snapshots(produced, case):
        agg, nodes = snap["aggregate"], snap["nodes"]
        assert [n["name"] for n in nodes] == list(facts.names)
        assert agg["nodes"] == len(facts.names)
        assert agg["gpus"] == len(facts.names) * facts.run.gpus_per_node
        assert agg["nodes_up"] == sum(n["status"] in ("up", "finished") for n in nodes)
        assert agg["gpus_reporting"] == fresh_gpus(facts, snap["t"])
        rates = [n["tokens_per_s"] for n in nodes if n["tokens_per_s"] is not None]
        assert close(agg["tokens_per_s"], sum(rates), ROUNDING * len(nodes))
        assert close(agg["per_gpu_tokens_per_s"], agg["tokens_per_s"] / agg["gpus"])
        powers = [n["power_w"] for n in nodes if n["power_w"] is not None]
        assert close(agg["power_w"], sum(powers) if powers else None, ROUNDING * len(nodes))


def fresh_gpus(facts: RecordingFacts, t: float) -> int:
    """GPUs with a reading at most 5 s old, on a node neither down nor stale ("GPUs reporting")."""
    (table,) = facts.gpu_tables_at([t])
    live = np.array([node.state(t) not in ("down", "stale") for node in facts.nodes])
    return int((np.isfinite(table).any(axis=2) & live[:, None]).sum())


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
        # done only when every node said it finished (a stop with work undone is not 100 %)
        every_node_finished = all(node.state(t) == "finished" for node in facts.nodes)
        rack = 100.0 if ended and every_node_finished else min(100.0, t / run.nominal_duration_s * 100)
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
            # a down or stale node has no live rate: null, not its counter standing still
            rate = None if state in ("down", "stale") else want.window_rate(t)
            assert close(node["tokens_per_s"], rate), where
            assert close(node["progress_pct"], node_progress[i]), where
            figures = node_figures(table, i)
            if state in ("down", "stale"):  # a silent node's last readings are not figures of now
                figures = dict.fromkeys(figures)
            for key, value in figures.items():
                assert close(node[key], value), (where, key)


@each_case
def test_node_spread_is_over_the_measured_means_of_running_nodes(
    produced: Produced, case: HeadlessCase
) -> None:
    """Down and stale nodes do not distort the spread (one down node once read 57 %)."""
    facts = facts_of(produced, case)
    for snap in snapshots(produced, case):
        t = snap["t"]
        running = [node.state(t) in ("up", "finished") for node in facts.nodes]
        means = facts.means_at(t)
        means = means[[r and not math.isnan(m) and m > 0 for r, m in zip(running, means, strict=True)]]
        spread = snap["node_spread"]
        assert spread["nodes"] == len(means)
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


@each_case
def test_stopped_nodes_are_listed_apart_with_their_last_figures(
    produced: Produced, case: HeadlessCase
) -> None:
    facts = facts_of(produced, case)
    for snap in snapshots(produced, case):
        t = snap["t"]
        expected = []
        for name, node in zip(facts.names, facts.nodes, strict=True):
            state = node.state(t)
            if state not in ("down", "stale"):
                continue
            reported, since, reason = node.reported_state(t)
            if reported != state:  # silent, not reported: since its last data
                since, reason = node.last_seen(t), "no data for 5 s"
            expected.append((name, state, since, reason, node.measured_mean(t)))
        got = [
            (s["name"], s["state"], s["since"], s["reason"], s["mean_tokens_per_s"])
            for s in snap["stopped_nodes"]
        ]
        assert [g[:4] for g in got] == [e[:4] for e in expected], t
        for g, e in zip(got, expected, strict=True):
            assert close(g[4], None if math.isnan(e[4]) else e[4]), (t, g[0])


def end_banner(facts: RecordingFacts) -> str:
    """What the run's end says, from the events: how many nodes finished and what became of the others."""
    end = facts.end
    assert end is not None
    t = end.t
    if end.reason == "interrupted":
        done = sum(node.counter_at(t, "samples") for node in facts.nodes)
        assert facts.run.total_samples is not None  # the interrupted cases are simulated: they know it
        return f"INTERRUPTED at {clock(t)} ({done / facts.run.total_samples * 100:.1f} % of samples)"
    states = [node.state(t) for node in facts.nodes]
    others = []
    for name, node, state in zip(facts.names, facts.nodes, states, strict=True):
        if state == "finished":
            continue
        reported, since, _ = node.reported_state(t)
        if reported != state:
            since = node.last_seen(t)
        others.append(f"{name} {state} since {clock(since)}")
    detail = "".join(f", {o}" for o in others[:3]) + (f", +{len(others) - 3} more" if len(others) > 3 else "")
    return f"ended: {states.count('finished')} of {len(states)} nodes finished{detail}"


def clock(t: float) -> str:
    return f"{int(t) // 60:02d}:{int(t) % 60:02d}"


@each_case
def test_the_end_carries_the_run_figures(produced: Produced, case: HeadlessCase) -> None:
    """Once ended, the headline figures are the run's (not the last 10 s of drain): the final
    aggregate and per GPU that took part, as ``summarize --json`` of the same recording says, mean power
    and tokens per joule over the run."""
    facts = facts_of(produced, case)
    last = snapshots(produced, case)[-1]
    if facts.end is None:
        assert "end" not in last
        return
    doc = orjson.loads(produced(case).artefacts[SUMMARY_JSON]) if case.recording is None else None
    end = last["end"]
    assert end["reason"] == facts.end.reason
    assert end["banner"] == end_banner(facts)
    assert end["complete"] is (facts.end.reason != "interrupted")
    assert end["nodes_finished"] == sum(node.state(facts.end.t) == "finished" for node in facts.nodes)
    means = facts.means_at(facts.end.t)
    worked = [m for m in means if not math.isnan(m) and m > 0]
    gpus = len(worked) * facts.run.gpus_per_node
    assert end["gpus"] == gpus
    assert close(end["tokens_per_s"], sum(worked), ROUNDING * len(worked))
    assert close(end["per_gpu_tokens_per_s"], sum(worked) / gpus, 2 * ROUNDING)
    energy = facts.mean_rack_power_w() * facts.last_t
    assert end["power_mean_w"] == pytest.approx(facts.mean_rack_power_w(), rel=1e-3)
    assert end["tokens_per_joule"] == pytest.approx(facts.total_tokens() / energy, rel=1e-3)
    if doc is not None:  # the same figures as the summary's
        assert close(end["tokens_per_s"], doc["aggregate"]["tokens_per_s"])
        assert close(end["per_gpu_tokens_per_s"], doc["aggregate"]["per_gpu_tokens_per_s"])
        assert end["gpus"] == doc["aggregate"]["covers"]["gpus"]


def test_the_fault_run_ends_with_its_down_stale_and_throttled_nodes(produced: Produced) -> None:
    """At the end: node07 down, node05 stale (its figures null, listed apart), node03 throttled its whole
    run and finished last; the banner says so, and no node's live value pretends to be fresh."""
    snaps = snapshots(produced, SIM_FAULTS_AT_END)
    last = snaps[-1]
    nodes = {n["name"]: n for n in last["nodes"]}
    assert nodes["node07"]["status"] == "down"
    assert nodes["node05"]["status"] == "stale"
    assert nodes["node03"]["status"] == "finished"
    for name in ("node07", "node05"):
        assert [nodes[name][k] for k in ("tokens_per_s", "power_w", "sm_clock_mhz", "hbm_used_mib")] == [
            None
        ] * 4
    assert [s["name"] for s in last["stopped_nodes"]] == ["node05", "node07"]
    assert last["node_spread"]["nodes"] == 16
    assert last["aggregate"]["gpus_reporting"] == 64
    assert last["end"]["banner"].startswith("ended: 16 of 18 nodes finished, node05 stale since ")
    assert "node07 down since 02:00" in last["end"]["banner"]
    kinds = {a["kind"] for s in snaps for a in s["alerts"] if a["node"] == "node03"}
    assert "throttle" in kinds


def test_the_interrupted_run_says_so(produced: Produced) -> None:
    last = snapshots(produced, SIM_INTERRUPTED)[-1]
    assert last["t"] == 270.0
    assert last["end"]["banner"].startswith("INTERRUPTED at 04:30 (")
    assert last["end"]["complete"] is False
    assert {n["name"]: n["status"] for n in last["nodes"]}["node03"] == "up"  # cut while throttled
    assert any(a["kind"] == "throttle" and a["node"] == "node03" for a in last["alerts"])
    cut = snapshots(produced, SIM_CUT_OFF)[-1]
    assert "end" not in cut  # no run end: nothing claims it ended
    assert cut["t"] == 270.0


def test_the_fault_run_shows_nulls_and_every_alert_kind(produced: Produced) -> None:
    snaps = snapshots(produced, SIM_FAULTS)
    kinds = {a["kind"] for s in snaps for a in s["alerts"]}
    assert {"down", "stale", "throttle", "straggler"} <= kinds
    never_reported = next(n for n in snaps[-1]["nodes"] if n["name"] == "node09")  # down from the start
    assert never_reported["status"] == "down"
    assert [never_reported[k] for k in ("power_w", "sm_clock_mhz", "hbm_used_mib", "temp_c")] == [None] * 4
    assert all(n["power_w"] is None for s in snaps for n in s["nodes"] if n["status"] == "down")


@each_case
def test_energy_to_finish_is_the_power_now_until_the_projected_end(
    produced: Produced, case: HeadlessCase
) -> None:
    """``energy_to_finish_j`` is the rack's power now times the time from now to the projected end; null
    once the run has ended, or with no projected end or no power."""
    for snap in snapshots(produced, case):
        verdict, power = snap["verdict"], snap["aggregate"]["power_w"]
        energy = verdict["energy_to_finish_j"]
        if "end" in snap or verdict["end_s"] is None or not power:
            assert energy is None
            continue
        assert energy is not None
        expected = power * max(0.0, verdict["end_s"] - snap["t"])
        assert energy["value"] == pytest.approx(expected, rel=1e-4, abs=power * 2e-3)
