"""The receivers as they run: URLs and headers with ``${VAR}`` read from the environment, and one send.

A receiver is named in warnings by :attr:`Receiver.shown` alone (``webhook https://hooks.example.com/...``):
a webhook's path or query, and every header value, may be a credential, so none of them is ever printed,
and :meth:`Receiver.scrub` takes them out of any error text before it is shown.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import orjson

from tokenwatch.inputs.notify_config import NotifyConfig, ReceiverConfig, expand_env, resolve_program

_MAX_ANSWER = 64 * 1024


class SendError(Exception):
    """One send that did not arrive; ``retry`` False where trying again cannot help (a 4xx answer)."""

    def __init__(self, why: str, *, retry: bool = True) -> None:
        super().__init__(why)
        self.retry = retry


@dataclass(frozen=True, slots=True)
class Receiver:
    kind: str  # alertmanager | webhook | slack | command
    url: str = ""  # expanded; "" for a command
    headers: tuple[tuple[str, str], ...] = ()
    argv: tuple[str, ...] = ()
    secrets: tuple[str, ...] = field(default=(), repr=False)

    @property
    def shown(self) -> str:
        """How warnings name it: the kind and the scheme and host only (a command: its program)."""
        if self.kind == "command":
            return f"command {self.argv[0]}"
        parts = urlsplit(self.url)
        host = parts.hostname or ""
        netloc = f"[{host}]" if ":" in host else host
        if parts.port:
            netloc += f":{parts.port}"
        more = "/..." if parts.path.strip("/") or parts.query else ""
        return f"{self.kind} {parts.scheme}://{netloc}{more}"

    def scrub(self, text: str) -> str:
        """``text`` with every secret this receiver holds replaced by ``...``."""
        for secret in sorted(self.secrets, key=len, reverse=True):
            if secret:
                text = text.replace(secret, "...")
        return text


def runtime_receiver(config: ReceiverConfig, base_dir: str) -> Receiver:
    """``config`` with its ``${VAR}`` read now (checked already: :func:`check_receiver`)."""
    if config.kind == "command":
        argv = config.argv
        program = resolve_program(argv[0], base_dir) or argv[0]
        return Receiver("command", argv=(program, *argv[1:]))
    url = expand_env(config.url or "")
    headers = tuple((name, expand_env(value)) for name, value in (config.headers or {}).items())
    parts = urlsplit(url)
    secrets = [url, parts.path, parts.query, parts.netloc.rpartition("@")[0]]
    secrets += [value for _, value in headers]
    secrets += [piece for _, value in headers for piece in value.split() if len(piece) >= 6]
    secrets += [piece for piece in parts.path.split("/") if len(piece) >= 6]
    return Receiver(config.kind, url=url, headers=headers, secrets=tuple(s for s in secrets if s))


def runtime_receivers(config: NotifyConfig) -> list[Receiver]:
    return [runtime_receiver(r, config.base_dir) for r in config.receivers]


class HttpPoster:
    """POSTs JSON with aiohttp: a session per send, so no connection outlives the event loop it was made
    on (the dashboard's ends before the last messages go out on a fresh one)."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s

    async def post(self, receiver: Receiver, body: object) -> None:
        import aiohttp

        url = receiver.url
        if receiver.kind == "alertmanager":
            url = url.rstrip("/") + "/api/v2/alerts"
        headers = {"Content-Type": "application/json", "User-Agent": "tokenwatch", **dict(receiver.headers)}
        try:
            async with (
                aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout_s)) as session,
                session.post(url, data=orjson.dumps(body), headers=headers) as answer,
            ):
                await answer.content.read(_MAX_ANSWER)
                status = answer.status
        except TimeoutError:
            raise SendError(f"no answer within {self.timeout_s:g} s") from None
        except aiohttp.ClientConnectorError as exc:
            why = exc.os_error.strerror or type(exc.os_error).__name__
            raise SendError(f"cannot connect ({receiver.scrub(why)})") from None
        except (aiohttp.ClientError, OSError, ValueError) as exc:
            raise SendError(receiver.scrub(f"{type(exc).__name__}: {exc}")) from None
        if status >= 300:
            # 408, 429 and 5xx: the receiver may do better later; any other 4xx never will.
            raise SendError(f"HTTP {status}", retry=status >= 500 or status in (408, 429))


async def run_command(receiver: Receiver, body: object, timeout_s: float) -> None:
    """The command with ``body`` as JSON on its stdin (no shell); exit status 0 is delivered."""
    try:
        proc = await asyncio.create_subprocess_exec(
            *receiver.argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
    except OSError as exc:
        raise SendError(f"cannot start: {exc.strerror or exc}", retry=False) from None
    try:
        async with asyncio.timeout(timeout_s):
            _, err = await proc.communicate(orjson.dumps(body) + b"\n")
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        raise SendError(f"did not finish within {timeout_s:g} s") from None
    if proc.returncode != 0:
        last = err.decode("utf-8", "replace").strip().splitlines()[-1:] if err else []
        said = f": {last[0][:200]}" if last else ""
        raise SendError(f"exit status {proc.returncode}{said}")


def describe(receivers: Sequence[Receiver]) -> str:
    return ", ".join(r.shown for r in receivers)
