"""Shared fixtures. The CLI always runs as ``python -m tokenwatch`` from this checkout, so tests
exercise this tree's code whatever else is installed."""

from __future__ import annotations

import fcntl
import os
import pty
import socket
import struct
import subprocess
import sys
import termios
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tokenwatch.base.events import Event, Progress

REPO_ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
SAMPLE_RUNS = REPO_ROOT / "sample_runs"

RunCli = Callable[..., subprocess.CompletedProcess[str]]


def progress_counts(events: Iterable[Event], tokens: bool = False) -> list[int]:
    """``samples_done`` (``tokens_done`` with ``tokens``) of every Progress event, each known."""
    counts = []
    for e in events:
        if isinstance(e, Progress):
            count = e.tokens_done if tokens else e.samples_done
            assert count is not None, f"{e} leaves the count unknown"
            counts.append(count)
    return counts


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


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (at the moment of asking)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def run_cli() -> RunCli:
    """``run_cli("sim", "--headless", ...)`` -> CompletedProcess (text), never raising on exit status."""
    return run_tokenwatch


def prometheus_query(url: str, promql: str, timeout_s: float = 5.0) -> list[tuple[dict[str, str], float]]:
    """One instant query to a Prometheus server from synchronous test code, through tokenwatch's client."""
    import asyncio

    from tokenwatch.inputs.prometheus.api import PrometheusApi

    async def ask() -> list[tuple[dict[str, str], float]]:
        async with PrometheusApi(url, timeout_s) as api:
            return await api.query(promql)

    return asyncio.run(ask())


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
    try:
        yield PtyDashboard(proc, master, screen)
        reader.join(timeout=5)
    finally:
        stop.set()
        if proc.poll() is None:
            proc.kill()
        os.close(master)


def _drain(fd: int, out: bytearray, stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            return
        if not chunk:
            return
        out.extend(chunk)
