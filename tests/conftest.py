"""Shared fixtures. The CLI always runs as ``python -m tokenwatch`` from this checkout, so tests
exercise this tree's code whatever else is installed."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import pty
import select
import socket
import struct
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Awaitable, Callable, Generator, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import psutil
import pytest
from hypothesis import settings as hypothesis_settings

from tests.machine_share import sharing_the_machine
from tokenwatch.base.events import Event, Progress

REPO_ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
SAMPLE_RUNS = REPO_ROOT / "sample_runs"

RunCli = Callable[..., subprocess.CompletedProcess[str]]
ServerProcess = TypeVar("ServerProcess", bound="subprocess.Popen[Any]")

# How long a test waits for something that should happen before calling it lost. Generous on purpose:
# on a 2-core machine at load 10 a step that takes 0.1 s when quiet can take tens of seconds, and a
# test must fail for what the code does, never for how busy the machine was (pytest-timeout is 180 s).
PATIENCE_S = 60.0
POLL_S = 0.05  # how often a wait asks again; short, so a quiet machine waits no longer than it must

# Hypothesis gives each example 200 ms by default: a wall-clock budget that a loaded machine fails, not the
# code (a slow parser is a benchmark's finding). Settings that name their own deadline still win.
hypothesis_settings.register_profile("tokenwatch", deadline=None)
hypothesis_settings.load_profile("tokenwatch")


def wait_until(
    predicate: Callable[[], bool], what: str, timeout_s: float = PATIENCE_S, poll_s: float = POLL_S
) -> None:
    """Return as soon as ``predicate()`` holds; fail naming ``what`` if it does not within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s:g} s: {what}")
        time.sleep(poll_s)


async def wait_until_async(
    predicate: Callable[[], bool],
    what: str,
    timeout_s: float = PATIENCE_S,
    poll_s: float = POLL_S,
    pause: Callable[[float], Awaitable[object]] | None = None,
) -> None:
    """:func:`wait_until` for a test in the event loop: it sleeps with ``pause`` (``asyncio.sleep`` unless
    given, e.g. a Textual ``pilot.pause``), so the loop runs what the test waits for."""
    step = pause or asyncio.sleep
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s:g} s: {what}")
        await step(poll_s)


def progress_counts(events: Iterable[Event], tokens: bool = False) -> list[int]:
    """``samples_done`` (``tokens_done`` with ``tokens``) of every Progress event, each known."""
    counts = []
    for e in events:
        if isinstance(e, Progress):
            count = e.tokens_done if tokens else e.samples_done
            assert count is not None, f"{e} leaves the count unknown"
            counts.append(count)
    return counts


def events_so_far(path: Path) -> list[Event]:
    """The events of a recording being written, as it stands: none while it is not made yet, or made and its
    header's block still on its way to the disk."""
    from tokenwatch.recording import RecordingFormatError, read_events

    if not path.exists() or path.stat().st_size == 0:
        return []
    try:
        events, _ = read_events(path)
    except RecordingFormatError:
        return []
    return events


def recorded_until(path: Path) -> float | None:
    """The latest run time in a recording being written, read as it stands (None while it holds no event)."""
    return max((e.t for e in events_so_far(path)), default=None)


