"""The headless line says DECIDED INVALID, why and what stopping now saves, once a node is down for good;
a projection until then (the reproducer: a node down for good was PROJECTED VALID until the end)."""

from __future__ import annotations

import re

from tests.conftest import RunCli
from tokenwatch.base.durations import format_clock
from tokenwatch.core.verdict import LOST_AFTER_DOWN_S


def test_the_headless_line_says_decided_invalid_once_a_node_is_down_for_good(run_cli: RunCli) -> None:
    args = ("--duration", "40m", "--faults", "node07:down@5m", "--interval", "1m")
    result = run_cli("sim", "--speed", "0", "--headless", *args)
    assert result.returncode == 0, result.stderr
    lines = {line[:5]: line for line in result.stdout.splitlines() if re.match(r"\d\d:\d\d ", line)}
    lost_at = format_clock(300.0 + LOST_AFTER_DOWN_S)  # 15:00, a minute boundary: the line at it
    assert "proj " in lines["14:00"]
    assert "DECIDED INVALID" not in lines["14:00"]
    assert re.search(
        r" proj [\d,]+k ±[\d.]+ % DECIDED INVALID \(cannot be VALID: node07 down since 05:00, its LoadGen "
        r"cannot finish; stopping now saves \d+ min x 72 GPUs\)",
        lines[lost_at],
    ), lines[lost_at]
    assert any("FINAL INVALID" in line for line in result.stdout.splitlines())
