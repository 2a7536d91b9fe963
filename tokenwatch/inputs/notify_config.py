"""Where alerts are pushed: the ``notify:`` section of a watch config, a notify file, or ``--notify``.

The same schema everywhere (:class:`NotifyConfig`), checked before anything runs: every problem is one
line naming the key (``rack.yaml:31: notify.to.1.command: ./page-me.sh is not executable``). Secrets stay
out of files: a URL or header value may name an environment variable (``${SLACK_WEBHOOK_URL}``), read when
the run starts, and a literal credential in an authorisation header is refused.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from tokenwatch.base.yaml_schema import (
    KeyPath,
    Reader,
    SchemaError,
    duration_field,
    internal_field,
    load_yaml,
)

Severity = Literal["info", "warning", "critical"]
SEVERITIES: tuple[str, ...] = ("info", "warning", "critical")
# What can be pushed; each core alert belongs to one (frontends/notify/alert_kinds.py says which).
NOTIFY_KINDS: tuple[str, ...] = (
    "verdict",
    "node-down",
    "straggler",
    "cause",
    "power-limit",
    "run-end",
    "throttle",
    "sla",
    "notice",
)
# Notices (a skipped line, a reconnect) are for the screen; everything else is pushed unless narrowed.
DEFAULT_KINDS: tuple[str, ...] = tuple(k for k in NOTIFY_KINDS if k != "notice")
RECEIVER_KINDS: tuple[str, ...] = ("alertmanager", "webhook", "slack", "command")
_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_CREDENTIAL_HEADER = re.compile(r"auth|token|key|secret|cookie|password", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class ReceiverConfig:
    """One place alerts go: exactly one of the four kinds. ``headers`` go with HTTP receivers."""

    alertmanager: str | None = None
    webhook: str | None = None
    slack: str | None = None
    command: str | list[str] | None = None
    headers: dict[str, str] | None = None

    @property
    def kind(self) -> str:
        return next(k for k in RECEIVER_KINDS if getattr(self, k) is not None)

    @property
    def url(self) -> str | None:
        """The receiver's URL as written (``${VAR}`` not yet expanded); None for a command."""
        return self.alertmanager or self.webhook or self.slack

    @property
    def argv(self) -> tuple[str, ...]:
        """A command receiver's program and arguments (no shell)."""
        command = self.command
        return (command,) if isinstance(command, str) else tuple(command or ())


@dataclass(frozen=True, slots=True)
class NotifyConfig:
    """Receivers (``to``, or one given by its kind's key) and which alerts reach them.

    ``hold_s`` is run time: a condition that clears and comes back within it was never cleared (one page,
    not one per flap). ``group_wait_s`` is wall time: alerts of one kind that arrive within it go out as
    one message. ``resend_s``: how often Alertmanager hears an active alert again (it expires after four
    of these unheard). ``retry_for_s``: how long a failing receiver is retried before one warning.
    """

    to: list[ReceiverConfig] = field(default_factory=list)
    alertmanager: str | None = None
    webhook: str | None = None
    slack: str | None = None
    command: str | list[str] | None = None
    headers: dict[str, str] | None = None
    min_severity: Severity = "warning"
    kinds: list[str] | None = None
    hold_s: float = duration_field(120.0, key="hold")
    group_wait_s: float = duration_field(2.0, key="group_wait")
    resend_s: float = duration_field(60.0, key="resend")
    retry_for_s: float = duration_field(120.0, key="retry_for")
    timeout_s: float = duration_field(10.0, key="timeout")
    queue: int = 1000
    base_dir: str = internal_field("")  # where relative command paths are found (set by the loader)

    @property
    def receivers(self) -> tuple[ReceiverConfig, ...]:
        shorthand = ReceiverConfig(self.alertmanager, self.webhook, self.slack, self.command, self.headers)
        given = any(getattr(shorthand, k) is not None for k in RECEIVER_KINDS)
        return (*self.to, shorthand) if given else tuple(self.to)

    @property
    def wanted_kinds(self) -> frozenset[str]:
        return frozenset(DEFAULT_KINDS if self.kinds is None else self.kinds)

    def with_receivers(self, extra: tuple[ReceiverConfig, ...]) -> NotifyConfig:
        return dataclasses.replace(
            self,
            to=[*self.receivers, *extra],
            alertmanager=None,
            webhook=None,
            slack=None,
            command=None,
            headers=None,
        )


def expand_env(text: str, environ: Mapping[str, str] | None = None) -> str:
    """``${NAME}`` replaced by the environment's value; raises KeyError naming a variable that is unset."""
    env = os.environ if environ is None else environ

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in env:
            raise KeyError(name)
        return env[name]

    return _ENV.sub(value, text)


def check_notify(reader: Reader, config: NotifyConfig, at: KeyPath) -> None:
    """Every problem :func:`load_notify_file`, the watch config and ``check`` refuse (see the module). A
    section without receivers is one: its filters apply to the receivers ``--notify`` gives."""
    receivers = config.receivers
    for i, receiver in enumerate(config.to):
        check_receiver(reader, receiver, (*at, "to", i), config.base_dir)
    if len(receivers) > len(config.to):
        check_receiver(reader, receivers[-1], at, config.base_dir)
    for i, kind in enumerate(config.kinds or ()):
        if kind not in NOTIFY_KINDS:
            raise reader.error((*at, "kinds", i), f"unknown kind {kind!r} (known: {', '.join(NOTIFY_KINDS)})")
    for key, value in (("hold", config.hold_s), ("group_wait", config.group_wait_s)):
        if value < 0:
            raise reader.error((*at, key), "must be 0s or longer")
    for key, value in (
        ("resend", config.resend_s),
        ("retry_for", config.retry_for_s),
        ("timeout", config.timeout_s),
    ):
        if value <= 0:
            raise reader.error((*at, key), "must be longer than zero")
    if not 1 <= config.queue <= 1_000_000:
        raise reader.error((*at, "queue"), "must be between 1 and 1000000 messages")


