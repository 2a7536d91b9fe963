"""The verdict on real LoadGen runs: judged from each run's own trace, it must say what LoadGen's summary
says, line for line, and give LoadGen's figures."""

from __future__ import annotations

import pytest

from tokenwatch.mlperf.figures import RunSettings, figures_from_detail, figures_from_samples
from tokenwatch.mlperf.rules import offline_samples_issued
from tokenwatch.mlperf.verdict import Verdict, judge

from .conftest import LOADGEN_RUNS
from .loadgen_run import LoadGenRun

# What each run was set up to give: the line of LoadGen's summary the case is about (a check of the setup,
# not of the verdict). Only that one: on a loaded machine a run set up to fail early stopping may also miss
# its latency limit, and the verdict must then say so as LoadGen does.
SETUP = {
    "offline-valid": "Result is : VALID",
    "offline-short": "Min duration satisfied : NO",
    "server-valid": "Early stopping satisfied: Yes",
    "server-ttft": "Performance constraints satisfied : NO",
    "server-early-stopping": "Early stopping satisfied: NO",
    "server-tpot": "Performance constraints satisfied : NO",
}


def summary_flags(summary: str) -> tuple[bool, bool | None, bool, bool]:
    """(valid, performance constraints met, min duration met, early stopping met) as LoadGen's summary
    states them (None: the summary states no performance constraints, as Offline's)."""
    lines = {
        line.split(":")[0].strip(): line.split(":", 1)[1].strip()
        for line in summary.splitlines()
        if ":" in line
    }

    def met(key: str) -> bool:
        return lines[key] == "Yes"

    perf = met("Performance constraints satisfied") if "Performance constraints satisfied" in lines else None
    early = met("Early stopping satisfied") if "Early stopping satisfied" in lines else True
    return lines["Result is"] == "VALID", perf, met("Min duration satisfied"), early


def trace_verdict(run: LoadGenRun) -> tuple[RunSettings, Verdict]:
    settings = RunSettings.from_detail(run.detail())
    final = int(run.sample_seq.argmax())  # the final query issued (sequence ids follow the schedule)
    figures = figures_from_samples(
        settings,
        run.latency_ns,
        final_query_scheduled_s=run.scheduled_ns[final] / 1e9,
        final_query_done_s=run.completed_at_ns[final] / 1e9,
        first_token_ns=run.first_token_ns,
        tokens=run.tokens,
    )
    return settings, judge(settings, figures)


@pytest.mark.parametrize("name", list(LOADGEN_RUNS))
def test_verdict_from_the_trace_is_loadgens(loadgen_runs: dict[str, LoadGenRun], name: str) -> None:
    run = loadgen_runs[name]
    settings, verdict = trace_verdict(run)
    summary = run.summary.splitlines()
    start = summary.index(verdict.summary_lines()[0])
    assert summary[start : start + len(verdict.summary_lines())] == verdict.summary_lines()
    assert SETUP[name] in [line.strip() for line in summary]
    assert (
        verdict.valid,
        verdict.perf_constraints_met,
        verdict.min_duration_met,
        verdict.early_stopping_met,
    ) == summary_flags(run.summary)
    detail = run.detail()
    assert verdict.valid is (detail["result_validity"] == "VALID")
    if settings.scenario == "Offline":
        assert verdict.tokens_per_s == pytest.approx(detail["result_tokens_per_second"], rel=1e-5)
        assert verdict.samples_per_s == pytest.approx(detail["result_samples_per_second"], rel=1e-5)
        return
    assert verdict.tokens_per_s == pytest.approx(detail["result_completed_tokens_per_second"], rel=1e-5)
    assert verdict.samples_per_s == pytest.approx(detail["result_completed_samples_per_sec"], rel=1e-5)
    for check, key in (
        ("ttft_p99", "result_first_token_99.00_percentile_latency_ns"),
        ("tpot_p99", "result_time_per_output_token_99.00_percentile_ns"),
    ):
        value = verdict.check(check).value
        assert value is not None, check
        assert round(value * 1e9) == detail[key]  # to the nanosecond
    # LoadGen tests TPOT first and leaves the TTFT text empty when TPOT fails (results.cc 661-669).
    tpot_text = verdict.check("early_stopping_tpot").detail
    ttft_text = verdict.check("early_stopping_ttft").detail if verdict.check("early_stopping_tpot").ok else ""
    assert detail["early_stopping_tpot_result"] == tpot_text.replace("\n", " ")
    assert detail["early_stopping_ttft_result"] == ttft_text.replace("\n", " ")
    assert run.summary_block("TPOT Early Stopping Result:") == tpot_text


@pytest.mark.parametrize("name", ["offline-valid", "offline-short"])
def test_offline_issue_rule_is_loadgens(loadgen_runs: dict[str, LoadGenRun], name: str) -> None:
    detail = loadgen_runs[name].detail()
    expected = offline_samples_issued(
        detail["requested_min_query_count"],
        detail["requested_min_duration_ms"] / 1000,
        detail["requested_offline_expected_qps"],
    )
    assert expected == detail["generated_samples_per_query"] == len(loadgen_runs[name].latency_ns)


@pytest.mark.parametrize("name", list(LOADGEN_RUNS))
def test_detail_log_verdict_never_contradicts_loadgen(loadgen_runs: dict[str, LoadGenRun], name: str) -> None:
    """From the detail log alone (percentiles, no per-sample data) every decided check agrees with LoadGen."""
    detail = loadgen_runs[name].detail()
    settings = RunSettings.from_detail(detail)
    verdict = judge(settings, figures_from_detail(settings, detail))
    assert verdict.valid in (None, detail["result_validity"] == "VALID")
    assert verdict.min_duration_met is detail["result_min_duration_met"]
    if settings.scenario == "Server":
        assert verdict.perf_constraints_met is detail["result_perf_constraints_met"]
        assert verdict.early_stopping_met in (None, detail["early_stopping_met"])
