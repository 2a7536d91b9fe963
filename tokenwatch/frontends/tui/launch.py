"""Entry point from the CLI: ``run_session`` hands over the session when a dashboard is wanted."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from tokenwatch.inputs.replay.player import ReplayPlayer
from tokenwatch.session import Session


def run_dashboard(
    session: Session,
    *,
    mode: str = "sim",
    theme: str | None = None,
    speed: float | None = None,
    player: ReplayPlayer | None = None,
    on_loop: Callable[[asyncio.AbstractEventLoop], None] | None = None,
) -> None:
    """Run the dashboard until the engineer quits; the session runs inside it.

    ``player``: a replay's player, bound here to the session so the dashboard can pause, change speed
    and seek. ``on_loop``: called with the app's event loop once it runs (the /metrics server attaches).
    """
    from tokenwatch.frontends.tui.app import TokenwatchApp

    if player is not None:
        player.bind(session)
    app = TokenwatchApp(session, mode=mode, player=player, theme=theme, speed=speed, on_loop=on_loop)
    try:
        app.run()
    finally:
        # Belt and braces: whatever ended the app, the recording is complete and closed.
        if session.recorder is not None and not session.recorder.closed:
            session.recorder.close()