def check_receiver(reader: Reader, receiver: ReceiverConfig, at: KeyPath, base_dir: str) -> None:
    given = [k for k in RECEIVER_KINDS if getattr(receiver, k) is not None]
    if len(given) != 1:
        what = "none" if not given else " and ".join(given)
        raise reader.error(at, f"a receiver is one of {', '.join(RECEIVER_KINDS)} (got {what})")
    kind = given[0]
    if kind == "command":
        if receiver.headers is not None:
            raise reader.error((*at, "headers"), "only for alertmanager, webhook and slack receivers")
        problem = command_problem(receiver.argv, base_dir)
        if problem:
            raise reader.error((*at, "command"), problem)
        return
    url = receiver.url or ""
    problem = url_problem(url)
    if problem:
        raise reader.error((*at, kind), problem)
    for name, value in (receiver.headers or {}).items():
        if not _HEADER_NAME.fullmatch(name):
            raise reader.error((*at, "headers", name), "not an HTTP header name")
        if "\n" in value or "\r" in value:
            raise reader.error((*at, "headers", name), "a header value is one line")
        if _CREDENTIAL_HEADER.search(name) and not _ENV.search(value):
            raise reader.error(
                (*at, "headers", name),
                "a credential does not belong in the file: name an environment variable, e.g. "
                '"Bearer ${NOTIFY_TOKEN}"',
            )
        try:
            expand_env(value)
        except KeyError as exc:
            raise reader.error(
                (*at, "headers", name), f"environment variable {exc.args[0]} is not set"
            ) from None


def url_problem(url: str) -> str:
    """Why ``url`` cannot be posted to ("" when it can), never quoting it (it may hold a secret)."""
    try:
        expanded = expand_env(url)
    except KeyError as exc:
        return f"environment variable {exc.args[0]} is not set"
    try:
        parts = urlsplit(expanded)
        _ = parts.port  # raises on a port that is not a number or out of range
    except ValueError as exc:
        return f"bad URL: {exc}"
    if parts.scheme not in ("http", "https"):
        return "bad URL: only http:// and https:// are supported"
    if not parts.hostname:
        return "bad URL: no host"
    if parts.password is not None:
        return "passwords are not accepted in a URL (remove user:password@; use a header from ${VAR})"
    return ""


def command_problem(argv: tuple[str, ...], base_dir: str) -> str:
    """Why ``argv`` cannot be run ("" when it can)."""
    if not argv or not argv[0].strip():
        return "no program given"
    program = resolve_program(argv[0], base_dir)
    if program is None:
        return f"{argv[0]}: no such program (not a file, nor on PATH)"
    if not os.access(program, os.X_OK) or Path(program).is_dir():
        return f"{argv[0]} is not executable (chmod +x it)"
    return ""


def resolve_program(name: str, base_dir: str) -> str | None:
    """A program named with a slash is a path (relative to ``base_dir``, the config's folder); a bare name
    is looked up on PATH. None when there is no such file."""
    if "/" in name:
        path = Path(name).expanduser()
        if not path.is_absolute() and base_dir:
            path = Path(base_dir) / path
        return str(path) if path.exists() else None
    return shutil.which(name)


def load_notify_file(path: str | Path) -> NotifyConfig:
    """A YAML file with a top-level ``notify:`` section (as a watch config has it), for sim and replay."""
    data, lines = load_yaml(path)
    reader = Reader(str(path), lines)
    if not isinstance(data, Mapping) or set(data) != {"notify"}:
        raise reader.error((), "a notify file holds one top-level key, 'notify'")
    return read_notify(reader, data["notify"], ("notify",), str(Path(path).resolve().parent))


def read_notify(reader: Reader, raw: Any, at: KeyPath, base_dir: str) -> NotifyConfig:
    config = reader.build(NotifyConfig, raw, at)
    config = dataclasses.replace(config, base_dir=base_dir)
    check_notify(reader, config, at)
    return config


def receiver_from_arg(text: str) -> ReceiverConfig:
    """``--notify [KIND=]TARGET`` (KIND alertmanager, webhook (the default), slack or command). Raises
    SchemaError (one line, naming --notify) for a target that cannot be used."""
    if text.endswith((".yaml", ".yml")) and "://" not in text:
        raise SchemaError(f"--notify {text}: no such file (a notify file, or [KIND=]URL)")
    kind, sep, target = text.partition("=")
    if not sep or kind not in RECEIVER_KINDS:
        kind, target = "webhook", text
    if kind == "command" and "/" in target and not Path(target).expanduser().is_absolute():
        target = str(Path.cwd() / target)  # found where the command was given, whatever else is joined
    fields: dict[str, Any] = {kind: target}
    receiver = ReceiverConfig(**fields)
    reader = Reader("--notify", {})
    try:
        check_receiver(reader, receiver, (), str(Path.cwd()))
    except SchemaError as exc:
        raise SchemaError(f"--notify {kind}: {str(exc).split(': ', 2)[-1]}") from None
    return receiver
