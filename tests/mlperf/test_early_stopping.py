"""LoadGen's early stopping, checked against an independent binomial computation and real LoadGen lines."""

from __future__ import annotations

import math
import re
import threading
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenwatch.mlperf.early_stopping import (
    CONFIDENCE,
    SERVER_PERCENTILE,
    TOLERANCE,
    KnownBudgets,
    budget_between,
    budget_search,
    early_stopping_result,
    min_passing_queries,
    odds,
    odds_series,
    overlatency_budget,
    overlatency_budgets,
    passes,
    queries_needed,
    search_window,
)

LOADGEN = Path(__file__).resolve().parent.parent / "data" / "sources" / "loadgen"
# The double LoadGen compares against: ``1 - c`` with c = 0.99 (early_stopping.cc, results.cc line 157).
THRESHOLD = 1 - 0.99


def binomial_cdf_log_space(n: int, t: int, over_rate: float = 0.01) -> float:
    """P(X <= t), X ~ Binomial(n, over_rate): pmf terms from lgamma, summed in log space."""
    logs = [
        math.lgamma(n + 1)
        - math.lgamma(k + 1)
        - math.lgamma(n - k + 1)
        + k * math.log(over_rate)
        + (n - k) * math.log1p(-over_rate)
        for k in range(t + 1)
    ]
    top = max(logs)
    return math.exp(top) * math.fsum(math.exp(x - top) for x in logs)


def binomial_cdf_exact(n: int, t: int) -> Fraction:
    """P(X <= t), X ~ Binomial(n, 1/100), as an exact fraction."""
    return Fraction(sum(math.comb(n, k) * 99 ** (n - k) for k in range(t + 1)), 100**n)


def independent_budget(n: int, cdf) -> int:
    """The largest t whose CDF stays under the threshold; -1 if none (the CDF grows with t)."""
    t = -1
    while t + 1 <= n and cdf(n, t + 1) < THRESHOLD:
        t += 1
    return t


@pytest.mark.parametrize("n", [458, 459, 600, 1_000, 1_800, 2_400, 3_000])
def test_budget_equals_exact_rational_binomial(n: int) -> None:
    assert overlatency_budget(n) == independent_budget(n, binomial_cdf_exact)


@pytest.mark.parametrize("n", [5_000, 10_000, 47_123, 100_000, 210_624, 884_736])
def test_budget_equals_log_space_binomial(n: int) -> None:
    budget = overlatency_budget(n)
    # Start the independent scan near the answer: the CDF is monotone in t, so two evaluations settle it.
    assert binomial_cdf_log_space(n, budget) < THRESHOLD <= binomial_cdf_log_space(n, budget + 1)


def test_the_issue_figures() -> None:
    # "at 10,000 queries at most 77 may exceed it, at 210,624 at most 2,000"
    assert overlatency_budget(10_000) == 77
    assert overlatency_budget(210_624) == 2_000


def test_h0_and_too_few_queries() -> None:
    # ceil(log(0.01) / log(0.99)) = 459: below that no run passes, whatever its latencies.
    assert min_passing_queries(0) == math.ceil(math.log(THRESHOLD) / math.log(0.99)) == 459
    assert overlatency_budget(458) == -1
    assert overlatency_budget(459) == 0
    assert not passes(458, 0)
    assert passes(459, 0)


@pytest.mark.parametrize("t", [0, 1, 2, 7, 50, 333, 2_000, 12_094])
def test_min_passing_is_the_true_minimum(t: int) -> None:
    """LoadGen's bounded search lands on the true minimum h (its bounds never cut it off)."""
    h = min_passing_queries(t)
    assert odds(h, t) < THRESHOLD <= odds(h - 1, t)
    # and the binomial reading of those odds: P(X <= t) over h + t queries
    assert binomial_cdf_log_space(h + t, t) == pytest.approx(odds(h, t), rel=1e-9)


@pytest.mark.parametrize("n", [459, 1_000, 10_000, 210_624])
def test_passes_agrees_with_queries_needed(n: int) -> None:
    budget = overlatency_budget(n)
    for t in {0, max(budget - 1, 0), budget, budget + 1, budget + 10}:
        assert passes(n, t) == (n >= queries_needed(t)) == (t <= budget)


def test_bad_arguments_raise() -> None:
    with pytest.raises(ValueError, match="t must be"):
        min_passing_queries(-1)
    with pytest.raises(ValueError, match="n and t"):
        passes(-1, 0)
    with pytest.raises(ValueError, match="odds needs"):
        odds(0, 3)


def _block(summary: str, title: str) -> str:
    lines = summary.splitlines()
    out = []
    for line in lines[lines.index(title) + 1 :]:
        if not line.startswith(" ") or not line.strip():
            break
        out.append(line)
    return "\n".join(out)


