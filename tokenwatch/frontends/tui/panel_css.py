"""The look the dashboard's bordered panels share (GPU heatmap, node table, latency histogram, node
spread, alerts), written once so that they cannot drift apart."""

from __future__ import annotations


def panel_css(widget: str, *, min_height: int = 6) -> str:
    """A ``DEFAULT_CSS`` rule for the panel class named ``widget``: a round border in the theme's primary
    colour at half strength with its title in full, a share of the free height, and at least
    ``min_height`` rows (border included)."""
    return f"""
    {widget} {{
        border: round $primary 50%;
        border-title-color: $primary;
        height: 1fr;
        min-height: {min_height};
    }}
    """
