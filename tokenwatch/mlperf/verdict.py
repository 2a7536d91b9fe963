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

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tokenwatch.mlperf.early_stopping import early_stopping_result, overlatency_budget, passes
from tokenwatch.mlperf.figures import Count, FinalFigures, RunSettings, percentile_index

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
    """One rule. ``margin``: the share of the limit to spare (negative: by how much it fails).
    ``estimated``: the value is read from a histogram's buckets (about 3 digits), not LoadGen's own.
    ``node``: whose value it is, where a rack's rule is read at its worst node (``worst_checks``)."""

    name: str
    value: float | None
    limit: float | None
    ok: bool | None
    margin: float | None
    unit: str = ""
    detail: str = ""
    estimated: bool = False
    node: str = ""


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
        return result_lines(
            self.scenario,
            self.valid,
            self.perf_constraints_met,
            self.min_duration_met,
            self.min_queries_met,
            self.early_stopping_met,
        )


def result_lines(
    scenario: str,
    valid: bool | None,
    perf_constraints_met: bool | None,
    min_duration_met: bool | None,
    min_queries_met: bool | None,
    early_stopping_met: bool | None,
) -> list[str]:
    """LoadGen's "Result is" block from its flags ("?" where a flag is undecided)."""

    def yes(flag: bool | None) -> str:
        return "Yes" if flag else "NO" if flag is False else "?"

    lines = ["Result is : " + ("VALID" if valid else "INVALID" if valid is False else "?")]
    if scenario == "Server":
        lines.append("  Performance constraints satisfied : " + yes(perf_constraints_met))
    lines += [
        "  Min duration satisfied : " + yes(min_duration_met),
        "  Min queries satisfied : " + yes(min_queries_met),
        "  Early stopping satisfied: " + yes(early_stopping_met),
    ]
    return lines


def loadgen_result_lines(values: Mapping[str, Any]) -> list[str] | None:
    """The "Result is" block as LoadGen itself decided it, from its detail log's ``result_*`` records
    (None when the log has no result: the run has not ended, or the log was cut)."""
    validity = values.get("result_validity")
    if not isinstance(validity, str):
        return None

    def flag(key: str) -> bool | None:
        value = values.get(key)
        return value if isinstance(value, bool) else None

    return result_lines(
        str(values.get("effective_scenario", "")),
        validity.upper() == "VALID",
        flag("result_perf_constraints_met"),
        flag("result_min_duration_met"),
        flag("result_min_queries_met"),
        flag("early_stopping_met"),
    )


def all_met(flags: Sequence[bool | None]) -> bool | None:
    """Whether every check is met: False if one is not, None (not known yet) if one is not known,
    else True."""
    if any(f is False for f in flags):
        return False
    return None if any(f is None for f in flags) else True


def _relative(spare: float, scale: float) -> float | None:
    return spare / scale if scale else None


def _latency_check(
    name: str,
    p99_ns: int | None,
    limit_ns: int | None,
    source: str,
    over: Count | None = None,
    n: int = 0,
    percentile: float = 0.99,
    p99_exact: bool = True,
) -> Check:
    """LoadGen fails ``sorted[int(n * p)] > limit``, i.e. ``n - int(n * p)`` or more samples over the
    limit: decided by the over-limit count where it is known, else by the percentile's value."""
    if limit_ns is None:
        return Check(name, None, None, None, None, "s", "no limit configured for this run")
    shown = None if p99_ns is None else p99_ns / 1e9
    margin = None if p99_ns is None else _relative(limit_ns - p99_ns, limit_ns)
    estimated = shown is not None and not p99_exact
    if over is not None and n > 0:
        allowed = n - percentile_index(n, percentile) - 1
        detail = f"{over.low}" if over.exact is not None else f"{over.low}..{over.high}"
        detail += f" of {n} samples over the limit, at most {allowed} allowed"
        if over.high is not None and over.high <= allowed:
            return Check(name, shown, limit_ns / 1e9, True, margin, "s", detail, estimated)
        if over.low > allowed:
            return Check(name, shown, limit_ns / 1e9, False, margin, "s", detail, estimated)
        if not p99_exact:
            return Check(name, shown, limit_ns / 1e9, None, margin, "s", detail, estimated)
    if p99_ns is None or not p99_exact:
        return Check(name, shown, limit_ns / 1e9, None, margin, "s", f"needs {source}", estimated)
    return Check(name, shown, limit_ns / 1e9, p99_ns <= limit_ns, margin, "s")


