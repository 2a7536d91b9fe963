"""The real engine's timed spells have the machine to themselves; every other test shares it.

The engine tests time a vLLM server on this machine's CPU: its pace follows the machine's load. The
verdict's band assumes a node's pace goes on as noisy as it has been, and under xdist the other worker's
tests changed the load in the middle of a timed run (a CI run's Offline engine ran its second half a fifth
faster than its first, when the other worker moved on to lighter tests, and LoadGen's figure landed 1 %
above the band). So while an engine test times the engine (:func:`machine_to_itself`), the other workers
start no test; they finish the one they are in first (:func:`sharing_the_machine`). A test of any other
kind that times a real run takes the machine the same way from inside its share (the real LoadGen runs the
forecast's band is checked against: their first half ran slower than their second under the other
worker's load, and the band stated at half-way missed LoadGen's figure).

Two lock files shared by the run's workers (``flock``): a gate, held by whoever has the machine to
itself or is about to, and a share lock, held shared by each running test and exclusively by the
engine. A test waits at the gate, so a waiting engine is not starved by tests that keep starting. Outside
xdist there is one process: nothing to wait for.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_files: dict[str, int] = {}
_sharing: set[str] = set()  # the runs this process is inside sharing_the_machine for (one test at a time)


def lock_path(run_id: str, name: str) -> Path:
    return Path(tempfile.gettempdir()) / f"tokenwatch-tests-{run_id}.{name}"


def _lock(run_id: str, name: str) -> int:
    """This process's descriptor of the run's lock file ``name`` (opened once; never through a link)."""
    path = lock_path(run_id, name)
    if str(path) not in _files:
        _files[str(path)] = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    return _files[str(path)]


def _this_run() -> str:
    """The xdist run this worker belongs to ("" outside xdist: one process, nothing to share)."""
    return os.environ.get("PYTEST_XDIST_TESTRUNUID", "")


@contextmanager
def _locked(fd: int, mode: int) -> Iterator[None]:
    fcntl.flock(fd, mode)
    try:
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)


@contextmanager
def machine_to_itself(run_id: str | None = None) -> Iterator[None]:
    """While inside, no other worker runs a test: it waits for the one it runs to end, then starts none.
    ``run_id``: the xdist run's (None: this worker's)."""
    run = _this_run() if run_id is None else run_id
    if not run:
        yield
        return
    share = _lock(run, "share")
    nested = run in _sharing  # a test (or the session fixture it builds) that times a real run
    if nested:
        # Let go of this test's share first: holding it while waiting at the gate would deadlock with an
        # engine that holds the gate and waits for every share to end.
        fcntl.flock(share, fcntl.LOCK_UN)
    with _locked(_lock(run, "gate"), fcntl.LOCK_EX):
        fcntl.flock(share, fcntl.LOCK_EX)
        try:
            yield
        finally:
            # Back to sharing before the gate opens, so no engine slips in before this test has ended
            fcntl.flock(share, fcntl.LOCK_SH if nested else fcntl.LOCK_UN)


@contextmanager
def sharing_the_machine(run_id: str | None = None) -> Iterator[None]:
    """Around one test: it starts when no engine test has the machine, and holds off one until it ends."""
    run = _this_run() if run_id is None else run_id
    if not run:
        yield
        return
    share = _lock(run, "share")
    with _locked(_lock(run, "gate"), fcntl.LOCK_EX):  # past the gate: no engine test holds or awaits it
        fcntl.flock(share, fcntl.LOCK_SH)
    _sharing.add(run)
    try:
        yield
    finally:
        _sharing.discard(run)
        fcntl.flock(share, fcntl.LOCK_UN)
