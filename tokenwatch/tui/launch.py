"""Entry point from the CLI: ``run_session`` hands over the session when a dashboard is wanted."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tokenwatch.collectors.replay import ReplayPlayer
from tokenwatch.session import Session

if TYPE_CHECKING:
    from tokenwatch.exporter.server import MetricsServer


def run_dashboard(
    session: Session,
    *,
    mode: str = "sim",
    theme: str | None = None,
    speed: float | None = None,
    player: ReplayPlayer | None = None,
    exporter: MetricsServer | None = None,
) -> None:
    """Run the dashboard until the engineer quits; the session runs inside it.

    ``player``: a replay's player, bound here to the session so the dashboard can pause, change speed
    and seek. ``exporter``: a /metrics server that reads the core on the app's loop.
    """
    from tokenwatch.tui.app import TokenwatchApp

    if player is not None:
        player.bind(session)
    app = TokenwatchApp(session, mode=mode, player=player, theme=theme, speed=speed, exporter=exporter)
    try:
        app.run()
    finally:
        # Belt and braces: whatever ended the app, the recording is complete and closed.
        if session.recorder is not None and not session.recorder.closed:
            session.recorder.close()
