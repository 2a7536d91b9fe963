"""A replay's reading threads end with it, whatever stops it. A seek back rebuilds the core from a new tape
whose thread reads ahead into a bounded window; a cancel while the rebuild waited for the session to drain
left that tape open, its thread waiting forever on the full window, and the player's shutdown (and the
interpreter's exit after it) waiting on the thread.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from types import FrameType

import pytest

from tests.conftest import run_tokenwatch
from tokenwatch.core import RackCore
from tokenwatch.inputs.replay.player import ReplayPlayer
from tokenwatch.inputs.replay.tape import WINDOW_BYTES, ReplayTape, event_nbytes
from tokenwatch.recording import RecordingReader, RecordingWriter
from tokenwatch.session import Session

CEILING_S = 60.0  # generous: a loaded 2-core machine


class DrainGate:
    """A session as the player's host, whose drain, once :meth:`arm` ed, never returns: the player's
    wait for the session to take what it played, held open so the test can cancel it there."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.armed = False
        self.reached = asyncio.Event()

    @property
    def core(self) -> RackCore:
        return self.session.core

    @core.setter
    def core(self, core: RackCore) -> None:
        self.session.core = core

    @property
    def recorder(self) -> RecordingWriter | None:
        return self.session.recorder

    @recorder.setter
    def recorder(self, recorder: RecordingWriter | None) -> None:
        self.session.recorder = recorder

    @property
    def stop_on_run_end(self) -> bool:
        return self.session.stop_on_run_end

    @stop_on_run_end.setter
    def stop_on_run_end(self, value: bool) -> None:
        self.session.stop_on_run_end = value

    def replace_core(self, core: RackCore) -> None:
        self.session.replace_core(core)

    async def drained(self) -> None:
        await self.session.drained()
        if self.armed:
            self.reached.set()
            await asyncio.Event().wait()


def tape_loaders() -> int:
    """Threads now inside a tape's reading loop (:meth:`ReplayTape.load`), seen from their stacks."""
    count = 0
    for frame in sys._current_frames().values():
        walked: FrameType | None = frame
        while walked is not None:
            if walked.f_code is ReplayTape.load.__code__:
                count += 1
                break
            walked = walked.f_back
    return count


async def settled(player: ReplayPlayer) -> None:
    deadline = time.monotonic() + CEILING_S
    await asyncio.sleep(0)
    while player.seeking:
        assert time.monotonic() < deadline, "the seek did not finish"
        await asyncio.sleep(0.01)


@pytest.fixture(scope="module")
def four_racks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """12 minutes of four racks: ~30 MB of arrays, more than a tape's window holds."""
    path = tmp_path_factory.mktemp("replay_threads") / "four-racks.jsonl.zst"
    result = run_tokenwatch(
        "sim", "--racks", "4", "--duration", "12m", "--speed", "0", "--headless", "--interval", "12m",
        "--record", str(path),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return path


async def test_a_rebuild_cancelled_at_its_drain_leaves_no_reading_thread(four_racks: Path) -> None:
    arrays_after_30s = sum(event_nbytes(e) for e in RecordingReader(four_racks).events() if e.t > 30)
    assert arrays_after_30s > 1.5 * WINDOW_BYTES  # the rebuild's tape fills its window and waits there
    assert tape_loaders() == 0
    player = ReplayPlayer(four_racks, speed=0, start_s=600, paused=True)
    session = Session(RackCore(), [player], flush_interval_s=None)
    gate = DrainGate(session)
    player.bind(gate)
    task = asyncio.create_task(session.run())
    await settled(player)
    gate.armed = True
    player.seek(30)  # back: a new tape from the keyframe at or before 30 s, read on to 30 s
    await asyncio.wait_for(gate.reached.wait(), CEILING_S)
    session.stop()  # cancels the player where the rebuild waits for the drain
    await asyncio.wait_for(task, CEILING_S)
    deadline = time.monotonic() + CEILING_S
    while tape_loaders():
        assert time.monotonic() < deadline, "a tape's reading thread outlived the replay"
        await asyncio.sleep(0.05)
