"""The forecast: exact on runs whose future is known, bands that narrow and hold, rules that decide only
when they can, and real LoadGen runs projected at half-way."""

from __future__ import annotations

import dataclasses
import math
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.mlperf.live_runs import SECONDS
from tokenwatch.base.formatting import BAND_UNKNOWN, projection
from tokenwatch.mlperf.early_stopping import overlatency_budget
from tokenwatch.mlperf.figures import RunSettings
from tokenwatch.mlperf.forecast import Assumptions, NodeProgress, OverLimit, forecast, honest_band
from tokenwatch.mlperf.rules_forecast import latency_rules, project_counts
from tokenwatch.mlperf.throughput_forecast import project_nodes, rack_band

from .conftest import LOADGEN_RUNS
from .loadgen_run import LoadGenRun, progress_at

QUIET = Assumptions(outage_s=0.0, future_share=0.0)  # no outage, no fault still to come


def offline_progress(
    rates: np.ndarray,
    now: float,
    total_samples: float,
    tokens_per_sample: float | None,
    noise: np.ndarray | None = None,
) -> NodeProgress:
    """Nodes making tokens at steady ``rates`` (optional noise each second) from t = 0, sampled at 1 s."""
    times = np.arange(0.0, now + 0.5, 1.0)
    per_second = np.tile(rates, (len(times), 1))
    if noise is not None:
        per_second = per_second * (1 + noise[: len(times)])
    tokens = np.vstack((np.zeros(len(rates)), np.cumsum(per_second[1:], axis=0)))
    per_sample = tokens_per_sample or 300.0
    n = len(rates)
    return NodeProgress(
        "Offline",
        float(times[-1]),
        times,
        tokens,
        tokens[-1],
        np.floor(tokens[-1] / per_sample),
        np.zeros(n),
        np.full(n, times[-1]),
        np.zeros(n, bool),
        np.full(n, total_samples),
        None,
        tokens_per_sample,
    )


def test_steady_offline_node_is_projected_exactly() -> None:
    rate, samples, per_sample, drain = 10_000.0, 24_000, 250.0, 10.0  # 8,000 samples done at 200 s
    fc = forecast(offline_progress(np.array([rate]), 200.0, samples, per_sample), assumptions=QUIET)
    work = samples * per_sample / rate  # 600 s of work at a constant rate, then half the drain tail
    band = fc.tokens_per_s
    assert band is not None
    assert band.value == pytest.approx(samples * per_sample / (work + drain / 2))
    # No noise, known tokens: the band is the drain tail alone (0 to 10 s)
    assert band.low == pytest.approx(samples * per_sample / (work + drain))
    assert band.high == pytest.approx(samples * per_sample / work)
    assert fc.end_s is not None
    assert fc.end_s.value == pytest.approx(work + drain / 2)


def test_the_allowance_for_a_fault_still_to_come_lowers_only_the_low_side() -> None:
    rate, samples, per_sample = 10_000.0, 24_000, 250.0
    progress = offline_progress(np.array([rate]), 200.0, samples, per_sample)
    quiet, allowing = forecast(progress, assumptions=QUIET), forecast(progress, assumptions=Assumptions())
    assert quiet.tokens_per_s is not None
    assert allowing.tokens_per_s is not None
    assert allowing.tokens_per_s.high == quiet.tokens_per_s.high
    tokens = samples * per_sample
    end = tokens / rate + 5.0
    figure = tokens / end
    # The loss is that of the node losing a fifth of the run time it has left (605 - 200 s), combined in
    # quadrature with the low end of the drain's range (independent sources).
    loss = figure - tokens / (end + 0.2 * (end - 200.0))
    drain = figure - quiet.tokens_per_s.low
    assert allowing.tokens_per_s.low == pytest.approx(figure - math.hypot(drain, loss))


def test_band_narrows_as_the_run_goes() -> None:
    rng = np.random.default_rng(7)
    rates = rng.uniform(55_000, 62_000, 18)
    noise = rng.normal(0, 0.01, (2_000, 18))
    total = 1_300 * rates.mean() * 18 / 300.0 / 18
    widths = []
    for now in (300.0, 600.0, 900.0):
        fc = forecast(offline_progress(rates, now, total, None, noise))
        assert fc.tokens_per_s is not None
        widths.append(fc.tokens_per_s.width_pct)
    assert widths[0] > widths[1] > widths[2]
    assert widths[1] < 2.0  # a steady 18-node rack at half-way