def _early_stopping_check(name: str, n: int, over: Count | None, limit_ns: int | None, source: str) -> Check:
    # A run too short to pass early stopping whatever its latencies has no budget (LoadGen's -1): it is
    # shown as none (null), and the detail says why in LoadGen's words, never as a raw -1.
    found = overlatency_budget(n)
    budget = found if found >= 0 else None
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
            _relative(found - exact, max(found, 1)) if budget is not None else None,
            "samples",
            early_stopping_result(n, exact),
        )
    decided: bool | None
    if over.low > found:
        decided = False
    elif over.high is not None and over.high <= found:
        decided = True
    else:
        decided = None
    detail = f"between {over.low} and {over.high if over.high is not None else n} over the limit"
    if budget is None:
        detail += f"; {n} queries are too few to pass early stopping whatever their latency"
    return Check(name, None, budget, decided, None, "samples", detail)


def judge(settings: RunSettings, figures: FinalFigures) -> Verdict:
    """LoadGen's verdict on a run judged by ``settings``, with every check's value, limit and margin."""
    basis = figures.min_duration_basis_s
    duration_ok: bool | None
    if math.isfinite(basis):
        duration_ok = bool(basis >= settings.min_duration_s)
        duration = Check(
            "min_duration",
            basis,
            settings.min_duration_s,
            duration_ok,
            _relative(basis - settings.min_duration_s, settings.min_duration_s),
            "s",
        )
    else:
        duration_ok = None
        duration = Check(
            "min_duration",
            None,
            settings.min_duration_s,
            None,
            None,
            "s",
            "needs the final query's scheduled time (the detail log's generated_query_duration)",
        )
    checks = [duration]
    queries_ok = bool(
        figures.queries_issued >= settings.min_query_count
        and figures.sample_count >= settings.min_sample_count
    )
    if settings.scenario == "Offline":  # one query: what can fall short is its samples
        count, need, unit = figures.sample_count, settings.min_sample_count, "samples"
        detail = f"{figures.queries_issued} query of {figures.sample_count} samples"
    else:
        count, need, unit = figures.queries_issued, settings.min_query_count, "queries"
        detail = f"{figures.sample_count} samples of at least {settings.min_sample_count}"
    checks.append(Check("min_queries", count, need, queries_ok, _relative(count - need, need), unit, detail))
    perf: bool | None = None
    early: bool | None = True
    checker: bool | None = True
    if settings.scenario == "Server":
        n = figures.queries_issued
        p, exact = settings.target_latency_percentile, figures.p99_exact
        ttft = _latency_check(
            "ttft_p99",
            figures.ttft_p99_ns,
            settings.ttft_limit_ns,
            "first-token latencies",
            figures.ttft_over,
            n,
            p,
            exact,
        )
        tpot = _latency_check(
            "tpot_p99",
            figures.tpot_p99_ns,
            settings.tpot_limit_ns,
            "output tokens per sample (TPOT)",
            figures.tpot_over,
            n,
            p,
            exact,
        )
        es_tpot = _early_stopping_check(
            "early_stopping_tpot", n, figures.tpot_over, settings.tpot_limit_ns, "per-sample TPOT"
        )
        es_ttft = _early_stopping_check(
            "early_stopping_ttft", n, figures.ttft_over, settings.ttft_limit_ns, "per-sample TTFT"
        )
        checks += [ttft, tpot, es_ttft, es_tpot]
        perf = all_met([ttft.ok, tpot.ok])
        early = all_met([es_tpot.ok, es_ttft.ok])
        checker = all_met([_strictly_under(ttft), _strictly_under(tpot)])
    valid = all_met([duration_ok, queries_ok, perf if settings.scenario == "Server" else True, early])
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
