"""tokenwatch's side of the process that answers /metrics (:mod:`.body_server`, where the protocol is).

The socket is bound here (a port in use is an ``OSError`` in tokenwatch, as before) and handed to the
process; each new body is pushed to it as bytes, with its gzip when a scraper asked for gzip. A reader
thread takes the process's lines: a scrape served (the next body is wanted), an ask for the current body
(answered by ``answer``), a log line (logged here, under tokenwatch's logger).
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO

from tokenwatch.frontends.metrics.body_server import LISTEN_BACKLOG
from tokenwatch.frontends.metrics.published import PublishedBody

SCRIPT = Path(__file__).with_name("body_server.py")
POLL_S = 0.1  # how often the reader looks at the mode (a loop that stopped: scrapes ask again)
IDLE_POLL_S = (
    1.0  # the same while no loop is live (64 exporters of a fleet test need not wake 640 times a second)
)
EXIT_WAIT_S = 5.0
log = logging.getLogger("tokenwatch.frontends.metrics")


def listening_socket(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(LISTEN_BACKLOG)
    except BaseException:
        sock.close()
        raise
    return sock


class ServingProcess:
    """``answer(seq, gzip)``: called on the reader thread for a scrape that asks; it calls ``push`` or
    ``fail`` with that ``seq``. ``scraped(gzip)``: a scrape was served from the body held. ``live()``:
    whether scrapes may be served from the body held (a loop pushes each new one)."""

    def __init__(
        self,
        host: str,
        port: int,
        client_timeout_s: float,
        *,
        answer: Callable[[int, bool], None],
        scraped: Callable[[bool], None],
        live: Callable[[], bool],
    ) -> None:
        sock = listening_socket(host, port)
        self.port: int = sock.getsockname()[1]
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-I", str(SCRIPT), str(sock.fileno()), repr(client_timeout_s)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                pass_fds=(sock.fileno(),),
            )
        finally:
            sock.close()  # the process holds it now: closing it there frees the port
        assert self._proc.stdin is not None
        assert self._proc.stdout is not None
        self._frames: IO[bytes] = self._proc.stdin
        self._answer, self._scraped, self._live = answer, scraped, live
        self._write_lock = threading.Lock()
        self._pushed: PublishedBody | None = None
        self._pushed_packed = False
        self._pushed_live = False
        self._gone = False
        self._reader = threading.Thread(
            target=self._read, args=(self._proc.stdout,), name="tokenwatch-metrics-reader", daemon=True
        )
        self._reader.start()

    def push(self, published: PublishedBody, seq: int = 0) -> None:
        """``published`` is what scrapes get now (its gzip too, if made); answers ask ``seq``."""
        live = self._live()
        packed = published.packed
        with self._write_lock:
            pushed = self._pushed
            # An answer made while the render thread pushed a newer body must not take its place.
            newer_held = live and pushed is not None and published.serial < pushed.serial
            if (published is pushed and (self._pushed_packed or packed is None)) or newer_held:
                self._send(f"S {seq} {int(live)}\n".encode())
            else:
                self._send(
                    f"B {seq} {int(live)} {len(published.body)} {len(packed or b'')}\n".encode(),
                    published.body,
                    packed or b"",
                )
                self._pushed, self._pushed_packed = published, packed is not None
            self._pushed_live = live

    def fail(self, seq: int, message: str) -> None:
        data = message.encode("utf-8", "replace")
        with self._write_lock:
            self._send(f"E {seq} {int(self._live())} {len(data)}\n".encode(), data)
            self._pushed = None

    @property
    def exit_code(self) -> int | None:
        """The process's exit status once it ended (None while it runs)."""
        return self._proc.poll()

    def close(self) -> None:
        with self._write_lock:
            self._gone = True
            with contextlib.suppress(OSError):  # the process's stdin ends: it closes the socket, exits
                self._frames.close()
        try:
            self._proc.wait(timeout=EXIT_WAIT_S)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._reader.join(timeout=EXIT_WAIT_S)

    def _send(self, *parts: bytes) -> None:
        """Under the write lock. A process gone (killed from outside) is one warning, not an exception
        in the thread that rendered the body."""
        if self._gone:
            return
        try:
            for part in parts:
                self._frames.write(part)
            self._frames.flush()
        except (BrokenPipeError, ValueError, OSError) as exc:
            self._gone = True
            log.warning("the /metrics server process ended (%s): /metrics is no longer served", exc)

    def _check_mode(self) -> None:
        """A loop that stopped since the last push: the process is told to ask for each scrape again."""
        if self._pushed_live and not self._live():
            with self._write_lock:
                self._send(b"M 0\n")
                self._pushed_live = False

    def _read(self, lines: IO[bytes]) -> None:
        fd = lines.fileno()
        pending = b""
        while True:
            # A live process needs its mode watched (nobody tells a loop stopped); otherwise wake rarely.
            ready, _, _ = select.select([fd], [], [], POLL_S if self._pushed_live else IDLE_POLL_S)
            if not ready:
                self._check_mode()
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                return
            *whole, pending = (pending + chunk).split(b"\n")
            for line in whole:
                try:
                    self._handle(line.decode("utf-8", "replace"))
                except (
                    Exception
                ) as exc:  # one bad answer must not end the reader: every later scrape would hang
                    log.warning("/metrics: %r", exc)
            self._check_mode()

    def _handle(self, line: str) -> None:
        kind, _, rest = line.partition(" ")
        if kind == "R":
            self._scraped(rest == "1")
        elif kind == "A":
            seq, _, packed = rest.partition(" ")
            self._answer(int(seq), packed == "1")
        elif kind == "L":
            level, _, message = rest.partition(" ")
            log.log(int(level), "%s", message)
