"""The helpers that start the tests' servers (Prometheus, Alertmanager, sshd nodes, exporters, vLLM) on
free ports: a server counts as up only once its own process listens, one that lost its port to another
process is started again elsewhere, and a "nothing listens there" port stays refused."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from tests.conftest import (
    ServerExitedError,
    free_port,
    listening_addresses,
    listens,
    refusing_port,
    start_listening,
    stop_process,
    wait_listening,
)

SLEEPER = [sys.executable, "-c", "import time; time.sleep(600)"]


def http_server(port: int) -> subprocess.Popen[bytes]:
    """Python's own HTTP server on 127.0.0.1:``port``: it exits (address in use) if the port is taken."""
    return subprocess.Popen(
        [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def test_another_process_listening_on_the_port_is_not_the_server() -> None:
    """A connection to the port succeeds (this test listens there), yet the server never listened."""
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        socket.create_connection(("127.0.0.1", port), timeout=5).close()  # something answers there
        sleeper = subprocess.Popen(SLEEPER)
        try:
            assert not listens(sleeper.pid, port)
            # a process that never listens: a short ceiling, since no load makes it listen
            with pytest.raises(AssertionError, match="listening on port"):
                wait_listening(sleeper, port, "the sleeper", timeout_s=0.5)
        finally:
            stop_process(sleeper)


def test_a_server_that_lost_its_port_says_so_and_is_started_again_elsewhere() -> None:
    taken: list[int] = []
    held: list[socket.socket] = []

    def start(port: int) -> subprocess.Popen[bytes]:
        if not taken:  # another process takes the first port between the ask and the server's bind
            thief = socket.socket()
            thief.bind(("127.0.0.1", port))
            thief.listen()
            held.append(thief)
            taken.append(port)
        return http_server(port)

    try:
        proc, port = start_listening(start, "the HTTP server")
        try:
            assert port != taken[0]
            assert listening_addresses(proc.pid, port) == {"127.0.0.1"}
            assert not listens(proc.pid, taken[0])
        finally:
            stop_process(proc)
        with pytest.raises(ServerExitedError, match="exited"):
            wait_listening(http_server(taken[0]), taken[0], "a server told a taken port")
    finally:
        for s in held:
            s.close()


def test_a_refusing_port_refuses_and_no_server_can_take_it() -> None:
    port = refusing_port()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5)
    server = http_server(port)
    with pytest.raises(ServerExitedError):
        wait_listening(server, port, "a server told a refusing port")
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5)


def test_free_port_never_hands_the_same_port_twice() -> None:
    ports = [free_port() for _ in range(200)]
    assert len(set(ports)) == len(ports)
