"""The baseline comparison (``--baseline``) in the core, checked against figures computed from the events.

Two seeded 10-minute simulator runs are recorded (about 0.3 s each); the run is replayed into a core that
holds the other as its baseline, and at several run times the snapshot's deltas are compared with measured
means computed here from both recordings' raw progress events (tokens at t over the node's last growth at
or before t minus its first report). A longer baseline (its series coarser than 1 s) is checked between its
points; the judgement of which runs compare, node matching, result-folder baselines and the simulator's
expected run are checked on their own.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest

from tests.core.baseline.baseline_runs import finite_sum, measured_means, pct, record
from tokenwatch.base.events import ProgressBatch
from tokenwatch.core import CoreConfig, RackCore, RackSnapshot, RunSummary
from tokenwatch.core.baseline.compare import baseline_means_at, compare_summary
from tokenwatch.core.baseline.freeze import freeze_summary
from tokenwatch.core.baseline.reference import Baseline, RunIdentity, judge_fit, match_nodes
from tokenwatch.core.node_spread import NodeSpread
from tokenwatch.core.summary import NodeResult
from tokenwatch.inputs.sim.profile import load_profile
from tokenwatch.recording import read_events
from tokenwatch.runs.baseline import load_baseline

TIMES = (30.0, 95.0, 240.0, 300.0, 480.0, 600.0, 700.0)  # warm-up, a slow node, the drain, after the end


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the run, its baseline): seed 2 with node03 slow and node07 down for a minute, and seed 1."""
    folder = tmp_path_factory.mktemp("baseline")
    run = record(folder / "run.jsonl", 2, 600.0, "node03:slow@1m-5m,node07:down@6m-7m")
    return run, record(folder / "base.jsonl", 1, 600.0)


def snapshots_at(run: Path, baseline: Baseline, times: tuple[float, ...]) -> dict[float, RackSnapshot]:
    """Snapshots at each of ``times`` as the headless logger takes them (once every event up to t is in)."""
    core = RackCore(CoreConfig(baseline=baseline))
    taken: dict[float, RackSnapshot] = {}

    def take(at: float) -> None:
        if at in times:
            taken.setdefault(at, core.snapshot(at))

    for t in times:
        core.every(t, take)
    events, _ = read_events(run)
    for event in events:
        core.ingest(event)
    for t in times:  # after the last event: the core's state at its end
        taken.setdefault(t, core.snapshot(t))
    return taken


def test_live_deltas_equal_an_independent_computation_from_both_recordings(runs: tuple[Path, Path]) -> None:
    run, base = runs
    baseline, warnings = load_baseline(str(base), RunIdentity("Offline"))
    assert warnings == []
    assert baseline.source == "recording"
    assert baseline.name == "base.jsonl"
    run_events, _ = read_events(run)
    base_events, _ = read_events(base)
    snaps = snapshots_at(run, baseline, TIMES)
    slow_seen = False
    for t in TIMES:
        view = snaps[t].baseline
        assert view is not None
        assert view.matched_by == "name"
        assert view.notes == ()
        assert view.refused == ""
        ours, theirs = measured_means(run_events, t), measured_means(base_events, t)
        assert view.tokens_per_s == pytest.approx(finite_sum(ours), rel=1e-12)
        assert view.baseline_tokens_per_s == pytest.approx(finite_sum(theirs), rel=1e-12)
        assert view.delta_pct == pytest.approx(pct(finite_sum(ours), finite_sum(theirs)), abs=1e-9)
        names = snaps[t].nodes.names
        for i, name in enumerate(names):
            expected = pct(ours[name], theirs[name])
            if math.isfinite(expected):
                assert view.node_delta_pct[i] == pytest.approx(expected, abs=1e-9), (t, name)
            else:
                assert math.isnan(view.node_delta_pct[i])
        slow_seen |= bool(view.node_delta_pct[names.index("node03")] < -5.0)
    assert slow_seen, "node03 ran at 80 % for 4 minutes: it must read well behind its baseline"


