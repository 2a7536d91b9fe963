"""The dashboard answers while its input is behind: a fleet simulated faster than it can be ingested.

``tokenwatch sim --racks 64 --speed 60`` makes more work than one core ingests, so the session's queue
never empties. The dashboard's session shares the loop (:mod:`tokenwatch.base.loop_share`): it works a
slice at a time, lets the loop in between, and its queue holds a bounded backlog. Held here with a
simulator that never waits (speed 0: always behind), whatever the machine: the loop gets a turn every few
ticks of ingest, never once per 64 events as when only the producer yielded; the queue stays within its
backlog; and a key pressed on the fleet board is answered while the flood goes on.
"""

from __future__ import annotations

import asyncio

from tests.conftest import wait_until_async
from tests.frontends.tui.apps import fleet_board_shown
from tokenwatch.base.clock import ManualClock
from tokenwatch.base.loop_share import LoopShare
from tokenwatch.cli.parser import build_parser
from tokenwatch.cli.sim_settings import sim_settings
from tokenwatch.core import RackCore
from tokenwatch.frontends.tui.app import TokenwatchApp
from tokenwatch.frontends.tui.screens.fleet_screen import FleetScreen
from tokenwatch.frontends.tui.theme_loader import shipped_dir
from tokenwatch.inputs.sim.collector import SimulatorCollector
from tokenwatch.session import Session

SHARE = LoopShare()
TICKS_WATCHED = 40
# A 16-rack tick (1,152 GPUs' batch and the fleet's forecasts every 10 s) is several ms of ingest on any
# machine, so a slice of SHARE.work_s holds a few ticks; a loop turn per 64 events was 32 ticks.
MOST_TICKS_BETWEEN_TURNS = 16


def flood(racks: int, duration: str = "8h") -> Session:
    """A session fed by ``sim --racks N --speed 0`` (never waiting: always behind), sharing the loop as
    the dashboard's does."""
    args = build_parser().parse_args(["sim", "--racks", str(racks), "--duration", duration, "--speed", "0"])
    collector = SimulatorCollector(sim_settings(args), speed=0)
    return Session(RackCore(), [collector], flush_interval_s=None, loop_share=SHARE)


async def test_the_loop_gets_a_turn_every_few_ticks_while_the_queue_never_empties() -> None:
    session = flood(16)
    run = asyncio.create_task(session.run())
    ticks_between_turns: list[float] = []
    most_queued = 0
    try:
        # Past the run's start (its 1,152 nodes' statuses and LoadGen details are small events).
        await wait_until_async(lambda: session.core.started and session.core.now >= 2.0, "ticks flowing")
        first = last_now = session.core.now
        while session.core.now < first + TICKS_WATCHED:
            await asyncio.sleep(0)  # one turn of the loop, as a key's every callback takes
            now = session.core.now
            ticks_between_turns.append(now - last_now)
            most_queued = max(most_queued, session.queue.qsize())
            last_now = now
        assert not session.core.ended  # the flood went on all along
    finally:
        session.stop()
        await run
    assert max(ticks_between_turns) <= MOST_TICKS_BETWEEN_TURNS, max(ticks_between_turns)
    assert most_queued <= SHARE.backlog


async def test_a_key_on_the_fleet_board_is_answered_while_the_input_is_behind() -> None:
    session = flood(8)
    app = TokenwatchApp(session, mode="sim", speed=0, theme_dirs=[shipped_dir()])
    async with app.run_test(size=(160, 50)) as pilot:
        await wait_until_async(
            lambda: fleet_board_shown(app) is not None, "the fleet board with its racks", pause=pilot.pause
        )
        shown = fleet_board_shown(app)
        assert shown is not None
        sorted_by, ingested = shown.sort_key, session.events_seen
        await pilot.press("s")
        await wait_until_async(lambda: shown.sort_key != sorted_by, "the next sort column", pause=pilot.pause)
        assert session.events_seen > ingested  # the input was being ingested meanwhile
        assert not session.core.ended
        assert not session.stopped


async def test_the_badge_says_the_pace_a_sim_behind_keeps() -> None:
    clock = ManualClock()
    args = build_parser().parse_args(["sim", "--racks", "2", "--duration", "1h", "--speed", "60"])
    collector = SimulatorCollector(sim_settings(args), speed=60, clock=clock)
    app = TokenwatchApp(Session(RackCore(), [collector]), mode="sim", speed=60, theme_dirs=[shipped_dir()])
    assert app.badge() == "SIM x60"
    for k in range(600):  # each run second ingested in 50 ms of wall time: x20
        await collector.pacer.wait_until(float(k))
        clock.advance(0.05)
    assert app.badge() == "SIM x60 · behind, x20"
    for k in range(600, 1200):  # on pace again
        await collector.pacer.wait_until(float(k))
    assert app.badge() == "SIM x60"


class _FleetNotStarted:
    """An input that says its run has three racks and sends nothing yet (its run start is still coming)."""

    name = "fleet input"
    run_racks = 3

    async def run(self, _emit: object) -> None:
        await asyncio.Event().wait()


def test_the_simulator_says_how_many_racks_its_run_has() -> None:
    for racks in (1, 3, 64):
        args = build_parser().parse_args(["sim", "--racks", str(racks), "--speed", "0"])
        assert SimulatorCollector(sim_settings(args), speed=0).run_racks == racks


async def test_a_fleet_said_before_its_run_starts_is_drawn_on_the_board_from_the_first_frame() -> None:
    """Not the rack's dashboard first, replaced at the first snapshot: its compose, styles and first frame
    were a good part of a 64-rack first frame."""
    session = Session(RackCore(), [_FleetNotStarted()], flush_interval_s=None, loop_share=SHARE)
    app = TokenwatchApp(session, mode="sim", speed=60, theme_dirs=[shipped_dir()])
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, FleetScreen)
        assert not session.core.started
        await pilot.press("q")
