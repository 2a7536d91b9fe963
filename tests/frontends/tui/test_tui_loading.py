"""A slow start in the dashboard says what it loads, with progress: the header's state reads
``⧗ loading FILE up to 84:35:  43 %`` while a replay plays up to its start (a large recording's --start
takes seconds), and ``● running`` once it is there. The same :class:`~tokenwatch.base.loading.Loading` a
watch sets while it reads its nodes' backlogs.

The quiet half second is set to 0 here, so the line shows however fast the machine plays the 84-minute
node-failure sample up to its end (several seconds on the shared machine); the quiet rule itself is
tested with a stepped clock in tests/cli/test_loading_note.py.
"""

from __future__ import annotations

import re

import pytest
from textual.widgets import Static

from tests.conftest import PATIENCE_S, wait_until_async
from tests.frontends.tui.apps import NODE_FAILURE, end_of, replay_app, settle
from tokenwatch.base import loading as loading_module
from tokenwatch.base.formatting import format_clock


async def test_a_replay_started_at_its_end_says_what_it_loads_until_it_is_there(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(loading_module, "QUIET_S", 0.0)
    end = end_of(NODE_FAILURE)
    app = replay_app(NODE_FAILURE, end)
    words = f"⧗ loading {NODE_FAILURE.name} up to {format_clock(end)}: "
    seen: list[int] = []

    def state_now() -> str:
        return str(app.screen.query_one("#state", Static).render())

    async with app.run_test(size=(200, 60)) as pilot:

        def note_progress() -> bool:
            shown = state_now()
            if shown.startswith(words):
                seen.append(int(re.fullmatch(r"\s*(\d+) %", shown[len(words) :]).group(1)))  # type: ignore[union-attr]
            player = app.player
            return player is not None and not player.seeking and player.position_s >= end - 1

        # The whole recording is loaded first: 41 s alone at load 20, so the ceiling is more than the usual.
        await wait_until_async(
            note_progress,
            "the replay at its end, the loading said meanwhile",
            timeout_s=2 * PATIENCE_S,
            pause=pilot.pause,
        )
        await settle(pilot, app)
        assert seen, "the header never said what it was loading"
        assert seen == sorted(seen)
        assert all(0 <= share <= 100 for share in seen)
        assert app.session.loading() is None
        assert app.player is not None
        assert app.player.loading is not None
        assert app.player.loading.share == pytest.approx(1.0)
        assert not state_now().startswith("⧗")  # there: the run's state again