def test_finished_nodes_count_exactly() -> None:
    progress = offline_progress(np.array([1_000.0, 2_000.0]), 100.0, 1_000, 300.0)
    finished = NodeProgress(
        "Offline",
        100.0,
        progress.times_s,
        progress.tokens,
        np.array([50_000.0, 80_000.0]),
        np.array([1_000.0, 1_000.0]),
        np.zeros(2),
        np.array([40.0, 50.0]),
        np.array([True, True]),
        np.array([1_000.0, 1_000.0]),
    )
    fc = forecast(finished)
    assert fc.tokens_per_s is not None
    assert fc.tokens_per_s.value == pytest.approx(50_000 / 40 + 80_000 / 50)
    assert fc.tokens_per_s.low == fc.tokens_per_s.high == fc.tokens_per_s.value
    assert fc.end_s is not None
    assert fc.end_s.value == 50.0


def test_a_stalled_node_is_bracketed_between_resuming_and_having_worked_unheard() -> None:
    rates = np.full(6, 10_000.0)
    progress = offline_progress(rates, 300.0, 20_000, 300.0)
    tokens = progress.tokens.copy()
    tokens[-31:, 0] = tokens[-31, 0]  # node 0 silent for the last 30 s
    stalled = NodeProgress(
        "Offline",
        progress.now_s,
        progress.times_s,
        tokens,
        tokens[-1],
        np.floor(tokens[-1] / 300.0),
        progress.start_s,
        np.where(np.arange(6) == 0, progress.now_s - 30.0, progress.now_s),
        progress.finished,
        progress.total_samples,
        None,
        300.0,
    )
    fc = forecast(stalled, assumptions=Assumptions(outage_s=120.0))
    node_tokens = 20_000 * 300.0
    work = node_tokens / 10_000.0
    healthy = node_tokens / (work + 5.0)
    assert fc.tokens_per_s is not None
    # Resuming now at its pace, node 0 ends 30 s late (the point); having worked unheard, on time (the high
    # end); the low end: node 0 down 120 s more and a full drain, every other node a full drain (these add
    # up), and, in quadrature with them, one of them losing a fifth of its 305 s left to a fault to come.
    point = 5 * healthy + node_tokens / (work + 5.0 + 30.0)
    assert fc.tokens_per_s.value == pytest.approx(point)
    assert fc.tokens_per_s.high == pytest.approx(5 * node_tokens / work + node_tokens / work)
    future = healthy - node_tokens / (work + 5.0 + 0.2 * (work + 5.0 - 300.0))
    systematic = point - (5 * node_tokens / (work + 10.0) + node_tokens / (work + 10.0 + 30.0 + 120.0))
    assert fc.tokens_per_s.low == pytest.approx(point - math.hypot(systematic, future))


def test_nothing_to_project_before_every_node_has_progress() -> None:
    progress = offline_progress(np.array([1_000.0, 1_000.0]), 20.0, 1_000, 300.0)
    silent = NodeProgress(
        "Offline",
        20.0,
        progress.times_s,
        progress.tokens * np.array([1.0, 0.0]),
        np.array([progress.tokens_done[0], 0.0]),
        np.array([1.0, 0.0]),
        np.zeros(2),
        np.array([20.0, 0.0]),
        np.zeros(2, bool),
        np.array([1_000.0, 1_000.0]),
    )
    assert forecast(silent).tokens_per_s is None
    waiting = forecast(silent, RunSettings("Offline", 600.0, 1, 1_000)).rule("min_duration")
    assert (waiting.ok, waiting.missing) == (None, "progress on every node")


