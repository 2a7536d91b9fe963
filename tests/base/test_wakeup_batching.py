"""The batching selector: when it pauses before a poll (a clock of the test's own), and on a real loop,
that what arrives during the pause is read in fewer turns, whole and in order."""

from __future__ import annotations

import asyncio
import selectors
import socket
import threading
import time

import pytest

from tokenwatch.base.wakeup_batching import WakeupBatchingSelector, batch_wakeups, new_event_loop


class StepClock:
    """Time that moves only when the selector sleeps or the test says so."""

    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.mark.parametrize(
    ("gap_s", "since_s", "timeout", "pause"),
    [
        (0.0, 0.01, None, None),  # off: as the plain selector
        (0.1, 0.03, None, 0.07),  # nothing scheduled: the rest of the gap
        (0.1, 0.03, 1.0, 0.07),  # a timer later than the gap: the rest of the gap
        (0.1, 0.03, 0.02, 0.02),  # a timer due within the gap: no later than it
        (0.1, 0.03, 0, None),  # callbacks ready: poll at once
        (0.1, 0.15, None, None),  # the gap has passed: poll (and block) as usual
    ],
)
def test_pause_before_a_blocking_poll(
    gap_s: float, since_s: float, timeout: float | None, pause: float | None
) -> None:
    clock = StepClock()
    selector = WakeupBatchingSelector(monotonic=clock.monotonic, sleep=clock.sleep)
    sender, receiver = socket.socketpair()
    try:
        selector.register(receiver, selectors.EVENT_READ)
        sender.send(b"x")  # never read: a poll returns at once whatever its timeout
        selector.gap_s = gap_s
        assert len(selector.select(None)) == 1  # the first poll never waits
        assert clock.sleeps == []
        clock.now += since_s
        assert len(selector.select(timeout)) == 1
        assert clock.sleeps == ([] if pause is None else [pytest.approx(pause)])
    finally:
        selector.close()
        sender.close()
        receiver.close()


def test_after_a_pause_the_poll_does_not_block() -> None:
    """Nothing arrived during the pause: the poll after it returns empty at once (the loop then runs its
    timers, or comes back and blocks), never a second wait."""
    clock = StepClock()
    selector = WakeupBatchingSelector(monotonic=clock.monotonic, sleep=clock.sleep)
    sender, receiver = socket.socketpair()
    try:
        selector.register(receiver, selectors.EVENT_READ)  # nothing is ever sent
        selector.gap_s = 0.1
        selector.select(0)
        clock.now += 0.04
        assert selector.select(None) == []  # with timeout None and no data, a plain poll would hang here
        assert clock.sleeps == [pytest.approx(0.06)]
    finally:
        selector.close()
        sender.close()
        receiver.close()


def test_gap_is_said_to_the_loop_that_can_space_its_wakeups() -> None:
    async def set_gap() -> bool:
        said = batch_wakeups(0.05)
        batch_wakeups(0.0)
        return said

    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        assert runner.run(set_gap()) is True
    assert asyncio.run(set_gap()) is False  # another loop (the dashboard's) wakes as before
    with asyncio.Runner(loop_factory=new_event_loop) as runner, pytest.raises(ValueError, match=">= 0"):
        runner.run(_negative_gap())


async def _negative_gap() -> None:
    batch_wakeups(-1.0)


MESSAGES = 20


def _read_in_turns(gap_s: float) -> tuple[bytes, int]:
    """A writer thread sends MESSAGES lines 2 ms apart once the reader has its first; what the reader got
    (all of it) and how many reads it took after the first."""

    async def read_all() -> tuple[bytes, int]:
        batch_wakeups(gap_s)
        loop = asyncio.get_running_loop()
        mine, theirs = socket.socketpair()
        mine.setblocking(False)
        first_read = threading.Event()

        def write() -> None:
            first_read.wait(timeout=60)
            for i in range(MESSAGES):
                theirs.sendall(b"line %02d\n" % i)
                time.sleep(0.002)
            theirs.close()

        writer = threading.Thread(target=write)
        writer.start()
        theirs.sendall(b"first\n")
        got, reads = b"", 0
        try:
            async with asyncio.timeout(60):
                got = await loop.sock_recv(mine, 65536)
                first_read.set()
                while chunk := await loop.sock_recv(mine, 65536):
                    got += chunk
                    reads += 1
        finally:
            first_read.set()
            writer.join(timeout=60)
            mine.close()
        return got, reads

    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        return runner.run(read_all())


def test_what_arrives_during_the_gap_is_read_in_fewer_turns() -> None:
    """All 20 lines (40 ms of writing) arrive within one 0.5-s gap: at most a few reads take them (one each
    without the gap). The bytes are the same, in order."""
    expected = b"first\n" + b"".join(b"line %02d\n" % i for i in range(MESSAGES))
    got, reads = _read_in_turns(0.5)
    assert got == expected
    assert reads <= MESSAGES // 4
