"""The engine's hold on the machine (tests/machine_share.py), between two real processes: while one has
the machine to itself, the other's tests neither run nor start, and they start again once it lets go."""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Callable
from typing import Any

from tests.conftest import PATIENCE_S
from tests.machine_share import lock_path, machine_to_itself, sharing_the_machine


def _wait(what: str, predicate: Callable[[], bool]) -> None:
    deadline = time.monotonic() + PATIENCE_S
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.001)  # the poll interval


def _tests(run_id: str, inside: Any, waiting: Any, spells: Any, stop: Any) -> None:
    """Another worker, running test after test until told to stop."""
    while not stop.is_set():
        waiting.value = 1
        with sharing_the_machine(run_id):
            waiting.value = 0
            inside.value = 1
            spells.value += 1
            inside.value = 0


def test_no_test_runs_or_starts_while_the_engine_has_the_machine() -> None:
    run_id = f"selftest-{os.getpid()}-{time.monotonic_ns()}"
    spawn = multiprocessing.get_context("spawn")
    inside, waiting, spells = spawn.Value("i", 0), spawn.Value("i", 0), spawn.Value("i", 0)
    stop = spawn.Event()
    worker = spawn.Process(target=_tests, args=(run_id, inside, waiting, spells, stop))
    worker.start()
    try:
        _wait("the other worker's tests", lambda: spells.value >= 3)
        with machine_to_itself(run_id):
            held_from = spells.value
            _wait("the other worker waiting to start one", lambda: waiting.value == 1)
            looks = [(inside.value, spells.value) for _ in range(1000)]
            assert all(seen == (0, held_from) for seen in looks), looks[:5]
        _wait("the other worker's tests again", lambda: spells.value >= held_from + 3)
    finally:
        stop.set()
        worker.join(PATIENCE_S)
        for name in ("gate", "share"):
            lock_path(run_id, name).unlink(missing_ok=True)
    assert worker.exitcode == 0
