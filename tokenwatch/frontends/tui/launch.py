"""Entry point from the CLI: ``run_session`` hands over the session when a dashboard is wanted."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from tokenwatch.base.events import RunMode
from tokenwatch.session import Session

if TYPE_CHECKING:
    from tokenwatch.frontends.tui.app import TokenwatchApp
    from tokenwatch.inputs.replay.player import ReplayPlayer  # a replay's own: sim never loads it


def run_dashboard(
    session: Session,
    *,
    mode: RunMode = "sim",
    theme: str | None = None,
    speed: float | None = None,
    player: ReplayPlayer | None = None,
    on_start: Callable[[TokenwatchApp], None] | None = None,
) -> None:
    """Run the dashboard until the engineer quits; the session runs inside it.

    ``player``: a replay's player, bound here to the session so the dashboard can pause, change speed
    and seek. ``on_start``: called with the app once it runs, on its event loop (the /metrics server
    attaches, stop signals quit it).
    """
    from tokenwatch.frontends.tui.app import TokenwatchApp

    if player is not None:
        player.bind(session)
    app = TokenwatchApp(session, mode=mode, player=player, theme=theme, speed=speed, on_start=on_start)
    try:
        app.run()
    finally:
        # Belt and braces: whatever ended the app, the recording is complete and closed.
        if session.recorder is not None and not session.recorder.closed:
            session.recorder.close()
