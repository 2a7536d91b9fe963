"""Entry point from the CLI: ``run_session`` hands over the session when a dashboard is wanted."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from tokenwatch.replay_player import ReplayPlayer
from tokenwatch.session import Session

if TYPE_CHECKING:
    from tokenwatch.exporter.server import MetricsServer


def run_dashboard(
    session: Session,
    args: argparse.Namespace,
    *,
    mode: str = "sim",
    replay_control: Any = None,
    exporter: MetricsServer | None = None,
) -> None:
    """Run the dashboard until the engineer quits; the session runs inside it.

    ``replay_control`` is the :class:`ReplayPlayer` of a seekable replay (anything else, e.g. a plain
    ``ReplayCollector``, replays without controls).
    """
    from tokenwatch.tui.app import TokenwatchApp

    player = replay_control if isinstance(replay_control, ReplayPlayer) else None
    if player is not None:
        player.bind(session)
    app = TokenwatchApp(
        session,
        mode=mode,
        player=player,
        theme=getattr(args, "theme", None),
        speed=getattr(args, "speed", None),
        exporter=exporter,
    )
    try:
        app.run()
    finally:
        # Belt and braces: whatever ended the app, the recording is complete and closed.
        if session.recorder is not None and not session.recorder.closed:
            session.recorder.close()
