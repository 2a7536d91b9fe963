"""Every key the dashboard answers to, in one table: the help screen and docs/dashboard.md come from it."""

from __future__ import annotations

KEY_TABLE: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = (
    (
        "Everywhere",
        (
            ("q, ctrl+c", "quit (a running recording is flushed and closed)"),
            ("?", "this help"),
            ("t", "next theme"),
            (
                "ctrl+p",
                "command palette: themes; Screenshot (an SVG in ~/Downloads, else the working directory)",
            ),
            ("tab, shift+tab", "move between panels (the dashboard scrolls to them)"),
            ("ctrl+l", "redraw the whole screen"),
        ),
    ),
    (
        "Dashboard",
        (
            ("s", "sort the node table by the next column"),
            ("S", "reverse the sort"),
            ("click a column title", "sort by that column (again: reverse)"),
            ("↑ ↓ pgup pgdn home end", "move in the node table"),
            ("enter, double click", "open the node screen"),
            ("m", "heatmap: next metric (out of sight: first scrolls to it)"),
            ("l", "latency: TTFT, TPOT, end-to-end (out of sight: first scrolls to it)"),
        ),
    ),
    (
        "Fleet board (a run of more than one rack)",
        (
            ("s", "sort the racks by the next column"),
            ("S", "reverse the sort"),
            ("click a column title", "sort by that column (again: reverse)"),
            ("↑ ↓ pgup pgdn home end", "move between racks"),
            (
                "enter, double click",
                "open the rack's dashboard (its nodes alone), or a group's rows or racks",
            ),
            ("a", "the dashboard of every node of the fleet"),
            (
                "escape",
                "back to the board (from a rack's or the fleet's dashboard); up a level (sites, rows)",
            ),
        ),
    ),
    (
        "Replay (dashboard, board and node screen)",
        (
            ("space", "pause / resume"),
            ("← →", "seek 1 minute back / forward"),
            ("shift+← shift+→", "seek 10 minutes"),
            ("+ -", "faster / slower"),
            ("g", "go to a run time (41:07, 30m, 1h5m)"),
            ("click the track", "seek there (dashboard)"),
        ),
    ),
    (
        "Node screen",
        (
            ("escape", "back to the dashboard"),
            ("[ ]", "previous / next node"),
        ),
    ),
)


def markdown_table() -> str:
    """The key table as Markdown, for the docs (docs/dashboard.md)."""
    lines = ["| key | what it does |", "|---|---|"]
    for section, keys in KEY_TABLE:
        lines.append(f"| **{section}** | |")
        lines += [f"| `{key}` | {what} |" for key, what in keys]
    return "\n".join(lines)