def test_count_projection_holds_on_simulated_binomial_runs() -> None:
    """Independent check: binomial processes with a known over-limit share, judged at half-way."""
    rng = np.random.default_rng(12)
    total, half, share, trials = 20_000, 10_000, 0.008, 400
    now = rng.binomial(half, share, trials).astype(np.float64)
    final = now + rng.binomial(total - half, share, trials)
    _, low, high = project_counts(
        OverLimit("ttft", 2.0, np.full(trials, float(half)), now, now), np.full(trials, float(total))
    )
    inside = np.mean((low <= final) & (final <= high))
    assert inside >= 0.95


def _server(n: int, over: float, total: float, limit: float = 2.0) -> tuple[NodeProgress, list[OverLimit]]:
    times = np.arange(0.0, 301.0)
    tokens = (times * 1_000.0)[:, None]
    progress = NodeProgress(
        "Server",
        300.0,
        times,
        tokens,
        tokens[-1],
        np.array([float(n)]),
        np.zeros(1),
        np.array([300.0]),
        np.zeros(1, bool),
        np.array([total]),
        np.array([700.0]),
        None,
        np.array([1.0]),
    )
    counts = [
        OverLimit(m, limit, np.array([float(n)]), np.array([over]), np.array([over]), np.array([0.5]))
        for m in ("ttft", "tpot")
    ]
    return progress, counts


SERVER_SETTINGS = RunSettings("Server", 600.0, 100, 100, 0.99, 2_000_000_000, 200_000_000)


def test_server_rules_decide_only_when_the_range_is_on_one_side() -> None:
    total = 200_000.0
    budget = overlatency_budget(int(total))
    progress, counts = _server(100_000, 0.0, total)  # half-way, nothing over the limits yet
    clean = forecast(progress, SERVER_SETTINGS, counts)
    assert clean.valid is True
    assert clean.rule("early_stopping_ttft").limit == budget
    assert clean.rule("min_duration").ok is True  # the schedule ends at 700 s >= 600 s
    progress, counts = _server(100_000, 2_000.0, total)  # 2 % over: the p99 rule fails
    bad = forecast(progress, SERVER_SETTINGS, counts)
    assert bad.valid is False
    assert bad.rule("ttft_p99").ok is False
    progress, counts = _server(100_000, budget / 2, total)  # right on the budget's line at the end
    assert forecast(progress, SERVER_SETTINGS, counts).rule("early_stopping_ttft").ok is None


def test_missing_sources_are_named() -> None:
    progress, _ = _server(1_000, 0.0, 20_000.0)
    fc = forecast(progress)
    assert fc.valid is None
    assert "effective_min_duration_ms" in fc.rule("min_duration").missing
    assert "TTFT" in fc.rule("ttft_p99").missing
    assert "TPOT" in fc.rule("early_stopping_tpot").missing


def test_offline_ending_before_its_minimum_is_projected_invalid() -> None:
    settings = RunSettings("Offline", 600.0, 1, 24_576)
    progress = offline_progress(np.array([10_000.0]), 100.0, 24_576, 100.0)  # 246 s of work
    fc = forecast(progress, settings)
    assert fc.rule("min_duration").ok is False
    assert fc.valid is False
    assert fc.rule("min_duration").projected == pytest.approx(24_576 * 100 / 10_000 + 5.0)


def test_the_duration_rule_reads_now_at_the_node_it_projects() -> None:
    """The min_duration row reads its now and its projection at one node, the shortest: one node finished
    at 40 s, another runs on at 100 s of the run. Its now is that node's own duration (40 s), as LoadGen
    counts it, not the run's time (100 s) beside a projected 40 s."""
    progress = offline_progress(np.array([1_000.0, 1_000.0]), 100.0, 1_000, 300.0)
    mixed = dataclasses.replace(
        progress,
        tokens_done=np.array([40_000.0, 100_000.0]),
        samples_done=np.array([1_000.0, 333.0]),
        last_change_s=np.array([40.0, 100.0]),
        finished=np.array([True, False]),
    )
    rule = forecast(mixed, RunSettings("Offline", 600.0, 1, 24_576)).rule("min_duration")
    assert rule.projected == 40.0
    assert rule.now == 40.0
    running = forecast(progress, RunSettings("Offline", 600.0, 1, 24_576)).rule("min_duration")
    assert running.now == 100.0  # every node still running: the run's time so far


