"""The process that answers /metrics: it holds the last body tokenwatch rendered and sends it.

Run as a script by :mod:`.serving_process` (``python -I body_server.py FD``; standard library only, so it
starts in tens of ms and imports nothing of tokenwatch). Why a process: a scrape served by a thread of the
tokenwatch process needs that process's GIL a dozen times (accept, the request, the headers, each send),
and under a 64-rack dashboard the GIL is held by the simulator, the dashboard and the body's render, in
C calls of several ms at a time; a scrape then waited 15 ms (p95) on a quiet machine and hundreds under
load. Here nothing else runs Python: a scrape is a read of the request and a send of bytes already made.

The listening socket is bound by tokenwatch (so a port in use is its usage error) and inherited as fd FD.

Protocol. tokenwatch writes frames to this process's stdin, each an ASCII line and a payload:

- ``B seq live plain_len gzip_len`` + the body + its gzip (gzip_len 0: none): the body to serve now;
- ``S seq live``: the body held is still current; ``M live``: only the mode changes;
- ``E seq live len`` + a UTF-8 message: no body could be made (a scrape with none gets a 500 saying why).

``live`` 1: a loop feeds the core and pushes each new body here: a scrape is answered at once from the
body held, and tokenwatch is told (``R gzip`` on stdout) so it renders the next. ``live`` 0 (no loop: before
or after a run): a scrape asks for the current body (``A seq gzip``) and waits for the frame that answers
``seq``. Log lines go to tokenwatch as ``L levelno message``. End of stdin (tokenwatch closed the server,
or died): the process exits.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, BinaryIO

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
LISTEN_BACKLOG = 1024
MAX_WORKERS = 256
ANSWER_TIMEOUT_S = 30.0  # an asking scrape waits this long for tokenwatch (which itself gives up at 10 s)
DEBUG, WARNING = 10, 30


class Held:
    """The body this process serves, and the asks waiting for tokenwatch's answer."""

    def __init__(self, to_parent: BinaryIO) -> None:
        self.body: bytes | None = None
        self.packed: bytes | None = None
        self.error = "no body from tokenwatch yet"
        self.live = False
        self.answered = 0  # the last ask tokenwatch answered
        self.asked = 0
        self.changed = threading.Condition()
        self._to_parent = to_parent
        self._write_lock = threading.Lock()

    def tell(self, line: str) -> None:
        """One line to tokenwatch; a tokenwatch gone is not this thread's problem (stdin's end stops us)."""
        try:
            with self._write_lock:
                self._to_parent.write(line.encode("utf-8", "replace") + b"\n")
                self._to_parent.flush()
        except (BrokenPipeError, ValueError, OSError):
            pass

    def log(self, level: int, message: str) -> None:
        self.tell(f"L {level} {message.replace(chr(10), ' ')}")

    def serve(self, gzip_ok: bool) -> tuple[bytes, bool] | str:
        """(body, gzipped) to send, or why there is none."""
        with self.changed:
            served = self._held(gzip_ok) if self.live else None
            if served is None:
                self.asked += 1
                seq = self.asked
                self.tell(f"A {seq} {int(gzip_ok)}")  # under the lock: asks reach tokenwatch in order
                self.changed.wait_for(lambda: self.answered >= seq, timeout=ANSWER_TIMEOUT_S)
                if self.answered < seq:
                    return "tokenwatch did not answer"
                return self._held(gzip_ok) or self.error
        self.tell(f"R {int(gzip_ok)}")  # a scrape came: tokenwatch renders the next body
        return served

    def _held(self, gzip_ok: bool) -> tuple[bytes, bool] | None:
        if self.body is None:
            return None
        if gzip_ok and self.packed is not None:
            return self.packed, True
        return self.body, False


def read_frames(held: Held, frames: BinaryIO) -> None:
    """tokenwatch's frames, until its end."""
    while line := frames.readline():
        kind, *fields = line.split()
        numbers = [int(f) for f in fields]
        if kind == b"M":
            with held.changed:
                held.live = bool(numbers[0])
            continue
        seq, live = numbers[0], bool(numbers[1])
        body = packed = None
        error = ""
        if kind == b"B":
            body = frames.read(numbers[2])
            packed = frames.read(numbers[3]) or None
        elif kind == b"E":
            error = frames.read(numbers[2]).decode("utf-8", "replace")
        with held.changed:
            held.live = live
            if kind == b"B":
                held.body, held.packed = body, packed
            elif kind == b"E":
                held.error, held.body, held.packed = error, None, None
            held.answered = max(held.answered, seq)
            held.changed.notify_all()


class CrowdServer(ThreadingHTTPServer):
    """A deep listen backlog (the standard library's 5 left a crowd of scrapers waiting for SYN
    retransmits, 30 s and more), at most :data:`MAX_WORKERS` requests at once (more wait in the backlog),
    and no traceback on stderr for a client gone."""

    request_queue_size = LISTEN_BACKLOG
    daemon_threads = True

    def __init__(self, listening: socket.socket, handler: type[BaseHTTPRequestHandler], held: Held) -> None:
        super().__init__(listening.getsockname()[:2], handler, bind_and_activate=False)
        self.socket.close()
        self.socket = listening
        self.held = held
        self._workers = threading.BoundedSemaphore(MAX_WORKERS)

    def process_request(self, request: Any, client_address: Any) -> None:
        self._workers.acquire()
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._workers.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._workers.release()

    def handle_error(self, _request: Any, client_address: Any) -> None:
        exc = sys.exc_info()[1]
        if isinstance(exc, ConnectionError | TimeoutError | socket.timeout):
            self.held.log(DEBUG, f"/metrics client {client_address[0]} disconnected or timed out: {exc}")
        else:
            self.held.log(WARNING, f"/metrics request from {client_address[0]} failed: {exc!r}")


def handler_for(held: Held, client_timeout_s: float) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        timeout = client_timeout_s  # on the socket: reading the request and writing the response

        def do_GET(self) -> None:
            if self.path.split("?")[0] not in ("/metrics", "/"):
                self.send_error(404, "only /metrics here")
                return
            gzipped = False
            if self.path.startswith("/metrics"):
                served = held.serve("gzip" in self.headers.get("Accept-Encoding", ""))
                if isinstance(served, str):
                    self.send_error(500, f"tokenwatch could not read the core: {served}")
                    return
                (body, gzipped), kind = served, CONTENT_TYPE
            else:
                body, kind = b'<a href="/metrics">/metrics</a>\n', "text/html; charset=utf-8"
            self.send_response(200)
            self.send_header("Content-Type", kind)
            if gzipped:
                self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass  # scrapes every second would drown the headless log

    return Handler


def main() -> None:
    # Ctrl-C in a terminal signals the whole foreground group: tokenwatch stops the run and then closes
    # stdin here, which ends this process (a KeyboardInterrupt would print a traceback on its output).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    fd, client_timeout_s = int(sys.argv[1]), float(sys.argv[2])
    held = Held(sys.stdout.buffer)
    httpd = CrowdServer(socket.socket(fileno=fd), handler_for(held, client_timeout_s), held)
    threading.Thread(target=httpd.serve_forever, name="metrics-accept", daemon=True).start()
    read_frames(held, sys.stdin.buffer)
    httpd.socket.close()  # tokenwatch is gone or closed us: the port is free at once
    os._exit(0)  # answering threads mid-send are daemons: nothing to wait for


if __name__ == "__main__":
    main()
