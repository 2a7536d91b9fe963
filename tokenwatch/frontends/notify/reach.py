"""``tokenwatch check``: can each HTTP receiver be reached? A TCP connection to its host and port, no
request sent (a notification is news; a check must not page anyone)."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

from tokenwatch.base.yaml_schema import KeyPath
from tokenwatch.inputs.notify_config import NotifyConfig, expand_env

PROBE_TIMEOUT_S = 5.0


def unreachable_receivers(
    config: NotifyConfig, timeout_s: float = PROBE_TIMEOUT_S
) -> list[tuple[KeyPath, str]]:
    """(key path under ``notify``, why) for each HTTP receiver nothing answers at; the why names the host
    and port only (a URL's path may be a credential)."""
    problems: list[tuple[KeyPath, str]] = []
    for i, receiver in enumerate(config.receivers):
        if receiver.url is None:
            continue
        at: KeyPath = ("to", i, receiver.kind) if i < len(config.to) else (receiver.kind,)
        parts = urlsplit(expand_env(receiver.url))
        host = parts.hostname or ""
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:
            with socket.create_connection((host, port), timeout=timeout_s):
                pass
        except socket.gaierror:
            problems.append((at, f"unreachable: no such host {host!r}"))
        except TimeoutError:
            problems.append((at, f"unreachable: {host}:{port} did not answer within {timeout_s:g} s"))
        except OSError as exc:
            problems.append((at, f"unreachable: {host}:{port}: {exc.strerror or type(exc).__name__}"))
    return problems