@pytest.mark.parametrize("name", list(LOADGEN_RUNS))
def test_real_loadgen_runs_at_half_way(loadgen_runs: dict[str, LoadGenRun], name: str) -> None:
    """At 50 % of each real run the projected verdict is LoadGen's final one wherever it is decided, and the
    band holds LoadGen's figure where it is stated. Only the early-stopping-only run may stay undecided:
    1,800 queries leave a projected final over-limit count whose range straddles its budget of 8."""
    run = loadgen_runs[name]
    detail = run.detail()
    settings = RunSettings.from_detail(detail)
    end = run.completed_at_ns.max() / 1e9
    progress, counts = progress_at(run, 0.5 * end)
    short = SECONDS
    fc = forecast(progress, settings, counts, short)
    final = detail["result_validity"] == "VALID"
    if name == "server-early-stopping":
        assert fc.valid in (None, False)
    else:
        assert fc.valid is final
    key = (
        "result_tokens_per_second" if settings.scenario == "Offline" else "result_completed_tokens_per_second"
    )
    band = fc.tokens_per_s
    if name == "offline-short" and fc.warming_up:  # 0.35 s into a 0.7-s run: still within its warm-up
        assert band is None
        return
    assert band is not None
    # The band holds LoadGen's figure, or it is not stated: one wider than its figure says nothing (the
    # 0.7-s offline-short run at half-way can be one)
    assert band.contains(detail[key]) if band.known else band.width_pct == math.inf, (band, detail[key])
    if name != "offline-short":
        assert band.known


def test_a_node_silent_since_its_first_second_leaves_the_band_unstated_not_a_billion_percent() -> None:
    """A node heard for one second and then silent (a gap in its data) may, the forecast allows, have been
    working unheard all along: its end could be a second after its start, and the high side came out at
    3,000,001,000 tok/s for a 1,008 tok/s rack (``±148,777,583 %``). A band wider than its figure says
    nothing: the figure stays, the band is unknown, and it reads ``±—`` with its reason."""
    progress = offline_progress(np.array([1000.0, 1000.0]), 120.0, 10_000_000, 300.0)
    tokens = progress.tokens.copy()
    tokens[2:, 1] = tokens[1, 1]
    silent = dataclasses.replace(
        progress,
        tokens=tokens,
        tokens_done=tokens[-1].copy(),
        samples_done=tokens[-1] / 300.0,
        last_change_s=np.array([120.0, 1.0]),
    )
    raw = rack_band(project_nodes(silent, Assumptions()))
    assert raw[2] - raw[1] > raw[0]  # what the nodes' deviations add up to: wider than the figure
    band = forecast(silent).tokens_per_s
    assert band is not None
    assert band.value == pytest.approx(raw[0])
    assert not band.known
    assert math.isnan(band.low)
    assert math.isnan(band.high)
    assert projection(band.value, band.low, band.high, why=True) == f"1,008 ±— ({BAND_UNKNOWN})"


@settings(max_examples=400, deadline=None)
@given(
    value=st.floats(allow_nan=True, allow_infinity=True),
    low=st.floats(allow_nan=True, allow_infinity=True),
    high=st.floats(allow_nan=True, allow_infinity=True),
)
def test_an_honest_band_is_finite_and_never_wider_than_its_figure(
    value: float, low: float, high: float
) -> None:
    band = honest_band(value, low, high)
    if not (math.isfinite(value) and value > 0):
        assert math.isnan(band.value)
        assert not band.known
        assert projection(band.value, band.low, band.high) == "—"
        return
    assert band.value == value
    if band.known:
        assert 0.0 <= band.low <= band.high
        assert band.high - band.low <= band.value
        shown = projection(band.value, band.low, band.high)
        half = float(re.search(r"±([\d.]+) %", shown).group(1))  # type: ignore[union-attr]
        assert half <= 50.0
    else:
        assert projection(band.value, band.low, band.high).endswith("±—")


def test_a_band_below_zero_is_clamped_at_zero() -> None:
    band = honest_band(100.0, -20.0, 100.0)
    assert (band.low, band.high) == (0.0, 100.0)


