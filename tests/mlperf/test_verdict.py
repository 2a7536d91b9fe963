"""The verdict from final figures: LoadGen's rules on small made-up runs (checked against sums done here)
and on real runs' detail logs (checked against LoadGen's own "Result is" block)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenwatch.mlperf.figures import (
    Count,
    FinalFigures,
    RunSettings,
    figures_from_detail,
    figures_from_samples,
    over_count_bounds,
    tpot_per_sample,
)
from tokenwatch.mlperf.verdict import judge
from tokenwatch.sources.loadgen_detail import read_detail

from .test_early_stopping import binomial_cdf_exact, independent_budget

LOADGEN = Path(__file__).resolve().parent.parent / "data" / "sources" / "loadgen"
SERVER = RunSettings("Server", 600.0, 100, 100, 0.99, 2_000_000_000, 200_000_000)
OFFLINE = RunSettings("Offline", 600.0, 1, 24_576)


def test_p99_is_the_element_at_int_n_times_099_and_equal_passes_loadgen_not_the_checker() -> None:
    n = 1_000
    ttft = np.full(n, 1_000_000_000, np.int64)
    ttft[990:] = 2_000_000_000  # sorted[990] is the p99: exactly at the limit
    latency = ttft + 100_000_000
    figures = figures_from_samples(
        SERVER,
        latency,
        final_query_scheduled_s=700.0,
        final_query_done_s=701.0,
        first_token_ns=ttft,
        tokens=np.full(n, 11),
    )
    assert figures.ttft_p99_ns == 2_000_000_000
    assert figures.ttft_over == Count(0, 0)  # LoadGen counts latency > limit
    verdict = judge(SERVER, figures)
    assert verdict.check("ttft_p99").ok is True  # LoadGen fails only p99 > limit
    assert verdict.checker_latency_ok is False  # the checker wants p99 < limit
    assert verdict.valid is True
    # tokens / completion time of the final query; TPOT = (latency - ttft) / (tokens - 1) = 10 ms
    assert verdict.tokens_per_s == pytest.approx(n * 11 / 701.0)
    assert figures.tpot_p99_ns == 10_000_000


def test_one_sample_over_the_p99_index_fails_both_rules() -> None:
    n = 1_000
    ttft = np.full(n, 100_000_000, np.int64)
    ttft[989:] = 2_000_000_001  # 11 samples over: sorted[990] is over, and 11 > budget(1000)
    figures = figures_from_samples(
        SERVER,
        ttft + 1,
        final_query_scheduled_s=700.0,
        final_query_done_s=701.0,
        first_token_ns=ttft,
        tokens=np.full(n, 2),
    )
    verdict = judge(SERVER, figures)
    assert figures.ttft_over == Count(11, 11)
    assert verdict.perf_constraints_met is False
    assert verdict.early_stopping_met is False
    # the budget is the largest t with P(Binomial(1000, 0.01) <= t) < 0.01, counted independently here
    assert verdict.check("early_stopping_ttft").limit == independent_budget(n, binomial_cdf_exact) == 2
    assert verdict.valid is False
    assert verdict.summary_lines()[0] == "Result is : INVALID"


def test_offline_figure_and_min_duration() -> None:
    latency = np.linspace(1e9, 599.9e9, 24_576).astype(np.int64)
    tokens = np.full(latency.size, 300)
    figures = figures_from_samples(OFFLINE, latency, tokens=tokens)
    verdict = judge(OFFLINE, figures)
    assert verdict.tokens_per_s == pytest.approx(24_576 * 300 / 599.9)
    assert verdict.min_duration_met is False  # the last completion at 599.9 s < 600 s
    assert verdict.check("min_duration").margin == pytest.approx(-0.1 / 600)
    assert verdict.valid is False
    assert [c.name for c in verdict.checks] == ["min_duration", "min_queries"]


def test_missing_sources_leave_rules_undecided_not_guessed() -> None:
    latency = np.full(600, 50_000_000, np.int64)
    figures = figures_from_samples(SERVER, latency, final_query_scheduled_s=650.0, final_query_done_s=651.0)
    verdict = judge(SERVER, figures)
    assert verdict.check("ttft_p99").ok is None
    assert "first-token" in verdict.check("ttft_p99").detail
    assert verdict.check("tpot_p99").ok is None
    assert verdict.valid is None
    short = judge(
        SERVER, figures_from_samples(SERVER, latency, final_query_scheduled_s=5, final_query_done_s=6)
    )
    assert short.valid is False  # a failed rule decides, whatever is unknown


def test_tpot_per_sample_truncates_like_cpp() -> None:
    got = tpot_per_sample([1_000, 1_000, 1_000, 1_000], [1, 1, 1_001, 0], [4, 1, 3, 0])
    # (999 // 3), one token counts as 0 tokens -> divide by -1, negative span truncates toward zero
    assert got.tolist() == [333, -999, 0, -1_000]
    assert tpot_per_sample([0], [7], [3]).tolist() == [-3]  # -7 / 2 = -3.5 -> -3 in C++


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(1, 5_000), min_size=1, max_size=400),
    st.integers(1, 5_000),
)
def test_percentile_bounds_contain_the_true_count(values: list[int], limit: int) -> None:
    data = np.sort(np.array(values))
    n = len(data)
    stated = {q: float(data[int(n * q)]) for q in (0.5, 0.9, 0.95, 0.97, 0.99, 0.999)}
    stated[0.0], stated[1.0] = float(data[0]), float(data[-1])
    bounds = over_count_bounds(n, stated, limit)
    true = int(np.count_nonzero(data > limit))
    assert bounds.low <= true <= (bounds.high if bounds.high is not None else n)


def _detail_verdict(folder: str):
    log = read_detail(LOADGEN / folder / "mlperf_log_detail.txt")
    settings_ = RunSettings.from_detail(log.values)
    return judge(settings_, figures_from_detail(settings_, log.values)), log


def test_real_server_run_lenovo_invalid() -> None:
    verdict, log = _detail_verdict("lenovo-8xb200-llama2-999-server-ranging")
    summary = (LOADGEN / "lenovo-8xb200-llama2-999-server-ranging" / "mlperf_log_summary.txt").read_text()
    assert verdict.summary_lines() == summary.splitlines()[8:13]
    assert verdict.valid is log.valid is False
    # The early-stopping failure follows from the percentiles alone: at least n - int(0.99 n) = 8,848
    # samples are above the 3.85 s p99, more than the 8,629 the 884,736 queries allow.
    es = verdict.check("early_stopping_ttft")
    assert (es.ok, es.limit) == (False, 8_629)
    assert verdict.check("early_stopping_tpot").ok is True  # the TPOT max (178 ms) is under 200 ms
    assert verdict.tokens_per_s == log.values["result_completed_tokens_per_second"]


def test_real_server_run_krai_too_few_queries() -> None:
    verdict, log = _detail_verdict("krai-8xh200-llama31-70b-server-test06")
    summary = (LOADGEN / "krai-8xh200-llama31-70b-server-test06" / "mlperf_log_summary.txt").read_text()
    for line in verdict.summary_lines():
        assert line in summary.splitlines()
    assert verdict.check("early_stopping_tpot").ok is False  # 100 queries < 459, whatever the latencies
    assert verdict.check("ttft_p99").ok is False  # 6.03 s > 2 s
    assert verdict.valid is log.valid is False


def test_real_offline_run_cisco_valid() -> None:
    verdict, log = _detail_verdict("cisco-16xh200-llama31-405b-offline")
    assert verdict.valid is log.valid is True
    assert verdict.tokens_per_s == log.values["result_tokens_per_second"]
    assert verdict.check("min_duration").value == pytest.approx(log.values["result_max_latency_ns"] / 1e9)
    check = verdict.check("min_queries")
    assert (check.value, check.limit, check.detail) == (8313, 8313, "1 query of 8313 samples")


def test_figures_need_results() -> None:
    with pytest.raises(ValueError, match="effective_scenario"):
        RunSettings.from_detail({})
    with pytest.raises(ValueError, match="lacks result_query_count"):
        figures_from_detail(SERVER, {})
    with pytest.raises(ValueError, match="no completed samples"):
        figures_from_samples(SERVER, [])


def test_final_figures_are_frozen() -> None:
    figures = FinalFigures(1, 1, None, None, 1.0)
    with pytest.raises(AttributeError):
        figures.queries_issued = 2  # type: ignore[misc]
