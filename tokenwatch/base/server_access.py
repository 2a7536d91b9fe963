"""How a client reaches an HTTP server that wants more than a URL: extra headers (a tenant's
``X-Scope-OrgID`` for Mimir, Cortex or Thanos), a bearer token or basic auth, and TLS with the server's own
CA, a client certificate and (only when asked) no verification at all.

A secret is never held in a config, a ``repr``, a message or a recording: the config names where it is
(a file, or an environment variable) and it is read when a client's connection pool is made, so a rotated
token file is picked up by the next pool. Every problem is :class:`AccessError`, one line naming where the
secret was to come from, never the secret.
"""

from __future__ import annotations

import base64
import os
import ssl
import stat
from dataclasses import dataclass

MAX_SECRET_BYTES = 16 * 1024  # a JWT is a few KiB; a file bigger than this is not a token


class AccessError(Exception):
    """A secret or a TLS file that cannot be used; one line, without the secret."""


def private_file_problem(path: str) -> str | None:
    """Why a file holding a secret (a token, a password, a private key) must not be used: missing, not
    a regular file, or readable by every user of the machine; None when it may be."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return f"no such file: {path}"
    except OSError as exc:
        return f"cannot read {path}: {exc.strerror or exc}"
    if not stat.S_ISREG(info.st_mode):
        return f"not a regular file: {path}"
    if info.st_mode & stat.S_IROTH:
        mode = stat.S_IMODE(info.st_mode)
        return f"{path} is readable by every user (mode {mode:04o}): chmod o-r {path}"
    return None


@dataclass(frozen=True, slots=True)
class SecretFrom:
    """Where one secret is read: ``file`` (a path) or ``env`` (a variable's name), never the secret."""

    file: str | None = None
    env: str | None = None

    def where(self) -> str:
        return f"file {self.file}" if self.file is not None else f"environment variable {self.env}"

    def problem(self) -> str | None:
        """Why :meth:`read` would fail, or None."""
        try:
            self.read()
        except AccessError as exc:
            return str(exc)
        return None

    def read(self) -> str:
        """The secret, stripped of surrounding whitespace (a file's last newline)."""
        if self.file is not None:
            problem = private_file_problem(self.file)
            if problem is not None:
                raise AccessError(problem)
            try:
                with open(self.file, "rb") as handle:
                    raw = handle.read(MAX_SECRET_BYTES + 1)
            except OSError as exc:
                raise AccessError(f"cannot read {self.file}: {exc.strerror or exc}") from None
            if len(raw) > MAX_SECRET_BYTES:
                raise AccessError(f"{self.file} is larger than {MAX_SECRET_BYTES // 1024} KiB: not a secret")
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise AccessError(f"{self.file} is not UTF-8 text") from None
        else:
            assert self.env is not None
            value = os.environ.get(self.env)
            if value is None:
                raise AccessError(f"environment variable {self.env} is not set")
            text = value
        secret = text.strip()
        if not secret:
            raise AccessError(f"{self.where()} is empty")
        # A line break would end the header it goes into and start another one of the file's choosing.
        if any(ch in secret for ch in "\r\n\0"):
            raise AccessError(f"{self.where()} holds more than one line")
        return secret


@dataclass(frozen=True, slots=True)
class ServerAccess:
    """Everything beyond the URL: ``headers`` sent with every request; ``bearer`` or
    ``username`` + ``password`` for the ``Authorization`` header; ``ca_file`` (PEM) trusted instead of
    the system's CAs; ``cert_file`` + ``key_file`` a client certificate; ``insecure_skip_verify`` turns
    certificate checking off (a lab server with a self-signed certificate)."""

    headers: tuple[tuple[str, str], ...] = ()
    bearer: SecretFrom | None = None
    username: str | None = None
    password: SecretFrom | None = None
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    insecure_skip_verify: bool = False

    def request_headers(self) -> dict[str, str]:
        """The headers of every request, the ``Authorization`` header with its secret read now."""
        out = dict(self.headers)
        if self.bearer is not None:
            out["Authorization"] = f"Bearer {self.bearer.read()}"
        elif self.username is not None and self.password is not None:
            pair = f"{self.username}:{self.password.read()}".encode()
            out["Authorization"] = "Basic " + base64.b64encode(pair).decode("ascii")
        return out

    @property
    def uses_tls_settings(self) -> bool:
        return self.ca_file is not None or self.cert_file is not None or self.insecure_skip_verify

    def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context for ``https://`` (None: the system's CAs and full verification, the
        default)."""
        if not self.uses_tls_settings:
            return None
        try:
            context = ssl.create_default_context(cafile=self.ca_file)
        except (OSError, ssl.SSLError) as exc:
            raise AccessError(f"cannot use CA file {self.ca_file}: {_ssl_reason(exc)}") from None
        if self.insecure_skip_verify:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if self.cert_file is not None:
            if self.key_file is not None:
                problem = private_file_problem(self.key_file)
                if problem is not None:
                    raise AccessError(problem)
            try:
                context.load_cert_chain(self.cert_file, self.key_file)
            except (OSError, ssl.SSLError) as exc:
                raise AccessError(
                    f"cannot use client certificate {self.cert_file} with key {self.key_file}: "
                    f"{_ssl_reason(exc)}"
                ) from None
        return context

    def describe(self) -> str:
        """What is sent, in words and without a secret (``tokenwatch check``)."""
        parts = []
        if self.bearer is not None:
            parts.append(f"bearer token from {self.bearer.where()}")
        elif self.username is not None and self.password is not None:
            parts.append(f"basic auth as {self.username} (password from {self.password.where()})")
        if self.headers:
            parts.append("headers " + ", ".join(name for name, _ in self.headers))
        if self.ca_file is not None:
            parts.append(f"CA {self.ca_file}")
        if self.cert_file is not None:
            parts.append(f"client certificate {self.cert_file}")
        if self.insecure_skip_verify:
            parts.append("certificates NOT verified (insecure_skip_verify)")
        return ", ".join(parts)


def _ssl_reason(exc: OSError | ssl.SSLError) -> str:
    if isinstance(exc, ssl.SSLError):
        return str(exc.reason or exc).lower().replace("_", " ")
    return exc.strerror or str(exc)