def test_real_server_run_lenovo_ttft_early_stopping() -> None:
    """LoadGen 5.1 on 8xB200: 884,736 queries, TTFT p99 3.85 s > 2 s, "350367 more queries"."""
    summary = (LOADGEN / "lenovo-8xb200-llama2-999-server-ranging" / "mlperf_log_summary.txt").read_text()
    block = _block(summary, "TTFT Early Stopping Result:")
    found = re.search(r"Processed (\d+) queries.*at least (\d+) more", block, re.S)
    assert found is not None, block
    n, more = map(int, found.groups())
    assert n == 884_736
    # LoadGen said n + more = h(t) + t for its count t of samples over 2 s. Exactly one t must give that sum,
    # and it must be at least the n - int(0.99 n) samples above the 99th percentile (3.85 s > 2 s).
    matches = [t for t in range(8_000, 14_000) if queries_needed(t) == n + more]
    assert len(matches) == 1
    t = matches[0]
    assert t >= n - int(n * 0.99)
    assert not passes(n, t)
    assert early_stopping_result(n, t) == block
    assert _block(summary, "TPOT Early Stopping Result:") == early_stopping_result(n, 0)


def test_real_server_run_krai_too_few_queries() -> None:
    """100 queries: LoadGen's TPOT test (run first) fails with "359 more", and the TTFT line stays empty."""
    summary = (LOADGEN / "krai-8xh200-llama31-70b-server-test06" / "mlperf_log_summary.txt").read_text()
    block = _block(summary, "TPOT Early Stopping Result:")
    assert early_stopping_result(100, 0) == block
    assert queries_needed(0) - 100 == 359
    assert "TTFT Early Stopping Result:\n\nTPOT" in summary


def test_real_singlestream_run_intel_percentile_estimate() -> None:
    """SingleStream uses the same test at the 90th percentile: "at least 64 queries (5000)", "discard 449"."""
    summary = (LOADGEN / "intel-b60-llama31-8b-edge-singlestream" / "mlperf_log_summary.txt").read_text()
    block = _block(summary, "TTFT Early Stopping Result:")
    found = re.search(r"at least (\d+) queries \((\d+)\).*discard (\d+) highest", block, re.S)
    assert found is not None, block
    least, n, discard = map(int, found.groups())
    assert least == min_passing_queries(1, 0.9) + 1  # results.cc: h_min = find_min_passing(1, p); "h_min + 1"
    assert discard == overlatency_budget(n, 0.9) - 1  # the loop leaves t = budget; it discards t - 1


# --- Bounded by construction: any query count, any share over the limit ---------------------------------

MAX_QUERIES = 10**7


def _over(n: int, share: float) -> int:
    return min(n, round(n * share))


@settings(max_examples=300, deadline=None)
@given(n=st.integers(1, MAX_QUERIES), share=st.floats(0.0, 1.0))
def test_passes_returns_after_bounded_work_and_agrees_with_loadgens_search(n: int, share: float) -> None:
    """Whatever the count and share (a run with 23 % over the limit once summed a series to inf, then
    NaN, and never returned), the answer comes after at most ``min(t, h) + 1`` series terms, and it is
    what LoadGen's own search says: ``n >= h(t) + t``."""
    t = _over(n, share)
    h = n - t
    low, high = search_window(t)
    if low <= h < high:  # the one case that sums a series
        summed = odds_series(h, t)
        assert summed.terms <= min(t, h) + 1
        assert math.isfinite(summed.value)
        assert 0.0 <= summed.value <= 1.0
    assert passes(n, t) == (n >= queries_needed(t))


@settings(max_examples=300, deadline=None)
@given(h=st.integers(1, MAX_QUERIES), t=st.integers(0, MAX_QUERIES))
def test_odds_anywhere_is_a_probability_after_bounded_work(h: int, t: int) -> None:
    """Outside LoadGen's window the complementary series is summed instead: still finite, still bounded."""
    summed = odds_series(h, t)
    p = SERVER_PERCENTILE - TOLERANCE
    loadgens_side = t * (p / (1 - p)) < h + 1
    # a finite polynomial: 1 + t terms on LoadGen's side, h on the complement's (where h <= t p / (1 - p))
    assert summed.terms <= (t + 1 if loadgens_side else h)
    assert math.isfinite(summed.value)
    assert -1e-9 <= summed.value <= 1.0 + 1e-9


@settings(max_examples=200, deadline=None)
@given(n=st.integers(1, MAX_QUERIES))
def test_budget_search_asks_a_logarithmic_number_of_questions(n: int) -> None:
    budget, probes = budget_search(n)
    assert probes <= 2 * math.ceil(math.log2(n + 2)) + 4
    assert budget == -1 or passes(n, budget)
    assert not passes(n, budget + 1)


