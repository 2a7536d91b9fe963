"""Opening one node's SSH connection: host keys verified, at most N handshakes at once, and every
failure turned into one line that says what to do.

Host keys are checked against ``known_hosts`` (asyncssh does the matching and the proof that the
server holds the key). A key asyncssh does not trust comes to :meth:`HostKeyClient.validate_host_public_key`:
if known_hosts has *no* key for that host it is **unknown** (recorded only with
``--accept-new-host-keys``, and only once the handshake proved it), otherwise it **changed** and
is refused, always. ``~/.ssh/config`` (HostName, Port, User, IdentityFile, ProxyJump) is read by
asyncssh itself; password and keyboard-interactive authentication are off: keys or the agent.
"""

from __future__ import annotations

import asyncio
import os
import re
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncssh

from tokenwatch.inputs.live.targets import NodeTarget

# AES-GCM first: asyncssh's chacha20-poly1305 builds two cipher contexts per packet, a quarter more
# CPU per small packet (one nvidia-smi round). The others remain for servers that offer only those.
PREFERRED_CIPHERS = [
    "aes128-gcm@openssh.com",
    "aes256-gcm@openssh.com",
    "chacha20-poly1305@openssh.com",
    "aes128-ctr",
    "aes192-ctr",
    "aes256-ctr",
]


class ConnectError(Exception):
    """Why a node could not be reached, in one line."""


class KnownHosts:
    """The known_hosts file, re-read when it changes; new keys appended (OpenSSH's format)."""

    def __init__(self, path: str) -> None:
        self.path = Path(path).expanduser()
        self._stamp: tuple[float, int] | None = None
        self._hosts: asyncssh.SSHKnownHosts = asyncssh.import_known_hosts("")

    def current(self) -> asyncssh.SSHKnownHosts:
        try:
            st = self.path.stat()
        except OSError:
            self._stamp, self._hosts = None, asyncssh.import_known_hosts("")
            return self._hosts
        stamp = (st.st_mtime, st.st_size)
        if stamp != self._stamp:
            self._hosts = asyncssh.read_known_hosts(str(self.path))
            self._stamp = stamp
        return self._hosts

    def has_keys_for(self, host: str, addr: str, port: int | None) -> bool:
        keys, ca_keys, *_ = self.current().match(host, addr, port)
        return bool(keys or ca_keys)

    def record(self, host: str, port: int | None, key: asyncssh.SSHKey) -> None:
        pattern = host if port in (None, 22) else f"[{host}]:{port}"
        algorithm, blob = key.export_public_key("openssh").decode("ascii").split()[:2]
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        with os.fdopen(fd, "a", encoding="ascii") as fh:
            fh.write(f"{pattern} {algorithm} {blob}\n")
        self._stamp = None


class HostKeyClient(asyncssh.SSHClient):
    """Says why a host key was refused, and holds a new one until the handshake proves it."""

    def __init__(self, known_hosts: KnownHosts, accept_new: bool) -> None:
        self.known_hosts = known_hosts
        self.accept_new = accept_new
        self.verdict: str | None = None
        self.new_key: tuple[str, int | None, asyncssh.SSHKey] | None = None
        self.lost_reason: str | None = None

    def validate_host_public_key(self, host: str, addr: str, port: int, key: asyncssh.SSHKey) -> bool:
        shown = host if port in (None, 22) else f"[{host}]:{port}"
        fingerprint = key.get_fingerprint()
        if self.known_hosts.has_keys_for(host, addr, port if port != 22 else None):
            # Reasons are recorded and reported: they name the node, never a path on this machine.
            self.verdict = (
                f"HOST KEY CHANGED for {shown} ({fingerprint}): refusing to connect; if the node was "
                f"reinstalled, remove the old key from ssh.known_hosts (ssh-keygen -R '{shown}' -f FILE)"
            )
            return False
        if self.accept_new:
            self.new_key = (host, port, key)
            return True
        self.verdict = (
            f"unknown host key for {shown} ({fingerprint}): not in ssh.known_hosts "
            "(add it with ssh-keyscan, or run with --accept-new-host-keys)"
        )
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost_reason = public_reason(_describe(exc)) if exc is not None else "connection closed"


