"""The report's cause hints: every straggler of the run with the hint it was raised with (and any later
one), and the GPUs' power-limit changes, each at its run time."""

from __future__ import annotations

from tokenwatch.base.durations import format_clock
from tokenwatch.base.formatting import group
from tokenwatch.core.alerts import AlertSpan
from tokenwatch.frontends.report.page import note, section, table
from tokenwatch.runs.run_data import RunData

SECTION_ID = "causes"
TITLE = "Why nodes were slow"


def straggler_hint(span: AlertSpan) -> tuple[str, str]:
    """(how far below the median, the hint) from a straggler alert's words
    (``node11 straggler: 6.2% below the median node; <hint>``)."""
    head, _, hint = span.message.partition("; ")
    below = head.split(": ", 1)[-1]
    return below, hint


def cause_section(run: RunData) -> str:
    spans = [s for s in run.alert_spans if s.kind in ("straggler", "cause")]
    changes = run.snapshot.power_limit_changes if run.snapshot is not None else ()
    if run.snapshot is None:
        return section(SECTION_ID, TITLE, note("Result folders hold no telemetry: no cause hints."))
    if not spans and not changes:
        return section(SECTION_ID, TITLE, note("No straggler and no power-limit change during the run."))
    parts = []
    if spans:
        rows = []
        for span in spans:
            end = "—" if span.end is None else format_clock(span.end)
            if span.kind == "straggler":
                below, hint = straggler_hint(span)
                rows.append([span.node or "", format_clock(span.start), end, below, hint or "—"])
            else:  # the hint changed while the node was a straggler
                hint = span.message.split("now: ", 1)[-1]
                rows.append([span.node or "", format_clock(span.start), "", "hint now", hint])
        parts.append(table(["node", "from", "to", "how slow", "cause hint"], rows, table_id="causes-table"))
        parts.append(
            note(
                "Each hint weighs the evidence over the straggler test's window against the rack's typical "
                "GPU: power-limit changes, XID and NVLink errors, SM clock and its clock-event reasons, "
                "temperature, HBM use, utilisation, and the engine's queue where the server reports one."
            )
        )
    if changes:
        change_rows = [
            [format_clock(c.t), c.node, c.where(), f"{group(c.old_w)} -> {group(c.new_w)} W"] for c in changes
        ]
        parts.append(
            table(["time", "node", "GPUs", "power limit"], change_rows, table_id="power-limit-table")
        )
    return section(SECTION_ID, TITLE, *parts)
