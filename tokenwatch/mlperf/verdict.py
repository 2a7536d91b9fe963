"""LoadGen's final judgement of a run, made from its final figures (:mod:`tokenwatch.mlperf.figures`).

The rules, as mlcommons/inference @ b66003e10e2d ``loadgen/results.cc`` (LoadGen 6.0.17) applies them:

* result: Offline ``tokens / max sample latency`` (the one query is issued at t = 0, so that is the time
  of the last completion, drain tail included); Server ``tokens / completion time of the final query``;
* minimum duration (``MinDurationMet``, lines 287-301): Offline the max latency, Server the final query's
  *scheduled* time, against the run's ``min_duration``;
* minimum queries (lines 327-333): queries issued >= ``min_query_count`` and samples >= ``min_sample_count``;
* Server performance constraints (``PerfConstraintsMet``, lines 339-375): the TTFT and TPOT 99th
  percentiles must not exceed the limits (LoadGen fails ``p99 > limit``). The submission checker is stricter,
  ``ttft < limit and tpot < limit`` (performance_check.py line 494): :attr:`Verdict.checker_latency_ok`;
* early stopping (lines 227-247, called at 497-506): TPOT first, then TTFT, each ``n >= h(t) + t`` on the
  count of samples over the limit (``latency > limit``), see :mod:`tokenwatch.mlperf.early_stopping`.

"Result is : VALID" when all four hold. A check whose inputs are missing or only bounded is ``ok=None``
with the reason in ``detail``: the overall result is then None unless another check already failed.
"""

from __future__ import annotations

from dataclasses import dataclass

from tokenwatch.mlperf.early_stopping import early_stopping_result, overlatency_budget, passes
from tokenwatch.mlperf.figures import Count, FinalFigures, RunSettings

CHECK_NAMES = (
    "min_duration",
    "min_queries",
    "ttft_p99",
    "tpot_p99",
    "early_stopping_ttft",
    "early_stopping_tpot",
)


@dataclass(frozen=True, slots=True)
class Check:
    """One rule. ``margin``: the share of the limit to spare (negative: by how much it fails)."""

    name: str
    value: float | None
    limit: float | None
    ok: bool | None
    margin: float | None
    unit: str = ""
    detail: str = ""


@dataclass(frozen=True, slots=True)
class Verdict:
    scenario: str
    tokens_per_s: float | None
    samples_per_s: float | None
    checks: tuple[Check, ...]
    valid: bool | None  # LoadGen's "Result is"
    min_duration_met: bool | None
    min_queries_met: bool | None
    perf_constraints_met: bool | None  # None for Offline, which has none
    early_stopping_met: bool | None
    checker_latency_ok: bool | None  # the checker's strict p99 < limit (Server); True for Offline

    def check(self, name: str) -> Check:
        for c in self.checks:
            if c.name == name:
                return c
        raise KeyError(name)

    def summary_lines(self) -> list[str]:
        """The "Result is" block of LoadGen's summary (results.cc lines 510-517), as LoadGen prints it."""

        def yes(flag: bool | None) -> str:
            return "Yes" if flag else "NO" if flag is False else "?"

        lines = ["Result is : " + ("VALID" if self.valid else "INVALID" if self.valid is False else "?")]
        if self.scenario == "Server":
            lines.append("  Performance constraints satisfied : " + yes(self.perf_constraints_met))
        lines += [
            "  Min duration satisfied : " + yes(self.min_duration_met),
            "  Min queries satisfied : " + yes(self.min_queries_met),
            "  Early stopping satisfied: " + yes(self.early_stopping_met),
        ]
        return lines


def _all(flags: list[bool | None]) -> bool | None:
    if any(f is False for f in flags):
        return False
    return None if any(f is None for f in flags) else True


def _relative(spare: float, scale: float) -> float | None:
    return spare / scale if scale else None


def _latency_check(name: str, p99_ns: int | None, limit_ns: int | None, source: str) -> Check:
    if limit_ns is None:
        return Check(name, None, None, None, None, "s", "no limit configured for this run")
    if p99_ns is None:
        return Check(name, None, limit_ns / 1e9, None, None, "s", f"needs {source}")
    ok = p99_ns <= limit_ns
    return Check(name, p99_ns / 1e9, limit_ns / 1e9, ok, _relative(limit_ns - p99_ns, limit_ns), "s")


def _early_stopping_check(name: str, n: int, over: Count | None, limit_ns: int | None, source: str) -> Check:
    budget = overlatency_budget(n)
    if limit_ns is None:
        return Check(name, None, None, None, None, "samples", "no limit configured for this run")
    if over is None:
        return Check(name, None, budget, None, None, "samples", f"needs {source}")
    exact = over.exact
    if exact is not None:
        ok = passes(n, exact)
        return Check(
            name,
            exact,
            budget,
            ok,
            _relative(budget - exact, max(budget, 1)),
            "samples",
            early_stopping_result(n, exact),
        )
    decided: bool | None
    if over.low > budget:
        decided = False
    elif over.high is not None and over.high <= budget:
        decided = True
    else:
        decided = None
    detail = f"between {over.low} and {over.high if over.high is not None else n} over the limit"
    return Check(name, None, budget, decided, None, "samples", detail)


def judge(settings: RunSettings, figures: FinalFigures) -> Verdict:
    """LoadGen's verdict on a run judged by ``settings``, with every check's value, limit and margin."""
    basis = figures.min_duration_basis_s
    duration_ok = bool(basis >= settings.min_duration_s)
    checks = [
        Check(
            "min_duration",
            basis,
            settings.min_duration_s,
            duration_ok,
            _relative(basis - settings.min_duration_s, settings.min_duration_s),
            "s",
        ),
    ]
    queries_ok = bool(
        figures.queries_issued >= settings.min_query_count
        and figures.sample_count >= settings.min_sample_count
    )
    checks.append(
        Check(
            "min_queries",
            figures.queries_issued,
            settings.min_query_count,
            queries_ok,
            _relative(figures.queries_issued - settings.min_query_count, settings.min_query_count),
            "queries",
            f"{figures.sample_count} samples of at least {settings.min_sample_count}",
        )
    )
    perf: bool | None = None
    early: bool | None = True
    checker: bool | None = True
    if settings.scenario == "Server":
        ttft = _latency_check(
            "ttft_p99", figures.ttft_p99_ns, settings.ttft_limit_ns, "first-token latencies"
        )
        tpot = _latency_check(
            "tpot_p99", figures.tpot_p99_ns, settings.tpot_limit_ns, "output tokens per sample (TPOT)"
        )
        n = figures.queries_issued
        es_tpot = _early_stopping_check(
            "early_stopping_tpot", n, figures.tpot_over, settings.tpot_limit_ns, "per-sample TPOT"
        )
        es_ttft = _early_stopping_check(
            "early_stopping_ttft", n, figures.ttft_over, settings.ttft_limit_ns, "per-sample TTFT"
        )
        checks += [ttft, tpot, es_ttft, es_tpot]
        perf = _all([ttft.ok, tpot.ok])
        early = _all([es_tpot.ok, es_ttft.ok])
        checker = _all([_strictly_under(ttft), _strictly_under(tpot)])
    valid = _all([duration_ok, queries_ok, perf if settings.scenario == "Server" else True, early])
    return Verdict(
        settings.scenario,
        figures.tokens_per_s,
        figures.samples_per_s,
        tuple(checks),
        valid,
        duration_ok,
        queries_ok,
        perf,
        early,
        checker,
    )


def _strictly_under(check: Check) -> bool | None:
    if check.value is None or check.limit is None:
        return None
    return check.value < check.limit