def test_a_node_timed_by_its_samples_has_a_band_that_holds_its_true_start() -> None:
    """A node whose start the watch saw only as its first sample (a /metrics baseline at 0 tokens, a
    second before LoadGen's first query) is timed up to a sampling interval early: the band reaches to
    the figure over its true span, where with exact times it would not."""
    true_start, first_sample, end = 1.0, 0.0, 92.0
    tokens = 986.0 * (end - true_start)
    done = NodeProgress(
        "Offline",
        end,
        np.array([first_sample, end]),
        np.array([[0.0], [tokens]]),
        np.array([tokens]),
        np.array([300.0]),
        np.array([first_sample]),
        np.array([end]),
        np.array([True]),
        np.array([300.0]),
    )
    loadgens = tokens / (end - true_start)
    exact = forecast(done).tokens_per_s
    sampled = forecast(dataclasses.replace(done, timing_s=np.array([1.0]))).tokens_per_s
    assert exact is not None
    assert sampled is not None
    assert exact.value == sampled.value == pytest.approx(tokens / end)
    assert not exact.low <= loadgens <= exact.high
    assert sampled.low <= loadgens <= sampled.high
    # Two intervals over the node's span, no more: 2 s of 92 s.
    assert sampled.high == pytest.approx(exact.value * (1 + 2.0 / end))


@pytest.mark.parametrize("seed", range(5))
def test_a_pace_read_in_a_burst_may_fall_back_to_its_usual_and_the_low_side_reaches_there(seed: int) -> None:
    """A CPU engine's pace wanders by a third block to block; after a pause its pace is read in a burst at
    three times its usual. The work left then goes at the usual pace: the band's low side holds that
    figure (the burst's pace and its own noise put the end too soon)."""
    rng = np.random.default_rng(seed)
    usual, now, burst_s, left_s, per_sample = 440.0, 420.0, 12, 28.0, 32.0
    wander = np.repeat(np.clip(rng.normal(0.0, 0.3, 50), -0.8, None), 10)[: int(now) + 1]
    wander[-burst_s - 10 : -burst_s] = -1.0  # ten seconds with no progress
    wander[-burst_s:] = 2.0  # then three times the usual pace
    done = offline_progress(np.array([usual]), now, 0, per_sample, wander[:, None]).tokens_done[0]
    tokens = done + left_s * usual
    progress = offline_progress(np.array([usual]), now, tokens / per_sample, per_sample, wander[:, None])
    band = forecast(progress).tokens_per_s
    assert band is not None
    assert band.known
    at_the_usual_pace = tokens / (now + left_s + Assumptions().drain_s / 2)
    assert band.value > at_the_usual_pace  # the burst's pace projects a sooner end...
    assert band.low <= at_the_usual_pace  # ...and the band reaches back to the usual pace's


def test_a_node_stalled_for_most_of_its_history_keeps_its_working_noise() -> None:
    """A node down for more than half of the blocks its pace reads (the node-failure sample's node07, 21
    minutes after it went down) has no median block: its noise was then taken as 100 %, and the band's high
    side jumped from +0.2 % to +7 % at that tick. Its noise is its working blocks' own, as a node's down
    for less than half of them always was: the band at that tick is within a hair of the one a tick before."""
    rng = np.random.default_rng(7)
    rates = np.full(6, 10_000.0)
    progress = offline_progress(rates, 3000.0, 200_000, 300.0, noise=rng.normal(0, 0.01, (3001, 6)))
    down_at = 1350  # by t = 3000 the blocks read (the last 0.8 x 3000 s) are 56 % stall for node 0

    def stalled_at(now: float) -> NodeProgress:
        upto = int(now) + 1
        tokens = progress.tokens[:upto].copy()
        tokens[down_at:, 0] = tokens[down_at, 0]
        return dataclasses.replace(
            progress,
            now_s=now,
            times_s=progress.times_s[:upto],
            tokens=tokens,
            tokens_done=tokens[-1],
            samples_done=np.floor(tokens[-1] / 300.0),
            last_change_s=np.where(np.arange(6) == 0, float(down_at), now),
        )

    before, after = (stalled_at(now) for now in (2600.0, 3000.0))  # stalled below, above half the blocks
    working_noise = project_nodes(before, QUIET).up_random[1:].max()
    for progress_now in (before, after):
        nodes = project_nodes(progress_now, QUIET)
        assert nodes.up_random[0] <= 2 * working_noise, (progress_now.now_s, nodes.up_random)
    band_before = rack_band(project_nodes(before, QUIET))
    band_after = rack_band(project_nodes(after, QUIET))
    assert band_after[2] - band_after[0] <= 2 * (band_before[2] - band_before[0])


