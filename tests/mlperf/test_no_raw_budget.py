"""Early stopping's budget of -1 (a Server run too short to pass it whatever its latencies) is never shown
raw: alerts read 'early_stopping_ttft projected 0, limit -1' where LoadGen says 'Processed 80 queries.
Would need to run at least 379 more queries'."""

from __future__ import annotations

import orjson

from tests.conftest import RunCli
from tests.sources.conftest import LOADGEN
from tokenwatch.core.verdict.view import describe_rule, format_rule_value
from tokenwatch.mlperf.early_stopping import overlatency_budget, queries_needed
from tokenwatch.mlperf.forecast import RuleForecast

SERVER_SHORT = LOADGEN / "generated" / "server-short"  # real LoadGen: 80 queries, early stopping failed


def test_summarize_of_a_run_too_short_for_early_stopping_says_why_in_loadgens_words(run_cli: RunCli) -> None:
    result = run_cli("summarize", str(SERVER_SHORT), "--json")
    assert result.returncode == 0, result.stderr
    verdict = orjson.loads(result.stdout)["verdict"]
    checks = {c["name"]: c for c in verdict["checks"] if c["name"].startswith("early_stopping")}
    assert checks
    assert overlatency_budget(80) == -1  # the reason: under 459 queries none passes
    for check in checks.values():
        assert check["limit"] is None
        assert check["margin"] is None  # no budget to have a margin to
        assert check["ok"] is False
        assert "Would need to run at least" in check["detail"]


def test_a_projected_early_stopping_rule_with_no_budget_reads_in_words() -> None:
    rule = RuleForecast("early_stopping_ttft", 0.0, 0.0, -1.0, None, False, "samples")
    assert format_rule_value(rule.limit, rule) == "none"
    said = describe_rule(rule)
    assert "-1" not in said
    assert f"LoadGen needs at least {queries_needed(0)}" in said
