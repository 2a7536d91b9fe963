"""Who may open ``tokenwatch serve``'s page and its websocket: the start's token, the page's own origin, a
host name that no other site can take over.

Browsers apply no same-origin policy to websockets, so without these rules any web page open in the
engineer's browser could read the run and press its keys:

- **the token**: a random one per start (:func:`new_token`), in the address serve prints
  (``http://127.0.0.1:8000/?token=...``, as Jupyter does). The page asks for it in its query, or in the cookie
  the page sets once a browser has shown it (so a reload without the query works); the websocket asks for it
  in its path (``/ws/TOKEN``: textual-serve's script appends its own ``?width=..`` to the address);
- **the Origin** of a websocket must be the page's own (``http://HOST:PORT`` with an allowed HOST): a foreign
  site's, ``null``, or none at all is refused;
- **the Host** of every request must name this server: the bound address, ``localhost``, or (bound to every
  address) any IP address or this machine's name, always with serve's port. An attacker's DNS name that
  points at 127.0.0.1 (DNS rebinding) would make their page same-origin; its Host gives it away.
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
import socket
from dataclasses import dataclass

from yarl import URL

TOKEN_BYTES = 24  # 32 URL-safe characters: as Jupyter's


def new_token() -> str:
    return secrets.token_urlsafe(TOKEN_BYTES)


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _wildcard(host: str) -> bool:
    return host.strip("[]") in ("", "0.0.0.0", "::")


@dataclass(frozen=True, slots=True)
class AccessRules:
    """The token, port and host names of one ``tokenwatch serve`` start."""

    token: str
    port: int
    host_names: frozenset[str]  # lower case, IPv6 without brackets
    any_ip: bool  # bound to every address: any IP literal names this machine

    @classmethod
    def for_server(cls, host: str, port: int, token: str) -> AccessRules:
        bound = host.strip("[]").lower()
        names = {bound, "localhost"}
        if bound == "localhost":  # bound to what localhost resolves to: its addresses are the bound ones
            names |= {"127.0.0.1", "::1"}
        if _wildcard(host):
            names |= {socket.gethostname().lower(), socket.getfqdn().lower()}
        return cls(token=token, port=port, host_names=frozenset(names), any_ip=_wildcard(host))

    @property
    def cookie_name(self) -> str:
        # Cookies are kept per host name, not per port: two serves on one machine must not share one.
        return f"tokenwatch-serve-{self.port}"

    def token_matches(self, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(given.encode(), self.token.encode())

    def _name_allowed(self, name: str | None, port: int | None) -> bool:
        if name is None or port != self.port:
            return False
        name = name.strip("[]").lower()
        return name in self.host_names or (self.any_ip and _is_ip(name))

    def host_refusal(self, host_header: str | None) -> str | None:
        """Why a request's ``Host`` header is refused, or None where it names this server."""
        if not host_header:
            return "no Host header"
        try:
            url = URL(f"http://{host_header}")
        except ValueError:
            return f"a malformed Host header {host_header!r}"
        if not self._name_allowed(url.raw_host, url.port):
            return f"Host {host_header!r} is not this server (DNS rebinding?)"
        return None

    def origin_refusal(self, origin: str | None) -> str | None:
        """Why a websocket's ``Origin`` is refused, or None where it is the page's own."""
        if not origin:
            return "no Origin header"
        try:
            url = URL(origin)
        except ValueError:
            return f"a malformed Origin {origin!r}"
        if url.scheme != "http" or not self._name_allowed(url.raw_host, url.port):
            return f"Origin {origin!r} is another site's"
        return None