def test_after_the_end_the_live_figure_is_the_summaries_comparison(runs: tuple[Path, Path]) -> None:
    run, base = runs
    baseline, _ = load_baseline(str(base), RunIdentity("Offline"))
    core = RackCore(CoreConfig(baseline=baseline))
    for event in read_events(run)[0]:
        core.ingest(event)
    view = core.snapshot().baseline
    assert view is not None
    assert core.ended
    comparison = compare_summary(core.summary(), baseline)
    assert view.delta_pct == pytest.approx(comparison.delta_pct, abs=1e-9)
    assert [n.delta_pct for n in comparison.nodes] == pytest.approx(list(view.node_delta_pct), abs=1e-9)
    base_core = RackCore()
    for event in read_events(base)[0]:
        base_core.ingest(event)
    final = base_core.summary()
    assert comparison.tokens_per_s == pytest.approx(final.tokens_per_s, rel=1e-12)
    # The projected end is the run's own end once it has ended; the baseline's end is its last completion.
    assert view.end_s == pytest.approx(max(e.t for e in read_events(base)[0] if isinstance(e, ProgressBatch)))
    assert view.finish_gap_s == pytest.approx(view.projected_end_s - view.end_s)
    # In words: later is +, earlier -, whole seconds (under one second either way reads +00:00).
    cases = ((92.4, "+01:32"), (-92.4, "-01:32"), (-0.4, "+00:00"), (0.0, "+00:00"), (math.nan, "—"))
    for gap, expected in cases:
        text = dataclasses.replace(view, finish_gap_s=gap).finish_text()
        assert text.startswith(f"finish {expected}, proj "), (gap, text)


def test_a_coarse_baseline_series_is_read_between_its_points(tmp_path: Path) -> None:
    """A 20-minute baseline keeps 2-s points: between them a running node's counter is interpolated and
    taken as grown at t; the result stays within 0.1 % of the exact figure (the warm-up ramp, convex,
    is where interpolating errs most)."""
    base = record(tmp_path / "long.jsonl", 1, 1200.0)
    baseline, _ = load_baseline(str(base), RunIdentity("Offline"))
    assert np.median(np.diff(baseline.times)) == 2.0  # points at odd seconds: every t below is between two
    events, _ = read_events(base)
    for t in (46.0, 300.0, 778.0, 1100.5, 1226.0, 1250.0):
        exact = measured_means(events, t)
        means = baseline_means_at(baseline, t)
        for j, name in enumerate(baseline.nodes):
            assert means[j] == pytest.approx(exact[name], rel=1e-3), (t, name)
    assert all(math.isnan(v) for v in baseline_means_at(baseline, -1.0))


def test_runs_of_another_scenario_or_benchmark_are_refused_other_shapes_noted(
    runs: tuple[Path, Path],
) -> None:
    baseline, _ = load_baseline(str(runs[1]), RunIdentity("Offline"))
    nodes = baseline.nodes
    assert judge_fit(baseline, RunIdentity("Offline", "llama2-70b", nodes=nodes)).refusal is None
    server = judge_fit(baseline, RunIdentity("Server", nodes=nodes)).refusal
    assert server is not None
    assert "Offline" in server
    assert "Server" in server
    other = judge_fit(baseline, RunIdentity("Offline", "llama3.1-405b", nodes=nodes)).refusal
    assert other is not None
    assert "benchmarks do not compare" in other
    interactive = judge_fit(baseline, RunIdentity("Offline", "llama2-70b-interactive")).refusal
    assert interactive is not None
    # The same model at the other accuracy target runs the same work: compared.
    assert judge_fit(baseline, RunIdentity("Offline", "llama2-70b-99.9")).refusal is None
    fewer = judge_fit(baseline, RunIdentity("Offline", nodes=nodes[:16], gpus_per_node=8))
    assert fewer.refusal is None
    assert len(fewer.notes) == 2
    assert "16 nodes against the baseline's 18" in fewer.notes[0]
    assert "8 GPUs per node against the baseline's 4" in fewer.notes[1]
    assert fewer.counterparts.tolist() == list(range(16))
    assert fewer.matched_by == "name"


