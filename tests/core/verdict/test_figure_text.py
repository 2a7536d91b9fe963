"""A rule's figure has one form on every surface: the live panel's row (``rule_figure`` /
``format_rule_value``), the alerts' sentences (``describe_rule``) and the final check rows of the report and
``summarize`` (``check_cells``) write the same value the same way."""

from __future__ import annotations

import pytest

from tokenwatch.core.verdict.view import (
    check_cells,
    describe_rule,
    figure_text,
    format_rule_value,
    rule_figure,
)
from tokenwatch.mlperf.rules_forecast import RuleForecast
from tokenwatch.mlperf.verdict import Check


@pytest.mark.parametrize(
    ("name", "unit", "value", "text"),
    [
        # A LoadGen test run's min_duration (0.4 s): the live panel read "0 s" beside the summary's 400 ms.
        ("min_duration", "s", 0.425, "425 ms"),
        ("min_duration", "s", 45.3, "45.30 s"),
        ("min_duration", "s", 600.0, "600 s"),
        ("min_duration", "s", 4675.2, "4,675 s"),
        ("ttft_p99", "s", 2.0, "2.00 s"),
        ("tpot_p99", "s", 0.2, "200 ms"),
        ("min_queries", "samples", 24576.0, "24,576"),
        ("early_stopping_ttft", "samples", -1.0, "none"),
        ("min_queries", "samples", None, "—"),
    ],
)
def test_a_rule_and_its_final_check_write_one_figure(
    name: str, unit: str, value: float | None, text: str
) -> None:
    assert figure_text(value, name, unit) == text
    rule = RuleForecast(name, value, value, value, None, None, unit)
    check = Check(name, value, value, None, None, unit)
    mark, _, _, shown, limit, _ = check_cells(check)
    assert mark == "?"
    assert format_rule_value(value, rule) == limit == text
    assert rule_figure(value, rule) == shown  # a latency's value in the tables' digits on both


def test_the_alerts_sentence_says_a_short_runs_duration_as_the_tables_do() -> None:
    rule = RuleForecast("min_duration", 0.3, 0.38, 0.4, -0.05, False, "s")
    assert describe_rule(rule) == "min_duration projected 380 ms, limit 400 ms"
