"""The fleet config's ``auth`` and ``headers``: how the watch reaches a Prometheus-API server that wants
more than a URL (Mimir, Cortex or Thanos behind a gateway, a managed Prometheus, VictoriaMetrics behind
vmauth), checked before anything connects.

Secrets stay out of the config: a bearer token or a basic-auth password is named by the file or the
environment variable that holds it (``bearer_token_file``, ``password_env``, ...). A secret file must
exist and not be readable by every user; a URL must not carry credentials or a query string (where
tokens hide); a header that would carry a secret (``Authorization``, a ``...-Token``) is refused in favour
of ``auth``. Every problem is one line naming the config file, its line and the key.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tokenwatch.base.server_access import AccessError, SecretFrom, ServerAccess, private_file_problem
from tokenwatch.base.yaml_schema import KeyPath, Reader

_AUTH = ("fleet", "auth")
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # an HTTP token (RFC 9110)
# Header names that carry credentials: given through ``auth`` (from a file or variable), never inline.
_SECRET_HEADER_WORDS = ("authorization", "cookie", "token", "secret", "password", "apikey", "api-key")


@dataclass(frozen=True, slots=True)
class FleetAuth:
    """``fleet.auth``: a bearer token or basic auth (each secret from a file or an environment
    variable), and TLS settings for an ``https://`` URL."""

    bearer_token_file: str | None = None
    bearer_token_env: str | None = None
    username: str | None = None  # basic auth, with password_file or password_env
    password_file: str | None = None
    password_env: str | None = None
    ca_file: str | None = None  # PEM: the CA(s) that signed the server's certificate
    cert_file: str | None = None  # PEM client certificate, with key_file
    key_file: str | None = None
    insecure_skip_verify: bool = False  # do not check the server's certificate at all


def with_paths_from(auth: FleetAuth | None, folder: Path) -> FleetAuth | None:
    """``auth`` with its file paths absolute: a relative one is taken from the config's folder (the
    config is read from anywhere, its files lie beside it)."""
    if auth is None:
        return None
    changes: dict[str, Any] = {}
    for key in ("bearer_token_file", "password_file", "ca_file", "cert_file", "key_file"):
        value = getattr(auth, key)
        if value is not None:
            where = Path(value).expanduser()
            changes[key] = str(where if where.is_absolute() else folder / where)
    return dataclasses.replace(auth, **changes)


def server_access(auth: FleetAuth | None, headers: dict[str, str] | None) -> ServerAccess:
    """What the fleet's client sends (the secrets themselves are read when its pool is made)."""
    pairs = tuple((headers or {}).items())
    if auth is None:
        return ServerAccess(headers=pairs)
    bearer = _secret(auth.bearer_token_file, auth.bearer_token_env)
    password = _secret(auth.password_file, auth.password_env)
    return ServerAccess(
        headers=pairs,
        bearer=bearer,
        username=auth.username if password is not None else None,
        password=password,
        ca_file=auth.ca_file,
        cert_file=auth.cert_file,
        key_file=auth.key_file,
        insecure_skip_verify=auth.insecure_skip_verify,
    )


def _secret(file: str | None, env: str | None) -> SecretFrom | None:
    if file is not None:
        return SecretFrom(file=file)
    if env is not None:
        return SecretFrom(env=env)
    return None


def check_fleet_url(reader: Reader, path: KeyPath, url: str) -> None:
    """An ``http://`` or ``https://`` base URL with a host, and no credentials or query in it."""
    try:
        parts = urlsplit(url)
        _ = parts.port  # raises on a port that is not a number or out of range
    except ValueError as exc:
        raise reader.error(path, f"bad URL {url!r}: {exc}") from None
    if parts.username is not None or parts.password is not None:
        # Said without the URL: what is before the @ may be a secret.
        raise reader.error(
            path, "credentials are not accepted in the URL (remove user@ / user:password@; use fleet.auth)"
        )
    if parts.query or parts.fragment:
        raise reader.error(
            path,
            "a query string is not accepted in the URL (a token there would be logged; use fleet.auth "
            "or fleet.headers)",
        )
    if parts.scheme not in ("http", "https"):
        raise reader.error(path, f"bad URL {url!r}: only http:// and https:// are supported")
    if not parts.hostname:
        raise reader.error(path, f"bad URL {url!r}: no host")


