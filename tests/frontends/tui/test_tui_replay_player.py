"""The seekable replay: every seek must leave the core exactly as a straight replay to that time would."""

from __future__ import annotations

import asyncio
import itertools
import math
from pathlib import Path
from typing import TypedDict, Unpack

import numpy as np
import pytest

from tests.conftest import wait_until_async
from tests.frontends.tui.apps import NODE_FAILURE, OFFLINE, SERVER, core_until
from tokenwatch.base.clock import ManualClock
from tokenwatch.base.events import Notice, RunEnded
from tokenwatch.core import RackCore, RackSnapshot
from tokenwatch.inputs.replay.controls import SPEEDS
from tokenwatch.inputs.replay.player import ReplayPlayer
from tokenwatch.recording import RecordingReader, RecordingWriter
from tokenwatch.session import Session


def assert_same(a: RackSnapshot, b: RackSnapshot) -> None:
    assert a.t == b.t
    assert a.ended == b.ended
    for field in (
        "tokens_per_s",
        "tokens_per_s_cumulative",
        "power_w",
        "energy_j",
        "tokens_done",
        "nodes_up",
    ):
        x, y = getattr(a.aggregate, field), getattr(b.aggregate, field)
        assert x == y or (math.isnan(x) and math.isnan(y)), field
    np.testing.assert_array_equal(a.nodes.tokens_per_s, b.nodes.tokens_per_s)
    np.testing.assert_array_equal(a.nodes.sparkline_tokens_per_s, b.nodes.sparkline_tokens_per_s)
    np.testing.assert_array_equal(a.gpus.values, b.gpus.values)
    np.testing.assert_array_equal(a.timeline.tokens_per_s, b.timeline.tokens_per_s)
    assert a.nodes.state == b.nodes.state
    assert a.alerts == b.alerts


class PlayerOptions(TypedDict, total=False):
    speed: float
    start_s: float
    paused: bool
    keyframe_every_s: float
    keyframe_budget_bytes: int


async def started(
    path: Path, **kwargs: Unpack[PlayerOptions]
) -> tuple[ReplayPlayer, Session, asyncio.Task[None]]:
    player = ReplayPlayer(path, **kwargs)
    session = Session(RackCore(), [player], flush_interval_s=None)
    player.bind(session)
    return player, session, asyncio.create_task(session.run())


async def until_settled(player: ReplayPlayer) -> None:
    await asyncio.sleep(0)  # one turn of the loop: a player just started takes up its start time
    await wait_until_async(lambda: not player.seeking, "the seek's end", poll_s=0.005)


async def until_at_end(player: ReplayPlayer) -> None:
    await wait_until_async(lambda: player.at_end, "the replay's end", poll_s=0.005)


async def test_start_time_matches_a_straight_replay() -> None:
    player, session, task = await started(OFFLINE, speed=0, start_s=600, paused=True)
    await until_settled(player)
    assert player.position_s == 600
    assert_same(session.core.snapshot(), core_until(OFFLINE, 600).snapshot())
    session.stop()
    await task


@pytest.mark.parametrize("targets", [(1500.0, 300.0), (1500.0, 734.5, 1800.0), (900.0, 0.0)])
async def test_seeks_back_and_forth_rebuild_the_same_core(targets: tuple[float, ...]) -> None:
    player, session, task = await started(NODE_FAILURE, speed=0, start_s=targets[0], paused=True)
    await until_settled(player)
    for target in targets[1:]:
        player.seek(target)
        await until_settled(player)
        assert_same(session.core.snapshot(), core_until(NODE_FAILURE, target).snapshot())
        assert player.position_s == session.core.now
    session.stop()
    await task


async def test_keyframes_are_taken_on_the_first_pass_and_used_going_back() -> None:
    player, session, task = await started(OFFLINE, speed=0, start_s=1500, paused=True, keyframe_every_s=300)
    await until_settled(player)
    # 0 (empty core) plus one each time play passed a multiple of 300 s: 300, 600, 900 and 1200 (the one
    # for 1500 comes once play goes past it, and the player stopped at 1500).
    assert player.keyframe_count == 1 + 4
    core_before = session.core
    player.seek(650)
    await until_settled(player)
    assert session.core is not core_before  # rebuilt from a keyframe and swapped in
    assert_same(session.core.snapshot(), core_until(OFFLINE, 650).snapshot())
    session.stop()
    await task


async def test_keyframe_budget_thins_keyframes() -> None:
    player, session, task = await started(
        OFFLINE, speed=0, start_s=1200, paused=True, keyframe_every_s=60, keyframe_budget_bytes=1
    )
    await until_settled(player)
    assert player.keyframe_count <= 4  # the budget allows the floor of 4
    player.seek(100)
    await until_settled(player)
    assert_same(session.core.snapshot(), core_until(OFFLINE, 100).snapshot())
    session.stop()
    await task