def test_a_node_silent_through_its_whole_pace_history_resumes_at_its_peers_pace() -> None:
    """A node silent since early on (stale from 1:00, read at 10:00: every block its pace reads is a
    stall) has no usual pace of its own. It was projected to resume at its tokens over the whole run so
    far, a pace that falls with every second of silence: a 15-minute run's end went out to 110 min, the
    band's low end to 59, and the run ended at 15:47. It resumes at its peers' pace: its end is its work
    left at that pace from now, the rack's end can still be its peers' (it worked unheard), and its
    figure's noise is its peers' (gone, its figure is its work so far)."""
    n, rate, total_samples, per_sample, silent_from = 6, 10_000.0, 30_000, 300.0, 60

    def at(now: float) -> NodeProgress:
        times = np.arange(0.0, now + 0.5, 1.0)
        per_second = np.where(times[:, None] <= 30, rate / 2, rate) * np.ones((1, n))  # a half-pace warm-up
        per_second[0] = 0.0
        return _node0_silent_from(per_second, silent_from, total_samples, per_sample)

    a = Assumptions()
    now = 600.0
    progress = at(now)
    nodes = project_nodes(progress, a)
    node_tokens = total_samples * per_sample
    drain = a.drain_s / 2  # a tail of drain_s costs half of it
    resumed_end = now + (node_tokens - progress.tokens_done[0]) / rate + drain
    peers_end = now + (node_tokens - progress.tokens_done[1]) / rate + drain
    assert nodes.end_s[0] == pytest.approx(resumed_end, rel=1e-3)
    assert nodes.end_s[1:] == pytest.approx(np.full(n - 1, peers_end), rel=1e-3)
    fc = forecast(progress, assumptions=a)
    assert fc.end_s is not None
    assert fc.end_s.low <= peers_end <= fc.end_s.high  # worked unheard: the run ends with its peers
    # Gone, only a resume's own noise moves its figure up: its peers' (none here), not 100 %.
    assert nodes.up_random[0] <= 0.01 * nodes.tokens_per_s[0]
    assert nodes.up_systematic[0] == 0.0
    # A minute more of silence moves its end by that minute, not by minutes per minute.
    assert project_nodes(at(now + 60.0), a).end_s[0] - nodes.end_s[0] == pytest.approx(60.0, rel=0.01)


def test_a_node_gone_does_not_bound_the_earliest_end_of_the_run() -> None:
    """A node gone (silent past outage_s) may never finish, and the run then ends with its peers. Its own
    earliest end (had it worked on unheard since it fell silent) is no bound on the run's: a node silent
    from 2:00 put a 15-minute run's low end at 15:54, and the run ended at 15:47 with its 17 peers. Here
    the silent node was slower than its peers while heard, so its earliest end comes after theirs."""
    n, rate, total_samples, per_sample, silent_from = 6, 10_000.0, 30_000, 300.0, 300
    now = 600.0
    times = np.arange(0.0, now + 0.5, 1.0)
    per_second = np.full((len(times), n), rate)
    per_second[:, 0] = rate / 4
    per_second[0] = 0.0
    progress = _node0_silent_from(per_second, silent_from, total_samples, per_sample)
    tokens = progress.tokens
    a = Assumptions()
    nodes = project_nodes(progress, a)
    assert nodes.gone.tolist() == [True] + [False] * (n - 1)
    # Independently: the peers end when their work left is done at their pace, plus half the drain.
    peers_end = now + (total_samples * per_sample - tokens[-1, 1]) / rate + a.drain_s / 2
    unheard_end = silent_from + (total_samples * per_sample - tokens[-1, 0]) / rate
    assert unheard_end > peers_end + 60  # its own earliest end lies well past its peers'
    fc = forecast(progress, assumptions=a)
    assert fc.end_s is not None
    # Projected at its work so far (its figure), the run ends with its peers: the end is theirs.
    assert fc.end_s.low <= peers_end <= fc.end_s.value < unheard_end
    assert fc.end_s.value == pytest.approx(peers_end, rel=1e-3)
    # The band's high side still holds its resume: the node may come back and finish its work.
    assert fc.end_s.high >= nodes.end_s[0]


