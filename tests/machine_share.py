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

The other workers' tests wait, but their module fixtures go on: a Prometheus scraping 64 exporters every
second kept both cores busy while an engine was timed (its Server run slowed in its last seconds, and
LoadGen's figure landed 7 % under the band). Such a server registers while it lives
(:func:`paused_while_others_time`): it is stopped (SIGSTOP) while another worker has the machine to
itself, and goes on (SIGCONT) before that worker lets go, so no test ever sees it stopped. Only servers
whose answers a pause cannot change register (racks held still: the newest sample stays the same).

Two lock files shared by the run's workers (``flock``): a gate, held by whoever has the machine to
itself or is about to, and a share lock, held shared by each running test and exclusively by the
engine. A test waits at the gate, so a waiting engine is not starved by tests that keep starting. Outside
xdist there is one process: nothing to wait for.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
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
        paused = _pause_others(run)
        try:
            yield
        finally:
            for pid in paused:  # before any other test can start
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)
            # Back to sharing before the gate opens, so no engine slips in before this test has ended
            fcntl.flock(share, fcntl.LOCK_SH if nested else fcntl.LOCK_UN)


def _started_at(pid: int) -> str | None:
    """The process's start time (clock ticks since boot, /proc/PID/stat): with its PID, it names one
    process (a PID is reused, a PID and a start time are not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]  # field 22, counted after the command's parentheses


def _pause_others(run: str) -> list[int]:
    """Stop every server the other workers registered that is still the process registered."""
    paused = []
    for entry in Path(tempfile.gettempdir()).glob(lock_path(run, "pause.*").name):
        try:
            owner, pid, started = entry.read_text().split()
        except (OSError, ValueError):
            continue
        if int(owner) != os.getpid() and _started_at(int(pid)) == started:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGSTOP)
                paused.append(int(pid))
    return paused


@contextmanager
def paused_while_others_time(proc: subprocess.Popen[bytes], run_id: str | None = None) -> Iterator[None]:
    """While inside, ``proc`` (a server this worker started) is stopped whenever another worker has the
    machine to itself (see the module's docstring). ``run_id``: the xdist run's (None: this worker's)."""
    run = _this_run() if run_id is None else run_id
    started = _started_at(proc.pid)
    if not run or started is None:
        yield
        return
    entry = lock_path(run, f"pause.{proc.pid}")
    fd = os.open(entry, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(f"{os.getpid()} {proc.pid} {started}\n")
    try:
        yield
    finally:
        entry.unlink(missing_ok=True)


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
