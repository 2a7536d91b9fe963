"""The seekable replay holds a bounded window, not the recording.

The dashboard's player used to keep every event to seek back (2.3 GB for 8 racks x 8 hours); it now
keeps file positions and compressed keyframes and reads the file again when it seeks. Memory itself is
measured by benchmarks/bench_replay_memory.py; here: what stays alive, and that seeks are still exact.
"""

from __future__ import annotations

import asyncio
import gc
import random
from pathlib import Path

import pytest

from tests.conftest import PATIENCE_S, wait_until_async
from tests.frontends.tui.apps import NODE_FAILURE, OFFLINE, core_until
from tests.frontends.tui.test_tui_replay_player import assert_same, started, until_settled
from tokenwatch.base.events import GpuBatch
from tokenwatch.core import RackCore
from tokenwatch.inputs.replay import tape as replay_tape
from tokenwatch.inputs.replay.player import ReplayPlayer
from tokenwatch.recording import RecordingReader, RecordingWriter
from tokenwatch.session import Session

QUEUE = 256


def batches_alive() -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, GpuBatch))


async def test_a_bound_replay_keeps_no_more_than_its_window(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(replay_tape, "WINDOW_EVENTS", 1000)
    total = sum(1 for e in RecordingReader(OFFLINE).events() if isinstance(e, GpuBatch))
    assert total > 4000
    before = batches_alive()
    # The session's queue is bounded too (4,096 events by default, more than this recording's batches):
    # a small one here, so that what the window holds is what the bound below measures, however far the
    # core lags behind the player on a loaded machine.
    player = ReplayPlayer(OFFLINE, speed=0)
    session = Session(RackCore(), [player], flush_interval_s=None, queue_size=QUEUE)
    player.bind(session)
    task = asyncio.create_task(session.run())
    most = 0

    def at_end_noting_the_most() -> bool:
        nonlocal most
        most = max(most, batches_alive() - before)
        return player.at_end

    # Each look runs the garbage collector over the whole heap: looked at ten times a second (hundreds of
    # looks over the replay), with a ceiling for a loaded machine, where 60 s did not see the end once.
    await wait_until_async(at_end_noting_the_most, "the replay's end", timeout_s=4 * PATIENCE_S, poll_s=0.1)
    # The window (1,000 events, plus the chunk being handed over) and what the core and the queue (at most
    # QUEUE events) hold now, never the recording's thousands of batches.
    assert most < 2000, most
    player.pause()
    player.seek(1200)  # and it still seeks back, from a keyframe and the file
    await until_settled(player)
    assert_same(session.core.snapshot(), core_until(OFFLINE, 1200).snapshot())
    session.stop()
    await task


async def test_seeking_across_a_damaged_frame_matches_a_straight_read(tmp_path: Path) -> None:
    path = tmp_path / "damaged.jsonl.zst"
    with RecordingWriter(path) as writer:
        for event in RecordingReader(NODE_FAILURE).events():
            writer.write(event)
    data = bytearray(path.read_bytes())
    at = len(data) // 2
    data[at : at + 16] = random.Random(9).randbytes(16)  # one frame in the middle is lost
    path.write_bytes(bytes(data))
    player, session, task = await started(path, speed=0, start_s=4000, paused=True, keyframe_every_s=300)
    await until_settled(player)
    assert any("damaged" in w for w in player.warnings)
    for target in (1000.0, 3500.0, 2000.0, 4500.0):
        player.seek(target)
        await until_settled(player)
        assert_same(session.core.snapshot(), core_until(path, target).snapshot())
    session.stop()
    await task