async def test_the_end_keeps_the_session_open_and_seeks_back() -> None:
    player, session, task = await started(SERVER, speed=0)
    await until_at_end(player)
    assert session.core.ended
    assert not task.done()
    player.pause()
    player.seek(120)
    await until_settled(player)
    assert not session.core.ended
    assert_same(session.core.snapshot(), core_until(SERVER, 120).snapshot())
    session.stop()
    await task


async def test_pause_holds_the_position() -> None:
    player, session, task = await started(OFFLINE, speed=0, start_s=60, paused=True)
    await until_settled(player)
    seen = session.events_seen
    await asyncio.sleep(0.05)  # a quiet spell in which a paused player must play nothing
    assert session.events_seen == seen
    assert player.position_s == 60
    player.resume()
    await wait_until_async(lambda: player.position_s > 300, "play past 300 s")
    player.pause()
    await asyncio.sleep(0.01)  # the event being handed over when paused lands
    held = player.position_s
    assert held > 60
    await asyncio.sleep(0.05)  # a quiet spell, as above
    assert player.position_s == held
    session.stop()
    await task


def test_pacing_follows_the_speed_and_restarts_after_changes() -> None:
    clock = ManualClock(start=100.0)
    player = ReplayPlayer(OFFLINE, speed=30, clock=clock)
    player.resume()  # playing from the current position (0) from now on
    # Run time 60 s ahead at x30 is due in 2 s of wall time.
    assert player.pacer.delay_until(60.0) == pytest.approx(2.0)
    clock.advance(1.5)
    assert player.pacer.delay_until(60.0) == pytest.approx(0.5)
    player.set_speed(60)  # a new speed re-anchors at the current position
    assert player.pacer.delay_until(60.0) == pytest.approx(1.0)


def test_speed_steps() -> None:
    player = ReplayPlayer(OFFLINE, speed=1)
    ups = []
    for _ in range(len(SPEEDS)):
        player.faster()
        ups.append(player.speed)
    assert ups == [2, 5, 10, 30, 60, 120, 300, 600, 0, 0, 0, 0]  # 0 = as fast as possible, the top
    player.slower()
    assert player.speed == 600
    player.set_speed(0.25)
    player.slower()
    assert player.speed == 0.25


async def test_no_seeking_back_while_recording(tmp_path: Path) -> None:
    recorder = RecordingWriter(tmp_path / "copy.jsonl")
    player = ReplayPlayer(SERVER, speed=0, start_s=300, paused=True)
    session = Session(RackCore(), [player], recorder=recorder, flush_interval_s=None)
    player.bind(session)
    task = asyncio.create_task(session.run())
    await until_settled(player)
    player.seek(100)
    await until_settled(player)
    assert player.position_s == 300
    assert "recording" in player.message
    player.seek(400)  # forward still works: it plays through the recorder
    await until_settled(player)
    assert player.position_s == 400
    session.stop()
    await task
    assert recorder.closed
    copied = list(RecordingReader(tmp_path / "copy.jsonl").events())
    assert copied[-1].t == 400
    assert all(a.t <= b.t for a, b in itertools.pairwise(copied))


async def test_damaged_recording_warnings_arrive_as_notices_once_per_core(tmp_path: Path) -> None:
    events = list(RecordingReader(SERVER).events())[:400]
    path = tmp_path / "torn.jsonl"
    with RecordingWriter(path) as writer:
        for event in events:
            writer.write(event)
    with open(path, "ab") as fh:
        fh.write(b'{"not": "an event"}\n{"torn')
    player, session, task = await started(path, speed=0)
    seen: list[Notice] = []
    session.on_event(lambda e: seen.append(e) if isinstance(e, Notice) else None)
    await until_at_end(player)
    await wait_until_async(lambda: len(seen) >= 2, "the two warnings as notices")
    assert len(seen) == len(player.warnings) == 2
    assert "torn last line" in seen[1].message
    player.pause()
    player.seek(0)  # back past the end: the rebuilt core has no warnings until the end comes again
    await until_settled(player)
    assert not [a for a in session.core.state.alerts.newest_first() if "skipped" in a.message]
    player.seek(10_000)
    player.resume()
    await until_at_end(player)

    def skipped() -> list[str]:
        return [a.message for a in session.core.state.alerts.newest_first() if "skipped" in a.message]

    await wait_until_async(lambda: len(skipped()) >= len(player.warnings), "the warnings in the core again")
    in_core = skipped()
    assert sorted(in_core) == sorted(player.warnings)  # each warning once in the core, not twice
    assert not any(isinstance(e, RunEnded) for e in events)  # the cut-off run never ended
    session.stop()
    await task