@settings(max_examples=150, deadline=None)
@given(n=st.integers(1, 1_500), share=st.floats(0.0, 1.0))
def test_passes_agrees_with_the_exact_rational_binomial(n: int, share: float) -> None:
    """Small runs, against the CDF in exact fractions: P(X <= t) < 1/100 over n queries, X ~ B(n, 1/100),
    and no fewer than h(0) = 459 under the limit (LoadGen's floor)."""
    t = _over(n, share)
    cdf = binomial_cdf_exact(n, t)
    if abs(cdf - Fraction(1, 100)) < Fraction(1, 10**9):
        return  # a float cannot tell these apart from the threshold; LoadGen's double decides
    assert passes(n, t) == (n - t >= 459 and cdf < Fraction(1, 100))


@pytest.mark.parametrize(
    ("n", "share"),
    [(2_380, 0.23), (1_000, 0.5), (10**7, 1.0), (10**7, 0.015), (288_000, 0.015), (5_000_000, 0.0101)],
)
def test_the_counts_that_overflowed_now_return(n: int, share: float) -> None:
    """A 10-minute Interactive Server run with ~23 % over its TTFT limit, an 80-minute one with ~1.5 %."""
    t = _over(n, share)
    assert not passes(n, t)
    needed = queries_needed(t)
    assert needed > n
    assert early_stopping_result(n, t).endswith("query were under latency.")
    assert f"at least {needed - n} more" in early_stopping_result(n, t)


@settings(max_examples=150, deadline=None)
@given(h=st.integers(1, 20_000), t=st.integers(0, 2_000))
def test_odds_on_either_side_of_loadgens_window_is_the_binomial_cdf(h: int, t: int) -> None:
    """LoadGen's series where it shrinks, the complement's elsewhere: both the CDF summed in log space."""
    assert odds(h, t) == pytest.approx(binomial_cdf_log_space(h + t, t), rel=1e-9, abs=1e-12)


@settings(max_examples=60, deadline=None)
@given(
    rounds=st.lists(st.lists(st.integers(0, 60_000), min_size=1, max_size=40), min_size=1, max_size=6),
    centre=st.integers(0, 300_000),
)
def test_the_budgets_of_many_totals_are_each_totals_own_budget(rounds: list[list[int]], centre: int) -> None:
    """Budgets read off those already found (two known totals with the same budget bracket every total
    between them) equal a search of each total alone, round after round as the known ones accumulate;
    the totals drift around one figure, as a live run's planned totals do."""
    known = KnownBudgets()
    for offsets in rounds:
        ns = np.array([centre + o // 7 if o % 2 else max(centre - o // 7, 0) for o in offsets], np.int64)
        got = known.of(ns, SERVER_PERCENTILE, CONFIDENCE)
        assert got.tolist() == [budget_search(int(n))[0] for n in ns]


@settings(max_examples=200, deadline=None)
@given(n=st.integers(0, 400_000), below=st.integers(1, 5_000), above=st.integers(1, 5_000))
def test_a_budget_searched_between_its_neighbours_budgets_is_its_own(n: int, below: int, above: int) -> None:
    """A total's budget lies between those of a smaller and a larger total (it never falls as the total
    grows): halving that range gives the search's own budget, -1 (not even none over the limit passes)
    included."""
    low, high = budget_search(max(n - below, 0))[0], budget_search(n + above)[0]
    assert low <= budget_search(n)[0] <= high
    assert budget_between(n, low, high) == budget_search(n)[0]


def test_the_budgets_of_many_totals_start_again_past_their_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(KnownBudgets, "LIMIT", 8)
    known = KnownBudgets()
    for start in range(0, 60_000, 5_000):
        ns = np.arange(start, start + 3_000, 500, dtype=np.int64)
        assert known.of(ns, SERVER_PERCENTILE, CONFIDENCE).tolist() == [budget_search(int(n))[0] for n in ns]
        assert len(known.known[0]) <= 8
    assert overlatency_budgets(np.array([458, 459, 210_624])).tolist() == [-1, 0, 2_000]


def test_the_budgets_of_many_totals_hold_when_threads_ask_at_once() -> None:
    """A replay's index pass runs a core in a thread of its own beside the player's: budgets asked from
    both at once are each total's own."""
    rng = np.random.default_rng(5)
    asks = [rng.integers(200_000, 230_000, 64) for _ in range(48)]
    truth = {int(n): budget_search(int(n))[0] for ask in asks for n in ask}
    known = KnownBudgets()
    wrong: list[tuple[int, int]] = []

    def ask(part: list[np.ndarray]) -> None:
        for ns in part:
            got = known.of(ns, SERVER_PERCENTILE, CONFIDENCE)
            wrong.extend((int(n), int(b)) for n, b in zip(ns, got, strict=True) if truth[int(n)] != b)

    threads = [threading.Thread(target=ask, args=(asks[k::4],)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == []
