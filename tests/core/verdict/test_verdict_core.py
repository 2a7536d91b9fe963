"""The verdict inside the core: latency counts against LoadGen's limits (exact, or bounded), the start-of-run
check's alerts, the forecast every interval and its alerts, and the final verdict; all reproducible."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from tokenwatch.base.events import (
    Event,
    LatencyBatch,
    LatencyLimitCounts,
    LoadGenDetail,
    Progress,
    RunStarted,
    Scenario,
)
from tokenwatch.core import CoreConfig, RackCore
from tokenwatch.core.histogram import LogHistogram, compress
from tokenwatch.core.verdict._json import verdict_json
from tokenwatch.inputs.sim.faults import parse_faults
from tokenwatch.inputs.sim.profile import load_profile
from tokenwatch.inputs.sim.rack_sim import RackSimulation, SimSettings

SERVER = RunStarted(0.0, "r", "Server", ("a", "b"), 1, 600.0, None, "live", 0.0)


def server_core(benchmark: str | None = "llama2-70b") -> RackCore:
    core = RackCore(CoreConfig(benchmark=benchmark))
    core.ingest(SERVER)
    return core


def over_ns(values_s: np.ndarray, limit_ns: int) -> int:
    """The independent count: whole nanoseconds, strictly above the limit (LoadGen's ``latency > limit``)."""
    return sum(round(v * 1e9) > limit_ns for v in values_s.tolist())


def test_raw_latencies_are_counted_exactly_against_the_benchmark_limit() -> None:
    core = server_core()
    values = np.array([0.3, 1.999999999, 2.0, 2.000000001, 2.0000000004, 5.0, np.nan])
    core.ingest(LatencyBatch(1.0, "a", "ttft", values))
    core.ingest(LatencyBatch(2.0, "a", "ttft", np.array([2.5])))
    judged, low, high = core.state.verdict.counts["ttft"].totals()
    assert judged.tolist() == [7, 0]  # NaN is no sample
    expected = over_ns(values[np.isfinite(values)], 2_000_000_000) + 1
    assert low.tolist() == high.tolist() == [expected, 0] == [3, 0]


def test_a_detail_log_brings_loadgens_own_limit_and_recounts_what_came_before() -> None:
    rng = np.random.default_rng(4)
    before = rng.lognormal(np.log(0.08), 0.4, 2000)
    after = rng.lognormal(np.log(0.08), 0.4, 500)
    core = server_core()
    core.ingest(LatencyBatch(1.0, "a", "ttft", before))
    assert core.state.verdict.counts["ttft"].limit_s[0] == 2.0  # llama2-70b's until LoadGen says
    values = {
        "effective_scenario": "Server",
        "effective_min_duration_ms": 600_000,
        "effective_min_query_count": 100,
        "effective_min_sample_count": 100,
        "requested_use_token_latencies": True,
        "requested_server_ttft_latency": 100_000_000,
        "requested_server_tpot_latency": 200_000_000,
    }
    core.ingest(LoadGenDetail(2.0, "a", values))
    counts = core.state.verdict.counts["ttft"]
    assert counts.limit_s[0] == 0.1
    assert counts.loadgen_limit[0]
    _, low, high = counts.totals()
    truth = over_ns(before, 100_000_000)
    assert low[0] <= truth <= high[0]  # the past recounted from the 1 % buckets: bounds
    near = int(np.count_nonzero(np.abs(before / 0.1 - 1) < 0.021))
    assert high[0] - low[0] <= near
    core.ingest(LatencyBatch(3.0, "a", "ttft", after))
    _, low2, high2 = counts.totals()
    exact_after = over_ns(after, 100_000_000)
    assert (low2[0] - low[0], high2[0] - high[0]) == (exact_after, exact_after)  # exact from now on


def test_histogram_deltas_give_bounds_that_hold_the_true_count() -> None:
    rng = np.random.default_rng(9)
    core = server_core()
    truth = 0
    for k in range(20):
        values = rng.lognormal(np.log(0.9), 0.5, 400)
        truth += over_ns(values, 2_000_000_000)
        hist = LogHistogram()
        hist.add(values)
        bucket_values, bucket_counts = compress(hist.counts)
        core.ingest(LatencyBatch(float(k + 1), "b", "ttft", bucket_values, bucket_counts))
    judged, low, high = core.state.verdict.counts["ttft"].totals()
    assert judged[1] == 8000
    assert low[1] <= truth <= high[1]
    assert low[1] < high[1]  # samples in the bucket that holds 2 s: undecided which side


def test_exact_counters_are_used_while_their_limit_is_in_force() -> None:
    core = server_core()
    core.ingest(LatencyBatch(1.0, "a", "ttft", np.array([3.0, 3.0])))  # raw: 2 over
    core.ingest(LatencyLimitCounts(2.0, "ttft", 2.0, np.array([0, 1]), np.array([10, 20]), np.array([1, 4])))
    judged, low, high = core.state.verdict.counts["ttft"].totals()
    assert (judged.tolist(), low.tolist(), high.tolist()) == ([10, 20], [1, 4], [1, 4])
    core.ingest(LatencyLimitCounts(3.0, "ttft", 0.5, np.array([0]), np.array([30]), np.array([9])))
    judged, low, _ = core.state.verdict.counts["ttft"].totals()
    assert (judged[0], low[0]) == (2, 2)  # counters for another limit: back to what was counted


def detail(**changes: object) -> dict[str, object]:
    values: dict[str, object] = {
        "effective_scenario": "Offline",
        "effective_min_duration_ms": 600_000,
        "effective_min_query_count": 1,
        "effective_min_sample_count": 24_576,
        "effective_samples_per_query": 30_000,
        "requested_use_token_latencies": True,
        "generated_query_count": 1,
        "generated_samples_per_query": 30_000,
    }
    values.update(changes)
    return values


def test_settings_that_break_the_rules_are_alerts_at_the_start_with_the_fix() -> None:
    core = RackCore(CoreConfig(benchmark="llama2-70b"))
    core.ingest(RunStarted(0.0, "r", "Offline", ("a", "b"), 1, None, None, "live", 0.0))
    bad = detail(effective_min_duration_ms=60_000, requested_use_token_latencies=False)
    core.ingest(LoadGenDetail(0.0, "a", bad))
    core.ingest(LoadGenDetail(0.5, "b", bad))  # the same failure on a second node: no second alert
    alerts = {a.kind: a for a in core.snapshot().alerts}
    duration = alerts["setting_min_duration"]
    assert (duration.t, duration.severity) == (0.0, "critical")
    assert "60,000 ms" in duration.message
    assert "600,000 ms" in duration.message
    assert "set min_duration to at least 600000 ms" in duration.message
    assert "use_token_latencies" in alerts["setting_use_token_latencies"].message
    assert sum(a.kind == "setting_min_duration" for a in core.snapshot().alerts) == 1
    checks = {c.name: c for c in core.snapshot().verdict.settings}  # type: ignore[union-attr]
    assert checks["min_duration"].ok is False
    assert checks["offline_samples"].ok is True
    assert checks["seeds"].ok is None  # not stated: undecided, not a failure


def run_sim(scenario: Scenario, duration_s: float, faults: str = "", **profile_changes: Any) -> list[Event]:
    profile = dataclasses.replace(load_profile("gb300-nvl72"), **profile_changes)
    settings = SimSettings(
        profile,
        scenario=scenario,
        seed=5,
        duration_s=duration_s,
        faults=parse_faults(faults, profile.node_names()),
    )
    return list(RackSimulation(settings).events())


def test_the_simulators_exact_counters_sit_inside_its_own_histogram_bounds() -> None:
    # Interactive limits (450 ms / 40 ms) put many simulated samples over them; a slow node more.
    events = run_sim("Server", 120.0, "node03:slow@20s-100s", benchmark="llama2-70b-interactive")
    counters = [e for e in events if isinstance(e, LatencyLimitCounts)]
    assert {c.metric for c in counters} == {"ttft", "tpot"}
    assert {c.limit_s for c in counters} == {0.45, 0.04}
    core = RackCore()
    for event in events:
        core.ingest(event)
    state = core.state
    for metric in ("ttft", "tpot"):
        counts = state.verdict.counts[metric]
        last = [c for c in counters if c.metric == metric][-1]
        assert counts.totals()[1].tolist() == last.over.tolist()
        assert (last.judged == state.samples).all()  # every sample judged, once
        # The same samples' histograms bound the exact count.
        for i, hist in enumerate(state.latency[metric]):
            fresh = type(counts).empty(1, counts.limit_s[i])
            fresh.set_limit(0, counts.limit_s[i] * 1.0000001, hist, loadgen=False)
            fresh.set_limit(0, counts.limit_s[i], hist, loadgen=False)
            assert fresh.hist_low[0] <= last.over[i] <= fresh.hist_high[0]
        if metric == "ttft":  # the slow node's samples exceed the limit most often
            share = last.over / last.judged
            assert share[2] == share.max()
            # Slow for 80 of the 120 s; healthy nodes' shares sit within a few % of their median.
            assert share[2] > 1.3 * np.median(share)
            assert np.delete(share, 2).max() < 1.1 * np.median(share)


def test_the_verdict_is_a_pure_function_of_the_events() -> None:
    events = run_sim("Server", 240.0)
    core, twin = RackCore(), RackCore()
    for event in events:
        if event.t > 150.0:
            break
        core.ingest(event)
        twin.ingest(event)
    first = verdict_json(core.snapshot().verdict)  # type: ignore[arg-type]
    assert verdict_json(core.snapshot().verdict) == first  # type: ignore[arg-type]
    assert verdict_json(twin.snapshot().verdict) == first  # type: ignore[arg-type]
    assert verdict_json(core.clone().snapshot().verdict) == first  # type: ignore[arg-type]
    history = core.snapshot().verdict.history  # type: ignore[union-attr]
    # One point per verdict tick; the tick at 150 s waits for the first event after it.
    assert history.times.tolist() == [10.0 * k for k in range(1, 15)]


def test_a_short_simulated_offline_run_is_decided_invalid_and_says_why_in_loadgens_words() -> None:
    """Its LoadGen issues fewer samples than the rules need: a setting that fixes the rule at the start, so
    the verdict can no longer change (DECIDED, not projected), with what stopping now saves."""
    core = RackCore()
    for event in run_sim("Offline", 300.0):
        core.ingest(event)
        if event.t >= 120.0:
            break
    snap = core.snapshot()
    assert snap.verdict is not None
    rule = snap.verdict.forecast.rule("min_queries")
    quota = 1_056_000 * 300 // 4800 // 18  # each node's share of the samples (the last ones take +1)
    assert (rule.projected, rule.limit, rule.ok) == (quota, 24_576, False)
    assert snap.verdict.valid is False
    why = (
        f"cannot be VALID: LoadGen issues {quota:,} samples, fewer than the 24,576 its settings need, "
        "so LoadGen will write 'Min queries satisfied : NO'"
    )
    assert snap.verdict.forecast.decided.startswith(f"{why}; stopping now saves ")
    assert snap.verdict.forecast.decided.endswith(" x 72 GPUs")
    alert = next(a for a in snap.active_alerts if a.kind == "verdict_decided")
    assert alert.message == f"DECIDED INVALID: {why}"
    assert not [a for a in snap.active_alerts if a.kind == "verdict_invalid"]


def test_a_ten_minute_server_run_is_not_alerted_for_the_margin_it_was_configured_with() -> None:
    """Scheduled for exactly min_duration: a margin of 0.0 % that was so from the start and cannot change
    is shown in the rule, never raised as an alert (the README's own example carried one on every line)."""
    core = RackCore()
    for event in run_sim("Server", 600.0):
        core.ingest(event)
        if event.t >= 60.0:
            break
    snap = core.snapshot()
    assert snap.verdict is not None
    assert snap.verdict.valid is True
    rule = snap.verdict.forecast.rule("min_duration")
    assert (rule.projected, rule.limit, rule.margin, rule.configured) == (600.0, 600.0, 0.0, True)
    assert not [a for a in snap.alerts if a.kind.startswith("margin_")]


def test_an_estimated_margin_under_ten_percent_is_still_an_alert() -> None:
    """An Offline run's end is an estimate: a run of just over min_duration is watched."""
    core = RackCore()
    for event in run_sim("Offline", 640.0):
        core.ingest(event)
        if event.t >= 120.0:
            break
    snap = core.snapshot()
    assert snap.verdict is not None
    rule = snap.verdict.forecast.rule("min_duration")
    assert rule.configured is False
    assert rule.margin is not None
    assert rule.margin < 0.10
    margin = next(a for a in snap.active_alerts if a.kind == "margin_min_duration")
    assert margin.message.startswith("min_duration margin ")  # raised at the first tight projection
    assert margin.message.endswith("limit 600 s")


def test_the_final_verdict_judges_every_node_and_fails_one_that_never_finished() -> None:
    core = RackCore()
    for event in run_sim("Offline", 4800.0 * 0.2, "node07:down@60s"):
        core.ingest(event)
    summary = core.summary()
    verdict = summary.verdict
    assert verdict is not None
    node07 = next(n for n in verdict.nodes if n.name == "node07")
    assert (node07.valid, node07.missing) == (False, "did not finish (down)")
    assert verdict.valid is False
    others = [n for n in verdict.nodes if n.name != "node07"]
    # 16 minutes: long enough, but each node's share of the samples (11,733) is under 24,576.
    assert all(n.verdict is not None for n in others)
    assert all(n.verdict.min_duration_met and n.verdict.min_queries_met is False for n in others)  # type: ignore[union-attr]


@pytest.mark.parametrize("benchmark", [None, "llama2-70b"])
def test_without_loadgen_settings_the_rules_say_what_they_need(benchmark: str | None) -> None:
    core = server_core(benchmark)
    for k in range(1, 40):
        core.ingest(Progress(float(k), "a", 10 * k, 3000 * k))
        core.ingest(Progress(float(k), "b", 10 * k, 3000 * k))
    view = core.snapshot().verdict
    assert view is not None
    rules = {r.name: r for r in view.forecast.rules}
    if benchmark is None:
        assert "effective_min_duration_ms" in rules["min_duration"].missing
        assert view.benchmark is None
        assert view.judged_by == ""
    else:  # judged by the benchmark's rules; the nominal 600 s is the only schedule known
        assert view.judged_by == "llama2-70b-99"
        assert rules["min_duration"].projected == 600.0
    assert "TTFT" in rules["ttft_p99"].missing
    assert "TPOT" in rules["early_stopping_tpot"].missing
    assert view.valid is None


def test_a_node_down_from_the_start_is_left_out_of_the_projection_and_named() -> None:
    core = RackCore()
    for event in run_sim("Server", 300.0, "node09:down@0s"):
        core.ingest(event)
        if event.t >= 150.0:
            break
    view = core.snapshot().verdict
    assert view is not None
    band = view.forecast.tokens_per_s
    assert band is not None  # the other 17 nodes are projected
    means = core.snapshot().nodes.mean_tokens_per_s
    assert band.value == pytest.approx(float(np.nansum(np.delete(means, 8))), rel=0.05)
    every = view.forecast.rule("every_node")
    assert (every.now, every.limit, every.ok) == (17.0, 18.0, None)
    assert "node09" in every.missing
    assert view.valid is not True  # every other rule may pass: the run cannot be VALID without node09
