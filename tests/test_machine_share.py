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


def _engine(run_id: str, trying: Any, holding: Any, done: Any) -> None:
    """An engine test on another worker: it has the machine to itself until told it is done."""
    trying.value = 1
    with machine_to_itself(run_id):
        holding.value = 1
        done.wait(PATIENCE_S)
    holding.value = 0


def _holds_off_the_other_worker(inside: Any, waiting: Any, spells: Any) -> None:
    """Inside machine_to_itself: the other worker waits to start a test and starts none."""
    held_from = spells.value
    _wait("the other worker waiting to start one", lambda: waiting.value == 1)
    looks = [(inside.value, spells.value) for _ in range(1000)]
    assert all(seen == (0, held_from) for seen in looks), looks[:5]


def _unlink(run_id: str) -> None:
    for name in ("gate", "share"):
        lock_path(run_id, name).unlink(missing_ok=True)


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
            _holds_off_the_other_worker(inside, waiting, spells)
        _wait("the other worker's tests again", lambda: spells.value >= held_from + 3)
    finally:
        stop.set()
        worker.join(PATIENCE_S)
        _unlink(run_id)
    assert worker.exitcode == 0


def test_a_test_takes_the_machine_from_inside_its_share_and_shares_it_again() -> None:
    """A test (not the engine's) that times a real run: inside its share it has the machine to itself,
    with no deadlock; once its timed run ends it shares again, so an engine waits for the test's end."""
    run_id = f"selftest-{os.getpid()}-{time.monotonic_ns()}"
    spawn = multiprocessing.get_context("spawn")
    inside, waiting, spells = spawn.Value("i", 0), spawn.Value("i", 0), spawn.Value("i", 0)
    trying, holding, stop, done = spawn.Value("i", 0), spawn.Value("i", 0), spawn.Event(), spawn.Event()
    worker = spawn.Process(target=_tests, args=(run_id, inside, waiting, spells, stop))
    engine = spawn.Process(target=_engine, args=(run_id, trying, holding, done))
    worker.start()
    try:
        _wait("the other worker's tests", lambda: spells.value >= 3)
        with sharing_the_machine(run_id):
            with machine_to_itself(run_id):
                _holds_off_the_other_worker(inside, waiting, spells)
            _wait("the other worker's tests again", lambda: spells.value >= 3)
            stop.set()
            worker.join(PATIENCE_S)
            engine.start()
            _wait("the engine asking for the machine", lambda: trying.value == 1)
            # The engine is held at the share this test still has (without it, it has the machine at once)
            deadline = time.monotonic() + 0.5  # long beside the microseconds it takes a lock it can have
            while time.monotonic() < deadline:
                assert holding.value == 0
                time.sleep(0.01)  # the poll interval
        _wait("the engine with the machine, once the test ended", lambda: holding.value == 1)
    finally:
        stop.set()
        done.set()
        worker.join(PATIENCE_S)
        engine.join(PATIENCE_S)
        _unlink(run_id)
    assert worker.exitcode == 0
    assert engine.exitcode == 0
