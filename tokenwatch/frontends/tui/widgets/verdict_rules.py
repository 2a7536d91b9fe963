"""The MLPerf rules as rows: ✓ / ✗ / ? with the value now, its projection, the limit and the margin.

A rule that cannot be judged from the sources at hand says which source it needs, never a guess. Below
the rules: a decided verdict's reason and what stopping now saves (``why``), then, when there is room, the
start-of-run check's failures with the fix. The reason is what an engineer acts on: where the rows and
it do not all fit, rules that pass give way to it, never a failing or undecided one.
"""

from __future__ import annotations

import math
import textwrap

from rich.text import Text
from textual.app import RenderResult
from textual.reactive import reactive
from textual.widget import Widget

from tokenwatch.core.verdict.view import VerdictView, format_rule_value, rule_figure
from tokenwatch.frontends.tui.palette import Palette, palette
from tokenwatch.mlperf.forecast import RuleForecast

RULE_NAMES = {
    "min_duration": "min duration",
    "min_queries": "min queries",
    "ttft_p99": "TTFT p99",
    "tpot_p99": "TPOT p99",
    "early_stopping_ttft": "early stop TTFT",
    "early_stopping_tpot": "early stop TPOT",
    "every_node": "every node",
    "every_node_finished": "nodes finished",
}


def rule_symbol(ok: bool | None) -> str:
    """✓ projected to pass, ✗ to fail, ? undecided (readable without colour)."""
    return "✓" if ok else "✗" if ok is False else "?"


def margin_text(margin: float | None) -> str:
    if margin is None or not math.isfinite(margin):
        return ""
    pct = 100.0 * margin
    if abs(pct) >= 1000:
        return ">+999 %" if pct > 0 else "<-999 %"
    return f"{pct:+.1f} %" if abs(pct) < 10 else f"{pct:+.0f} %"


def rule_label(rule: RuleForecast) -> str:
    if rule.name == "min_queries" and rule.unit == "samples":
        return "min samples"
    return RULE_NAMES.get(rule.name, rule.name)


class VerdictRules(Widget):
    DEFAULT_CSS = """
    VerdictRules {
        width: 2fr;
        max-width: 64;
        min-width: 36;
        height: 1fr;
        text-wrap: nowrap;
        text-overflow: clip;
        padding: 0 1;
    }
    """

    view: reactive[VerdictView | None] = reactive(None, always_update=True)
    why = ""  # a decided verdict's sentence (set before ``view``, whose change draws it)

    def render(self) -> RenderResult:
        view = self.view
        if view is None:
            return Text("waiting for a run…", style="dim")
        pal = palette(self.app)
        width, height = self.content_size
        show_now = width >= 53
        rules, why = _fitted(view.forecast.rules, self.why, width, height - 1)
        # A latency has the latency table's digits: LoadGen's 1,500.0 ms fills ten columns (the longest
        # label, "early stop TTFT", fifteen).
        cols = (15, 10, 10, 9, 8) if show_now else (15, 0, 9, 8, 8)
        text = Text(no_wrap=True, overflow="crop")
        head = ["  rule".ljust(cols[0] + 2), "now".rjust(cols[1]) if show_now else ""]
        head += ["projected".rjust(cols[2]), "limit".rjust(cols[3]), "margin".rjust(cols[4])]
        # Each rule is read at its worst node: which one, past the margin, where a name fits.
        show_node = width >= sum(cols) + 2 + 8 and any(rule.node for rule in rules)
        if show_node:
            head.append("  node")
        text.append("".join(head), style=pal.muted)
        rows = 1
        for rule in rules:
            if rows >= height:
                break
            text.append("\n")
            text.append_text(self._row(rule, cols, show_now, pal, show_node))
            rows += 1
        for line in why:
            text.append("\n")
            text.append(line, style=pal.bad)
            rows += 1
        failing = [c for c in view.settings if c.ok is False]
        for check in failing:
            if rows >= height:
                break
            text.append("\n")
            text.append("✗ ", style=pal.bad)
            text.append(f"setting {check.name}: {check.fix}", style=pal.bad)
            rows += 1
        return text

    @staticmethod
    def _row(
        rule: RuleForecast, cols: tuple[int, ...], show_now: bool, pal: Palette, show_node: bool
    ) -> Text:
        style = pal.good if rule.ok else pal.bad if rule.ok is False else pal.warn
        row = Text(no_wrap=True, overflow="crop")
        row.append(rule_symbol(rule.ok) + " ", style=style)
        row.append(rule_label(rule).ljust(cols[0]), style=pal.text)
        if rule.missing:
            row.append(f"needs {rule.missing}", style=pal.muted)
            return row
        if show_now:
            row.append(rule_figure(rule.now, rule).rjust(cols[1]), style=pal.muted)
        row.append(rule_figure(rule.projected, rule).rjust(cols[2]), style=pal.text + style)
        row.append(format_rule_value(rule.limit, rule).rjust(cols[3]), style=pal.muted)
        tight = rule.margin is not None and rule.margin < 0.10
        row.append(margin_text(rule.margin).rjust(cols[4]), style=pal.warn if tight else pal.muted)
        if show_node and rule.node:
            row.append(f"  {rule.node}", style=pal.muted)
        return row


def _fitted(
    rules: tuple[RuleForecast, ...], why: str, width: int, rows: int
) -> tuple[tuple[RuleForecast, ...], list[str]]:
    """The rules to draw and the lines of ``why`` under them, within ``rows`` rows of ``width``: passing
    rules give way to the sentence (the last first); a sentence longer than what is left ends in "…"."""
    lines = textwrap.wrap(why, max(width, 10)) if why else []
    kept = list(rules)
    while len(kept) + len(lines) > rows and any(r.ok for r in kept):
        last_passing = max(i for i, r in enumerate(kept) if r.ok)
        del kept[last_passing]
    room = max(rows - len(kept), 0)
    if len(lines) > room:
        lines = lines[:room]
        if lines:
            lines[-1] = lines[-1][: max(width - 1, 1)].rstrip() + "…"
    return tuple(kept), lines
