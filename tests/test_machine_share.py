"""The engine's hold on the machine (tests/machine_share.py), between two real processes: while one has
the machine to itself, the other's tests neither run nor start, and they start again once it lets go."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.conftest import PATIENCE_S
from tests.machine_share import lock_path, machine_to_itself, paused_while_others_time, sharing_the_machine


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


def _state(pid: int) -> str:
    """The process's state letter (/proc/PID/stat): ``T`` when stopped."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def _engine_with_a_server(run_id: str, own: Any, holding: Any, done: Any) -> None:
    """An engine test whose own worker registered a server too: it has the machine until told it is done."""
    server = subprocess.Popen(["sleep", "600"])
    try:
        with paused_while_others_time(server, run_id):
            own.value = server.pid
            with machine_to_itself(run_id):
                holding.value = 1
                done.wait(PATIENCE_S)
            holding.value = 0
    finally:
        server.kill()
        server.wait()


def test_the_other_workers_registered_servers_are_stopped_while_the_engine_has_the_machine() -> None:
    """A server this worker registered is stopped while another worker holds the machine and goes on
    before it lets go; the holder's own server runs on; once unregistered, a hold leaves it alone."""
    run_id = f"selftest-{os.getpid()}-{time.monotonic_ns()}"
    spawn = multiprocessing.get_context("spawn")
    own, holding, done = spawn.Value("i", 0), spawn.Value("i", 0), spawn.Event()
    server = subprocess.Popen(["sleep", "600"])
    engine = None
    try:
        with paused_while_others_time(server, run_id):
            assert _state(server.pid) != "T"
            engine = spawn.Process(target=_engine_with_a_server, args=(run_id, own, holding, done))
            engine.start()
            _wait("the engine with the machine", lambda: holding.value == 1)
            assert _state(server.pid) == "T"
            assert _state(own.value) != "T"
            done.set()
            _wait("the engine letting go", lambda: holding.value == 0)
            assert _state(server.pid) != "T"
            engine.join(PATIENCE_S)
        trying, again = spawn.Value("i", 0), spawn.Event()
        engine = spawn.Process(target=_engine, args=(run_id, trying, holding, again))
        engine.start()
        _wait("a second engine with the machine", lambda: holding.value == 1)
        assert _state(server.pid) != "T"  # unregistered: left alone
        again.set()
        engine.join(PATIENCE_S)
    finally:
        done.set()
        server.kill()
        server.wait()
        if engine is not None:
            engine.join(PATIENCE_S)
        _unlink(run_id)
    assert engine is not None
    assert engine.exitcode == 0
