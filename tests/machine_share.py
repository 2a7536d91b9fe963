"""The real engine's timed spells have the machine to themselves; every other test shares it.

The engine tests time a vLLM server on this machine's CPU: its pace follows the machine's load. The
verdict's band assumes a node's pace goes on as noisy as it has been, and under xdist the other worker's
tests changed the load in the middle of a timed run (a CI run's Offline engine ran its second half a fifth
faster than its first, when the other worker moved on to lighter tests, and LoadGen's figure landed 1 %
above the band). So while an engine test times the engine (:func:`machine_to_itself`), the other workers
start no test; they finish the one they are in first (:func:`sharing_the_machine`).

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

_RUN_ID = os.environ.get("PYTEST_XDIST_TESTRUNUID", "")
_files: dict[str, int] = {}


def _lock(name: str) -> int:
    """This process's descriptor of the run's lock file ``name`` (opened once; never through a link)."""
    if name not in _files:
        path = Path(tempfile.gettempdir()) / f"tokenwatch-tests-{_RUN_ID}.{name}"
        _files[name] = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    return _files[name]


@contextmanager
def machine_to_itself() -> Iterator[None]:
    """While inside, no other worker runs a test: it waits for the one it runs to end, then starts none."""
    if not _RUN_ID:
        yield
        return
    gate, share = _lock("gate"), _lock("share")
    fcntl.flock(gate, fcntl.LOCK_EX)
    try:
        fcntl.flock(share, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(share, fcntl.LOCK_UN)
    finally:
        fcntl.flock(gate, fcntl.LOCK_UN)


@contextmanager
def sharing_the_machine() -> Iterator[None]:
    """Around one test: it starts when no engine test has the machine, and holds off one until it ends."""
    if not _RUN_ID:
        yield
        return
    gate, share = _lock("gate"), _lock("share")
    fcntl.flock(gate, fcntl.LOCK_EX)
    try:
        fcntl.flock(share, fcntl.LOCK_SH)
    finally:
        fcntl.flock(gate, fcntl.LOCK_UN)
    try:
        yield
    finally:
        fcntl.flock(share, fcntl.LOCK_UN)