def check_fleet_access(
    reader: Reader, url: str, auth: FleetAuth | None, headers: dict[str, str] | None
) -> None:
    """``fleet.auth`` and ``fleet.headers`` against each other and the URL; the secret files and
    variables present and private, the TLS files loadable."""
    for name, value in (headers or {}).items():
        _check_header(reader, name, value)
    if auth is None:
        return
    _check_secrets(reader, auth)
    tls = [k for k in ("ca_file", "cert_file", "key_file") if getattr(auth, k) is not None]
    if auth.insecure_skip_verify:
        tls.append("insecure_skip_verify")
    if tls and urlsplit(url).scheme != "https":
        raise reader.error((*_AUTH, tls[0]), "only for an https:// URL (fleet.url is http://)")
    if (auth.cert_file is None) != (auth.key_file is None):
        given, missing = ("cert_file", "key_file") if auth.key_file is None else ("key_file", "cert_file")
        raise reader.error((*_AUTH, given), f"needs {missing} beside it (a client certificate and its key)")
    for key in ("ca_file", "cert_file"):
        value = getattr(auth, key)
        if value is not None and not Path(value).is_file():
            raise reader.error((*_AUTH, key), f"no such file: {value}")
    if auth.key_file is not None:
        problem = private_file_problem(auth.key_file)
        if problem is not None:
            raise reader.error((*_AUTH, "key_file"), problem)
    try:
        server_access(auth, None).ssl_context()
    except AccessError as exc:
        key = "ca_file" if "CA file" in str(exc) else "cert_file"
        raise reader.error((*_AUTH, key), str(exc)) from None


def _check_secrets(reader: Reader, auth: FleetAuth) -> None:
    for first, second in (("bearer_token_file", "bearer_token_env"), ("password_file", "password_env")):
        if getattr(auth, first) is not None and getattr(auth, second) is not None:
            raise reader.error((*_AUTH, second), f"give {first} or {second}, not both")
    bearer = auth.bearer_token_file is not None or auth.bearer_token_env is not None
    password = auth.password_file is not None or auth.password_env is not None
    if bearer and (auth.username is not None or password):
        raise reader.error(_AUTH, "give a bearer token or basic auth (username and password), not both")
    if auth.username is not None and not password:
        raise reader.error((*_AUTH, "username"), "basic auth needs password_file or password_env beside it")
    if password and auth.username is None:
        key = "password_file" if auth.password_file is not None else "password_env"
        raise reader.error((*_AUTH, key), "basic auth needs a username beside it")
    if auth.username is not None and (":" in auth.username or not auth.username.strip()):
        raise reader.error((*_AUTH, "username"), "must not be empty or hold a ':'")
    for key in ("bearer_token_file", "bearer_token_env", "password_file", "password_env"):
        value = getattr(auth, key)
        if value is None:
            continue
        if key.endswith("_env") and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value):
            raise reader.error((*_AUTH, key), f"not an environment variable's name: {value!r}")
        source = SecretFrom(file=value) if key.endswith("_file") else SecretFrom(env=value)
        problem = source.problem()
        if problem is not None:
            raise reader.error((*_AUTH, key), problem)


def _check_header(reader: Reader, name: str, value: str) -> None:
    path = ("fleet", "headers", name)
    if not _HEADER_NAME.fullmatch(name):
        raise reader.error(path, "not an HTTP header name")
    squeezed = name.lower().replace("_", "-")
    if any(word in squeezed or word in squeezed.replace("-", "") for word in _SECRET_HEADER_WORDS):
        raise reader.error(
            path,
            "secrets are not accepted in the config: give a token through fleet.auth "
            "(bearer_token_file / bearer_token_env, or username with password_file / password_env)",
        )
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in value):
        raise reader.error(path, "a header value must be one line of printable text")