def cli_env(**extra: str) -> dict[str, str]:
    """The environment for ``python -m tokenwatch`` from this checkout, plus ``extra``."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("TOKENWATCH_DEBUG", None)
    env.update(extra)
    return env


def run_tokenwatch(
    *args: str, timeout: float = 120, input: str | None = None, cwd: Path | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    """``python -m tokenwatch ARGS`` to completion (text), never raising on its exit status."""
    return subprocess.run(
        [sys.executable, "-m", "tokenwatch", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        input=input,
        stdin=subprocess.DEVNULL if input is None else None,
        env=cli_env(**env),
        cwd=cwd or REPO_ROOT,
    )


def stop_process(proc: subprocess.Popen[bytes] | subprocess.Popen[str], grace_s: float = 10.0) -> None:
    """End a server a fixture started: SIGTERM, then SIGKILL if it has not exited within ``grace_s``; reaped
    either way (no zombie left for the next test)."""
    proc.terminate()
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def start_tokenwatch(*args: str, **env: str) -> subprocess.Popen[str]:
    """``python -m tokenwatch ARGS`` running in the background, stdout and stderr piped (text)."""
    return subprocess.Popen(
        [sys.executable, "-m", "tokenwatch", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cli_env(**env),
        cwd=REPO_ROOT,
    )


def unzstd(data: bytes) -> bytes:
    """Every frame of a ``.zst`` recording, decoded (recordings are a series of zstd frames)."""
    import io

    import zstandard

    return zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data), read_across_frames=True).read()


_PORTS_GIVEN: set[int] = set()
_REFUSING: list[socket.socket] = []  # sockets that hold refusing_port()'s ports for the worker's life


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (at the moment of asking), never one this process
    was given before: the kernel may hand the same free port to two asks in a row, and two servers told
    the same port leave one of them answering for both (eight sshd nodes started in turn did). Another
    process may still take it before the server binds: start servers with :func:`start_listening`."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in _PORTS_GIVEN:
            _PORTS_GIVEN.add(port)
            return port


def refusing_port() -> int:
    """A TCP port on 127.0.0.1 that refuses every connection for as long as this process runs: bound here
    and never listened on, so no other server (another worker's, another checkout's) can take it, as one
    could a port that was merely free when asked (a "receiver that is down" then answered)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    _REFUSING.append(s)
    return int(s.getsockname()[1])


class ServerExitedError(RuntimeError):
    """A server a test started exited before it listened."""


def listening_addresses(pid: int, port: int) -> set[str]:
    """The addresses on which process ``pid``, or a process it started, listens at TCP ``port``."""
    try:
        root = psutil.Process(pid)
        family = [root, *root.children(recursive=True)]
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return set()
    addresses: set[str] = set()
    for process in family:
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            addresses.update(
                c.laddr.ip
                for c in process.net_connections(kind="tcp")
                if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port
            )
    return addresses


def listens(pid: int, port: int) -> bool:
    """Process ``pid``, or a process it started, listens on TCP ``port``. A connection that succeeds is not
    enough: a server told a port another process took exits, and that other process answers for it."""
    return bool(listening_addresses(pid, port))


def wait_listening(
    proc: subprocess.Popen[Any],
    port: int,
    what: str,
    log: Path | None = None,
    timeout_s: float = PATIENCE_S,
) -> None:
    """Return once ``proc`` itself (or its child) listens on ``port``; :class:`ServerExitedError` (with
    the end of ``log``) if it exits first, AssertionError if it does not listen within ``timeout_s``."""

    def own_listener() -> bool:
        if proc.poll() is not None:
            said = log.read_text(errors="replace")[-500:] if log is not None and log.exists() else ""
            raise ServerExitedError(f"{what} exited ({proc.returncode}) before listening on {port}: {said}")
        return listens(proc.pid, port)

    wait_until(own_listener, f"{what} listening on port {port} itself", timeout_s)


def start_listening(
    start: Callable[[int], ServerProcess],
    what: str,
    log: Path | None = None,
    timeout_s: float = PATIENCE_S,
    tries: int = 3,
) -> tuple[ServerProcess, int]:
    """``start(port)`` on a :func:`free_port` port, returned with that port once its own process listens
    there. The port was free only when asked: a server that exits before listening (another process took
    it first: address in use) is started again on another port, ``tries`` times in all."""
    for attempt in range(1, tries + 1):
        port = free_port()
        proc = start(port)
        try:
            wait_listening(proc, port, what, log, timeout_s)
        except ServerExitedError:
            if attempt == tries:
                raise
        except BaseException:
            stop_process(proc)
            raise
        else:
            return proc, port
    raise AssertionError("unreachable: the last try returns or raises")


def prometheus_argv(program: str, config: Path, data: Path, port: int) -> list[str]:
    """A real Prometheus's command line: ``config``, its TSDB in ``data``, on 127.0.0.1 only."""
    return [
        program,
        f"--config.file={config}",
        f"--storage.tsdb.path={data}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--log.level=warn",
    ]


