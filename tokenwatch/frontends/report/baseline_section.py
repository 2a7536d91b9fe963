"""``report RUN --baseline B``: the run against its reference, as a section (the throughput chart carries
the reference's line: :func:`tokenwatch.frontends.report.run_sections.throughput_section`)."""

from __future__ import annotations

import math

from tokenwatch.base.formatting import group
from tokenwatch.core.baseline.compare import BaselineComparison
from tokenwatch.core.baseline.view import signed_pct
from tokenwatch.frontends.report.page import cards, note, section, table

_MATCHED = {
    "name": "Nodes are matched by name.",
    "rank": "The runs share no node names: nodes are matched by rank (the i-th against the i-th).",
    "expected": "Every node is held against the profile's expected node (the simulator's, at the "
    "profile's published mean per node).",
    "none": "The baseline is one system result: it has no per-node figures to hold nodes against.",
}


def baseline_section(comparison: BaselineComparison) -> str:
    """Cards for the rack figure (flagged with what it covers where a node of either run stopped partway),
    a table of every node's figure against its counterpart's with what either did, and notes."""
    c = comparison
    parts = [
        cards(
            [
                ("vs baseline", signed_pct(c.delta_pct)),
                ("this run tokens/s", group(c.run_tokens_per_s)),
                ("baseline tokens/s", group(c.tokens_per_s)),
            ],
            {"vs baseline": f"covers {c.covers}"} if c.covers else None,
        )
    ]
    rows, cell_css = [], []
    for node in c.nodes:
        rows.append(
            [
                node.name,
                node.baseline_node or "—",
                group(node.tokens_per_s, 1),
                group(node.baseline_tokens_per_s, 1),
                signed_pct(node.delta_pct),
                node.mark(),
            ]
        )
        slow = math.isfinite(node.delta_pct) and node.delta_pct <= -2.0
        cell_css.append(["", "", "", "", "bad" if slow else "", "bad" if node.mark() else ""])
    parts.append(
        table(
            ["node", "baseline node", "tokens/s", "baseline tokens/s", "vs baseline", "stopped partway"],
            rows,
            cell_classes=cell_css,
            table_id="baseline-table",
        )
    )
    parts.append(
        note(
            f"Baseline: {c.name} ({c.source}). Each figure is a node's generated tokens over its own "
            f"measured duration; the rack's is the sum. {_MATCHED[c.matched_by]}"
        )
    )
    parts += [note(n) for n in c.notes]
    return section("baseline", f"Against the baseline {c.name}", *parts)
