"""One line across the dashboard once the run has ended: what happened, in the core's words.

Hidden while the run goes. Its colour says how it ended: every node finished, some did not, or the run
was interrupted; the words (``ended: 17 of 18 nodes finished, node07 down since 02:00``,
``INTERRUPTED at 07:44 (8.8 % of samples)``) are the snapshot's banner, never made up here.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import RenderResult
from textual.reactive import reactive
from textual.widget import Widget

from tokenwatch.base.formatting import printable
from tokenwatch.core.snapshot import RackSnapshot


def end_kind(snap: RackSnapshot) -> str:
    """``complete`` (every node finished), ``partial`` or ``interrupted``; empty while the run goes."""
    if not snap.ended:
        return ""
    if snap.end_reason == "interrupted":
        return "interrupted"
    return "complete" if all(state == "finished" for state in snap.nodes.state) else "partial"


class EndBanner(Widget):
    """Set ``snapshot``; shows ``snapshot.banner`` once the run has ended."""

    DEFAULT_CSS = """
    EndBanner {
        height: 1;
        display: none;
        padding: 0 1;
        text-style: bold;
        text-wrap: nowrap;
        text-overflow: ellipsis;
        color: $text;
        background: $success 40%;
    }
    EndBanner.-shown { display: block; }
    EndBanner.-partial { background: $warning 45%; }
    EndBanner.-interrupted { background: $error 60%; }
    """

    snapshot: reactive[RackSnapshot | None] = reactive(None, always_update=True)

    def watch_snapshot(self, snap: RackSnapshot | None) -> None:
        kind = end_kind(snap) if snap is not None else ""
        self.set_class(bool(kind), "-shown")
        self.set_class(kind == "partial", "-partial")
        self.set_class(kind == "interrupted", "-interrupted")

    def render(self) -> RenderResult:
        snap = self.snapshot
        if snap is None or not snap.ended:
            return Text("")
        mark = {"complete": "✓", "partial": "▲", "interrupted": "✗"}[end_kind(snap)]
        return Text(f"{mark} {printable(snap.banner or f'ended: {snap.end_reason}')}")
