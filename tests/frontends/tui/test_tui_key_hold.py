"""A key on the 64-rack board arrives sooner: nothing stands in front of it that need not.

The terminal's reader tells the session's :class:`InputHold` when a key comes; the session's ingest then
stops at its next step and sleeps, and the 4 Hz refresh draws nothing new, until the frame after the
key's action is sent (or the hold's limit passes: a key that draws nothing). And a key that only
reorders the board's rows (``s``) reuses the rows already drawn instead of building every one again.
What the user sees is the same either way; these tests hold the behaviour, never a time.
"""

from __future__ import annotations

import asyncio

from rich.segment import Segment
from rich.style import Style
from textual.geometry import Region
from textual.strip import Strip

from tests.conftest import PATIENCE_S, wait_until_async
from tests.frontends.tui.apps import fleet_board_shown
from tokenwatch.base.clock import ManualClock
from tokenwatch.base.loop_share import InputHold, LoopShare, LoopTurns
from tokenwatch.cli.parser import build_parser
from tokenwatch.cli.sim_settings import sim_settings
from tokenwatch.core import RackCore
from tokenwatch.core.fleet.table import FleetTable
from tokenwatch.frontends.tui.app import TokenwatchApp
from tokenwatch.frontends.tui.palette import Palette
from tokenwatch.frontends.tui.screens.fleet_screen import FleetScreen
from tokenwatch.frontends.tui.theme_loader import shipped_dir
from tokenwatch.frontends.tui.widgets.fleet_board import FleetBoard
from tokenwatch.inputs.sim.collector import SimulatorCollector
from tokenwatch.session import Session


def test_a_key_is_held_until_the_frame_after_its_action_is_sent() -> None:
    clock = ManualClock()
    hold = InputHold(hold_s=0.5, now=clock.time)
    assert not hold.held()
    hold.key_arrived()
    assert hold.held()
    hold.frame_sent()  # a frame already on its way when the key came: not the key's
    assert hold.held()
    hold.acted()
    hold.frame_sent()
    assert not hold.held()
    hold.acted()  # an action with no key on its way (a click, the timer) holds nothing
    assert not hold.held()


def test_a_key_whose_action_draws_nothing_is_held_no_longer_than_the_limit() -> None:
    clock = ManualClock()
    hold = InputHold(hold_s=0.5, now=clock.time)
    hold.key_arrived()
    clock.advance(0.49)
    assert hold.held()
    clock.advance(0.02)
    assert not hold.held()
    hold.key_arrived()  # the next key holds again; quitting lets go at once
    assert hold.held()
    hold.release()
    assert not hold.held()


class _CountedClock:
    """A clock that stands still and counts its readings (each is the consumer looking at its hold)."""

    def __init__(self) -> None:
        self.readings = 0

    def __call__(self) -> float:
        self.readings += 1
        return 1.0


async def test_a_held_key_ends_the_slice_and_the_consumer_sleeps_until_the_key_is_answered() -> None:
    clock = _CountedClock()
    share = LoopShare(work_s=PATIENCE_S, hold=InputHold(hold_s=1.0, now=clock))
    turns = LoopTurns(share)
    assert not turns.slice_over()  # a long slice, just begun
    share.hold.key_arrived()
    assert turns.slice_over()  # over at once: a key is on its way
    pause = asyncio.create_task(turns.pause())
    looked = clock.readings
    await wait_until_async(lambda: clock.readings >= looked + 5, "the consumer looking at its hold")
    assert not pause.done()  # still asleep: the key has not been answered
    share.hold.acted()
    share.hold.frame_sent()
    await wait_until_async(pause.done, "the consumer back at work once the key's frame was sent")
    assert not turns.slice_over()  # a new slice began when it woke


def _flood(share: LoopShare) -> Session:
    """``sim --racks 8 --speed 0``: never waiting, always behind (the 64-rack run's state, in small)."""
    args = build_parser().parse_args(["sim", "--racks", "8", "--duration", "8h", "--speed", "0"])
    collector = SimulatorCollector(sim_settings(args), speed=0)
    return Session(RackCore(), [collector], flush_interval_s=None, loop_share=share)


async def test_while_a_key_is_on_its_way_the_session_and_the_refresh_wait_for_its_frame() -> None:
    share = LoopShare(hold=InputHold(hold_s=10 * PATIENCE_S))  # only the key's frame ends this hold
    session = _flood(share)
    app = TokenwatchApp(session, mode="sim", speed=0, theme_dirs=[shipped_dir()], refresh_hz=20.0)
    async with app.run_test(size=(160, 50)) as pilot:
        await wait_until_async(
            lambda: fleet_board_shown(app) is not None, "the board with its racks", pause=pilot.pause
        )
        shown = fleet_board_shown(app)
        assert shown is not None
        share.hold.key_arrived()  # what the terminal's reader does as it reads a key
        ingested, refreshed, held = session.events_seen, app.refreshes, app.refreshes_held
        await wait_until_async(
            lambda: app.refreshes_held >= held + 3, "the refresh timer firing while held", pause=pilot.pause
        )
        assert app.refreshes == refreshed  # nothing new drawn in front of the key
        assert session.events_seen <= ingested + 1  # at most the event in hand when the key came
        sorted_by = shown.sort_key
        await pilot.press("s")
        await wait_until_async(
            lambda: not share.hold.held(), "the hold ended by the key's frame", pause=pilot.pause
        )
        assert shown.sort_key != sorted_by
        await wait_until_async(
            lambda: session.events_seen > ingested + 1 and app.refreshes > refreshed,
            "the session and the refresh going on after the key",
            pause=pilot.pause,
        )
        assert not session.core.ended
        await pilot.press("q")


def _lines(board: FleetBoard) -> list[list[Segment]]:
    """The board's lines as Textual would draw them now (its own line cache emptied first)."""
    board.refresh()
    region = Region(0, 0, board.size.width, board.size.height)
    return [list(strip) for strip in board.render_lines(region)]


async def test_a_sort_reuses_the_rows_drawn_and_shows_what_a_board_drawn_afresh_shows() -> None:
    share = LoopShare()
    session = _flood(share)
    app = TokenwatchApp(session, mode="sim", speed=0, theme_dirs=[shipped_dir()])
    async with app.run_test(size=(160, 50)) as pilot:
        await wait_until_async(
            lambda: (
                isinstance(app.screen, FleetScreen)
                and app.screen.is_mounted
                and app.screen.query_one(FleetBoard).table is not None
            ),
            "the board with its racks",
            pause=pilot.pause,
        )
        session.stop()  # the figures stand still from here: the same table throughout
        await wait_until_async(lambda: app.session.stopped, "the session stopped", pause=pilot.pause)
        app.refresh_data(force=True)
        board = app.screen.query_one(FleetBoard)
        table = board.table
        assert table is not None
        assert len(table) == 8
        _lines(board)  # every row drawn once
        built: list[int] = []
        draw_row = board._row_strip

        def counted(table: FleetTable, i: int, pal: Palette, base: Style, width: int) -> Strip:
            built.append(1)
            return draw_row(table, i, pal, base, width)

        board._row_strip = counted  # type: ignore[method-assign]
        for _ in board.SORT_KEYS:
            board.cycle_sort()  # what s does
            shown = _lines(board)
            assert board.table is table
            # Two rows at most change how they look: the cursor leaves one and lands on another.
            assert len(built) <= 2, len(built)
            built.clear()
            board._drawn_rows.clear()  # the same board drawn from nothing
            assert _lines(board) == shown
            built.clear()
        await pilot.press("q")