@pytest.mark.parametrize(
    ("reference", "nodes", "expected", "by"),
    [
        (("a", "b", "c"), ("c", "a", "b"), [2, 0, 1], "name"),
        (("a", "b", "c"), ("a", "x"), [0, -1], "name"),
        (("a", "b", "c"), ("x", "y", "z"), [0, 1, 2], "rank"),
        (("a", "b"), ("x", "y", "z"), [0, 1, -1], "rank"),
        (("a", "b", "c"), ("x",), [0], "rank"),
    ],
)
def test_nodes_match_by_name_or_by_rank_when_they_share_none(
    reference: tuple[str, ...], nodes: tuple[str, ...], expected: list[int], by: str
) -> None:
    counterparts, matched_by, note = match_nodes(reference, nodes)
    assert counterparts.tolist() == expected
    assert matched_by == by
    assert ("rank" in note) == (by == "rank")


def _summary(names: tuple[str, ...], rates: tuple[float, ...], layout: str | None = "per-node") -> RunSummary:
    nodes = tuple(NodeResult(n, 4, r, r / 1000) for n, r in zip(names, rates, strict=True))
    return RunSummary(
        "results", "Offline", 600.0, nodes, NodeSpread.of(np.array(rates)), {}, None, None, layout=layout
    )


def test_a_result_folder_baseline_is_its_final_figures_at_every_run_time() -> None:
    baseline = freeze_summary(_summary(("r1", "r2"), (100.0, 300.0)), "results", "result folders")
    assert not baseline.has_series
    assert baseline.tokens_per_s == 400.0
    for t in (0.0, 10.0, 1e6):
        assert baseline_means_at(baseline, t).tolist() == [100.0, 300.0]
    run = _summary(("node01", "node02"), (110.0, 270.0))
    comparison = compare_summary(run, baseline)
    assert comparison.matched_by == "rank"
    assert comparison.delta_pct == pytest.approx(pct(380.0, 400.0))
    assert [n.delta_pct for n in comparison.nodes] == pytest.approx([10.0, -10.0])
    system = freeze_summary(_summary(("rack",), (400.0,), layout="system"), "sys", "result folders")
    judged = compare_summary(run, system)
    assert judged.matched_by == "none"
    assert all(math.isnan(n.delta_pct) for n in judged.nodes)
    assert judged.delta_pct == pytest.approx(-5.0)
    assert "one system result" in judged.notes[0]


def test_the_simulators_expected_run_holds_every_node_to_the_published_mean() -> None:
    """sim:PROFILE: deterministic; each node at the profile's published mean (the rack near its published
    aggregate); laid over a run of any node count as that many expected nodes."""
    identity = RunIdentity("Offline", nodes=tuple(f"host{i}" for i in range(36)), duration_s=600.0)
    first, _ = load_baseline("sim:gb300-nvl72", identity)
    again, _ = load_baseline("sim:gb300-nvl72", identity)
    assert np.array_equal(first.node_tokens, again.node_tokens)
    assert first.uniform
    profile = load_profile("gb300-nvl72")
    mean = profile.node_tokens_per_s.mean
    assert len(first.nodes) == profile.nodes  # simulated once, at the profile's own size
    assert first.node_tokens_per_s == pytest.approx(np.full(profile.nodes, mean), rel=0.01)
    published = profile.published["aggregate_tokens_per_s"]
    assert first.tokens_per_s == pytest.approx(published, rel=0.005)
    fit = judge_fit(first, identity)
    assert fit.matched_by == "expected"
    assert fit.notes == ()
    assert fit.counterparts.tolist() == [i % profile.nodes for i in range(36)]
    assert first.reference_total(first.node_tokens_per_s, fit.counterparts) == pytest.approx(
        2 * first.tokens_per_s, rel=1e-12
    )


def test_a_baseline_is_shared_not_copied_by_a_core_clone(runs: tuple[Path, Path]) -> None:
    baseline, _ = load_baseline(str(runs[1]), RunIdentity("Offline"))
    core = RackCore(CoreConfig(baseline=baseline))
    for event in read_events(runs[0])[0][:200]:
        core.ingest(event)
    twin = core.clone()
    assert twin.state.config.baseline is baseline
    assert dataclasses.replace(core.config).baseline is baseline
    assert not baseline.node_tokens.flags.writeable
