"""Where a node's commands run: over its SSH connection, or on this machine (local mode).

Sources only see this small surface (start a streaming command, run a short one, open a TCP
stream), so the nvidia-smi stream and the metrics scrape are one piece of code for both.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any, Protocol

import asyncssh

from tokenwatch.inputs.live.remote_commands import watched

STDERR_KEEP = 2048  # the end of a command's stderr, for the message when it fails


class CommandStream(Protocol):
    async def read(self, n: int = 65536) -> bytes:
        """stdout bytes; ``b""`` at EOF."""
        ...

    async def finish(self) -> tuple[int | None, str]:
        """Exit status (None: unknown) and the end of stderr, once stdout ended."""
        ...

    async def aclose(self) -> None:
        """Stop the command (and, remotely, its channel) and wait briefly until it is gone."""
        ...


class Transport(Protocol):
    local: bool

    async def start(self, argv: Sequence[str], *, shell_command: str | None = None) -> CommandStream:
        """Stream ``argv`` (or, remotely, a ready-built ``shell_command``)."""
        ...

    async def run(self, shell_command: str, *, timeout_s: float = 10.0) -> tuple[int | None, bytes]: ...

    async def open_tcp(self, host: str, port: int) -> tuple[Any, Any]: ...


class _StderrTail:
    def __init__(self) -> None:
        self.data = b""

    async def drain(self, stream: Any) -> None:
        with contextlib.suppress(Exception):
            while chunk := await stream.read(65536):
                self.data = (self.data + chunk)[-STDERR_KEEP:]

    def text(self) -> str:
        return self.data.decode("utf-8", "replace").strip()


async def _settle(drain: asyncio.Future[None]) -> None:
    """Give stderr's reader a moment to take the last bytes (asyncio.timeout: never loses a cancel)."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(1):
            await asyncio.shield(drain)


class SshCommandStream:
    def __init__(self, process: asyncssh.SSHClientProcess[bytes]) -> None:
        self.process = process
        self._stderr = _StderrTail()
        self._drain = asyncio.ensure_future(self._stderr.drain(process.stderr))

    async def read(self, n: int = 65536) -> bytes:
        return await self.process.stdout.read(n)

    async def finish(self) -> tuple[int | None, str]:
        with contextlib.suppress(TimeoutError, asyncssh.Error):
            async with asyncio.timeout(5):
                await self.process.wait_closed()
        await _settle(self._drain)
        return self.process.exit_status, self._stderr.text()

    async def aclose(self) -> None:
        self._drain.cancel()
        self.process.close()  # closing the channel ends the remote watcher: the command is killed
        with contextlib.suppress(TimeoutError, asyncssh.Error):
            async with asyncio.timeout(2):
                await self.process.wait_closed()


class SshTransport:
    local = False

    def __init__(self, conn: asyncssh.SSHClientConnection) -> None:
        self.conn = conn

    async def start(self, argv: Sequence[str], *, shell_command: str | None = None) -> CommandStream:
        command = shell_command or watched(argv)
        process = await self.conn.create_process(command, encoding=None)
        return SshCommandStream(process)

    async def run(self, shell_command: str, *, timeout_s: float = 10.0) -> tuple[int | None, bytes]:
        result = await self.conn.run(shell_command, encoding=None, timeout=timeout_s, check=False)
        out = result.stdout
        return result.exit_status, out if isinstance(out, bytes) else b""

    async def open_tcp(self, host: str, port: int) -> tuple[Any, Any]:
        # a direct-tcpip channel: the node's sshd dials host:port from the node's side
        return await self.conn.open_connection(host, port, encoding=None)


class LocalCommandStream:
    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self._stderr = _StderrTail()
        self._drain = asyncio.ensure_future(self._stderr.drain(process.stderr))

    async def read(self, n: int = 65536) -> bytes:
        assert self.process.stdout is not None
        return await self.process.stdout.read(n)

    async def finish(self) -> tuple[int | None, str]:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(5):
                await self.process.wait()
        await _settle(self._drain)
        return self.process.returncode, self._stderr.text()

    async def aclose(self) -> None:
        self._drain.cancel()
        if self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.kill()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(2):
                await self.process.communicate()  # pipes to EOF: the transport closes in this loop


class LocalTransport:
    local = True

    async def start(self, argv: Sequence[str], *, shell_command: str | None = None) -> CommandStream:
        if shell_command is not None:
            raise ValueError("local commands run from an argv, never through a shell")
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        return LocalCommandStream(process)

    async def run(self, shell_command: str, *, timeout_s: float = 10.0) -> tuple[int | None, bytes]:
        raise NotImplementedError("local mode reads files directly")

    async def open_tcp(self, host: str, port: int) -> tuple[Any, Any]:
        return await asyncio.open_connection(host, port)