@dataclass(frozen=True, slots=True)
class SshSettings:
    known_hosts: str = "~/.ssh/known_hosts"
    client_keys: tuple[Any, ...] | None = None  # loaded keys; None: ~/.ssh defaults and the agent
    connect_timeout_s: float = 10.0
    keepalive_s: float = 5.0
    keepalive_count_max: int = 3
    max_concurrent: int = 128
    accept_new_host_keys: bool = False


class SshConnector:
    """Opens connections for all nodes, at most ``max_concurrent`` handshakes in flight."""

    def __init__(self, settings: SshSettings) -> None:
        self.settings = settings
        self.known_hosts = KnownHosts(settings.known_hosts)
        self._handshakes = asyncio.Semaphore(settings.max_concurrent)
        self.in_flight = 0
        self.max_in_flight = 0

    async def connect(self, target: NodeTarget) -> tuple[asyncssh.SSHClientConnection, HostKeyClient]:
        s = self.settings
        client = HostKeyClient(self.known_hosts, s.accept_new_host_keys)
        options: dict[str, Any] = {
            "known_hosts": self.known_hosts.current(),
            "client_factory": lambda: client,
            "connect_timeout": s.connect_timeout_s,
            "login_timeout": s.connect_timeout_s,
            "keepalive_interval": s.keepalive_s,
            "keepalive_count_max": s.keepalive_count_max,
            "encryption_algs": PREFERRED_CIPHERS,
            "password_auth": False,
            "kbdint_auth": False,
        }
        if target.port is not None:
            options["port"] = target.port
        if target.user is not None:
            options["username"] = target.user
        if s.client_keys is not None:
            options["client_keys"] = list(s.client_keys)
        async with self._handshakes:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            try:
                conn = await asyncssh.connect(target.host, **options)
            except asyncssh.HostKeyNotVerifiable as exc:
                reason = client.verdict or f"host key not verified: {exc.reason}"
                raise ConnectError(public_reason(reason)) from None
            except asyncssh.PermissionDenied:
                raise ConnectError(
                    f"authentication failed at {target.host}: no key offered was accepted (client_keys, "
                    "~/.ssh or the agent)"
                ) from None
            except TimeoutError:
                raise ConnectError(f"no answer within {s.connect_timeout_s:g} s") from None
            except Exception as exc:
                raise ConnectError(public_reason(_describe(exc))) from None
            finally:
                self.in_flight -= 1
        if client.new_key is not None:  # the handshake proved the server holds it: remember it
            host, port, key = client.new_key
            self.known_hosts.record(host, port, key)
        return conn, client


# "user@" before a host, and absolute or home-relative paths (a fingerprint's base64 may hold "/", but
# never after a space or a quote).
_USER_AT = re.compile(r"(?<![\w.@-])[\w.-]+@(?=[\w\[])")
_LOCAL_PATH = re.compile(r"""(?<![^\s'"(=])~?/[^\s'"),;:]+""")


def public_reason(text: str) -> str:
    """A failure reason fit for recordings, snapshots and reports: no user names, no local paths."""
    return _LOCAL_PATH.sub("(a local file)", _USER_AT.sub("", text))


def _describe(exc: BaseException) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, socket.gaierror):
        return f"cannot resolve host name: {exc.strerror}"
    if isinstance(exc, asyncssh.ConnectionLost):
        return f"connection lost: {exc.reason}" if exc.reason else "connection lost"
    if isinstance(exc, asyncssh.DisconnectError):
        return f"disconnected: {exc.reason}"
    if isinstance(exc, asyncssh.Error):
        return exc.reason or type(exc).__name__
    if isinstance(exc, OSError):
        return exc.strerror or str(exc) or type(exc).__name__
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:200]