def start_prometheus(
    program: str, config: Path, data: Path, log: Path | None = None
) -> tuple[subprocess.Popen[bytes], str]:
    """A real Prometheus (``program``) on a free port, returned with its URL once its own process listens;
    its stderr goes to ``log`` (dropped without one)."""

    def launch(port: int) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            prometheus_argv(program, config, data, port),
            stdout=subprocess.DEVNULL,
            stderr=open(log, "wb") if log is not None else subprocess.DEVNULL,
        )

    proc, port = start_listening(launch, "prometheus", log)
    return proc, f"http://127.0.0.1:{port}"


@pytest.fixture
def run_cli() -> RunCli:
    """``run_cli("sim", "--headless", ...)`` -> CompletedProcess (text), never raising on exit status."""
    return run_tokenwatch


def prometheus_query(
    url: str, promql: str, timeout_s: float = PATIENCE_S
) -> list[tuple[dict[str, str], float]]:
    """One instant query to a Prometheus server from synchronous test code, through tokenwatch's client."""
    from tokenwatch.inputs.prometheus.api import PrometheusApi

    async def ask() -> list[tuple[dict[str, str], float]]:
        async with PrometheusApi(url, timeout_s) as api:
            return await api.query(promql)

    return asyncio.run(ask())


ENGINE_GROUP = "vllm-engine"  # the xdist group of the tests that time the real engine


@pytest.hookimpl(wrapper=True, tryfirst=True)  # outermost: the wait is no part of the test's timeout
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, object, object]:
    """Each test but the engine's starts when no engine test has the machine (tests/machine_share.py)."""
    group = item.get_closest_marker("xdist_group")
    if group is not None and group.args[:1] == (ENGINE_GROUP,):
        return (yield)
    with sharing_the_machine():
        return (yield)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-goldens",
        action="store_true",
        help="rewrite tests/golden/expected/ from the current output instead of comparing with it",
    )


@dataclass
class PtyDashboard:
    """The real CLI in a pseudo-terminal: ``proc``, the terminal's ``master`` end (write keys to it), and
    ``screen``, every byte it has drawn so far (read by a thread)."""

    proc: subprocess.Popen[bytes]
    master: int
    screen: bytearray
    reader: threading.Thread
    stop_reading: threading.Event
    closed: bool = False

    def close_terminal(self) -> None:
        """Close the terminal's master end, as a terminal window closes: the dashboard's reads and writes
        then fail (EIO). No SIGHUP comes with it (the pty is not the process's controlling terminal). The
        reader stops first: a read in flight would hold the master open."""
        if not self.closed:
            self.stop_reading.set()
            self.reader.join()
            os.close(self.master)
            self.closed = True


@contextmanager
def dashboard_in_pty(
    args: Sequence[str], tmp_path: Path, size: tuple[int, int] = (120, 40)
) -> Iterator[PtyDashboard]:
    """``tokenwatch ARGS`` in a real terminal of ``size`` (columns, rows), no user themes; killed and its
    terminal closed on the way out."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", size[1], size[0], 0, 0))
    env = {**cli_env(), "TERM": "xterm-256color", "TOKENWATCH_THEMES": str(tmp_path / "none")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tokenwatch", *args],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        cwd=REPO_ROOT,
        env=env,
        close_fds=True,
    )
    os.close(slave)
    screen = bytearray()
    stop = threading.Event()
    reader = threading.Thread(target=_drain, args=(master, screen, stop), daemon=True)
    reader.start()
    dashboard = PtyDashboard(proc, master, screen, reader, stop)
    try:
        yield dashboard
        reader.join(timeout=PATIENCE_S)  # every byte drawn, up to the terminal's close
    finally:
        if proc.poll() is None:
            proc.kill()
        dashboard.close_terminal()


def _drain(fd: int, out: bytearray, stop: threading.Event) -> None:
    while not stop.is_set():
        if not select.select([fd], [], [], 0.1)[0]:
            continue
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            return
        if not chunk:
            return
        out.extend(chunk)