def test_a_node_unread_for_a_few_seconds_is_projected_as_working_on() -> None:
    """A flat spell shorter than a pause is a source read between its reports: the node is projected as
    having worked through it, at its pace up to its last report, and the band's late side allows that it
    did not. A real engine's /metrics went unanswered 3 s, 8 s before its Offline run's end: its pace was
    read over a window with those 3 s as no work, 14 % low, and LoadGen's figure landed 2 % above the
    band."""
    rng = np.random.default_rng(7)
    rate, per_sample, total_samples, now, silent_from = 1_000.0, 30.0, 3_000, 80, 77
    per_second = rate * (1.0 + 0.03 * rng.standard_normal((now + 1, 1)))
    progress = _node0_silent_from(per_second, silent_from, total_samples, per_sample)
    a = Assumptions()
    nodes = project_nodes(progress, a)
    left = total_samples * per_sample - progress.tokens_done[0]
    penalty = a.drain_s / 2  # no latency stated: a drain of drain_s, which costs half of it
    worked_on = silent_from + left / rate + penalty  # independently: its work went on unheard
    stopped = now + left / rate + penalty  # or it did nothing since its last report
    assert nodes.end_s[0] == pytest.approx(worked_on, abs=0.5)
    fc = forecast(progress, assumptions=a)
    assert fc.end_s is not None
    assert fc.tokens_per_s is not None
    assert fc.end_s.low <= worked_on
    assert stopped <= fc.end_s.high
    total = total_samples * per_sample
    assert fc.tokens_per_s.low <= total / stopped
    assert total / worked_on <= fc.tokens_per_s.high


def _node0_silent_from(
    per_second: np.ndarray, silent_from: int, total_samples: int, per_sample: float
) -> NodeProgress:
    """An Offline run read every second (``per_second``: tokens each node made in each second, from 0 s)
    whose node 0 falls silent at ``silent_from`` s; now is its last second."""
    n = per_second.shape[1]
    times = np.arange(float(len(per_second)))
    now = float(times[-1])
    tokens = np.cumsum(per_second, axis=0)
    tokens[silent_from:, 0] = tokens[silent_from, 0]
    return NodeProgress(
        "Offline",
        now,
        times,
        tokens,
        tokens[-1],
        np.floor(tokens[-1] / per_sample),
        np.zeros(n),
        np.where(np.arange(n) == 0, float(silent_from), now),
        np.zeros(n, bool),
        np.full(n, float(total_samples)),
        None,
        per_sample,
    )


@settings(max_examples=200, deadline=None)
@given(
    p99=st.lists(
        st.one_of(st.just(math.nan), st.floats(0.0, 5.0), st.sampled_from([0.25, 0.5])),
        min_size=1,
        max_size=24,
    ).filter(lambda v: any(math.isfinite(x) for x in v)),
    names=st.booleans(),
)
def test_a_latency_rule_is_read_at_numpys_worst_node(p99: list[float], names: bool) -> None:
    """The p99 rule is read at the node np.nanargmax names (NaN: a node with no latency yet; ties: the
    first), with its figure and margin, and named only where that node alone has it."""
    values = np.array(p99)
    nodes = tuple(f"node{i:02d}" for i in range(len(values))) if names else ()
    n = np.full(len(values), 10_000.0)
    over = OverLimit("ttft", 2.0, n, np.zeros(len(values)), np.zeros(len(values)), values)
    rule, _ = latency_rules(over, n, nodes)
    worst = int(np.nanargmax(values))
    assert rule.now == values[worst]
    assert rule.margin == (2.0 - values[worst]) / 2.0
    alone = int(np.count_nonzero(values == values[worst])) == 1
    assert rule.node == (nodes[worst] if names and len(values) > 1 and alone else "")
