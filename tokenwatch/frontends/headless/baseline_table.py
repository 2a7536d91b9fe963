"""``summarize --baseline``: the run against its reference as text, after the rack table."""

from __future__ import annotations

from tokenwatch.base.formatting import group, printable
from tokenwatch.core.baseline.compare import BaselineComparison
from tokenwatch.core.baseline.view import signed_pct

_MATCHED = {
    "name": "nodes matched by name",
    "rank": "nodes matched by rank (the i-th against the i-th)",
    "expected": "every node against the profile's expected node",
    "none": "no per-node figures in the baseline",
}


def render_baseline(comparison: BaselineComparison) -> str:
    """The rack figure and each node's against the baseline's, with how the nodes were matched; a node
    that stopped partway in either run says so at the end of its row, and the aggregate what it covers."""
    c = comparison
    lines = [
        f"Against the baseline {c.name} ({c.source}; {_MATCHED[c.matched_by]})",
        f"{'':<16}{'tokens/s':>14}{'baseline':>14}{'vs baseline':>13}",
        f"{'Total aggregate':<16}{group(c.run_tokens_per_s, 1):>14}{group(c.tokens_per_s, 1):>14}"
        f"{signed_pct(c.delta_pct):>13}",
        *([f"  covers {printable(c.covers)}"] if c.covers else []),
    ]
    for node in c.nodes:
        label = (
            node.name if node.baseline_node in (None, node.name) else f"{node.name} ~ {node.baseline_node}"
        )
        mark = node.mark()
        lines.append(
            f"{label:<16}{group(node.tokens_per_s, 1):>14}{group(node.baseline_tokens_per_s, 1):>14}"
            f"{signed_pct(node.delta_pct):>13}" + (f"  {printable(mark)}" if mark else "")
        )
    lines += [f"note: {note}" for note in c.notes]
    return "\n".join(lines)
