"""Who may open ``tokenwatch serve``: raw HTTP and websocket clients playing the attacks a web page could.

Browsers apply no same-origin policy to websockets, and an attacker's DNS name can point at 127.0.0.1; a page
of another site must neither read the dashboard nor press its keys. Each refusal is a 403, one line on the
terminal, and starts no run.
"""

from __future__ import annotations

import aiohttp
import psutil
import pytest

from tests.cli.serve.conftest import Served, ServeFactory
from tokenwatch.cli.serve_access import AccessRules

SIM = ("sim", "--speed", "0", "--duration", "2m")


async def _page_status(url: str, **headers: str) -> tuple[int, str, str | None]:
    """(status, body, the token cookie it set) of GET ``url``, with a fresh cookie jar."""
    async with aiohttp.ClientSession() as http, http.get(url, headers=headers) as response:
        cookie = response.cookies.get(next(iter(response.cookies), ""))
        return response.status, await response.text(), cookie.value if cookie is not None else None


async def _websocket_status(url: str, **headers: str) -> int:
    """101 if the websocket opened (then closed again), else the refusal's status."""
    async with aiohttp.ClientSession() as http:
        try:
            websocket = await http.ws_connect(url, headers=headers)
        except aiohttp.WSServerHandshakeError as refused:
            return refused.status
        await websocket.close()
        return 101


def _refusals(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("tokenwatch serve: refused ")]


def _no_run(served: Served) -> None:
    assert psutil.Process(served.process.pid).children(recursive=True) == [], "a refused client started a run"


async def test_the_page_needs_the_token_and_keeps_it_in_a_cookie(serve: ServeFactory):
    served = serve(*SIM)
    assert len(served.token) >= 32  # token_urlsafe(24): 192 random bits

    status, body, cookie = await _page_status(served.url)
    assert status == 200
    assert f'data-session-websocket-url="ws://127.0.0.1:{served.port}/ws/{served.token}"' in body
    assert cookie == served.token

    assert (await _page_status(f"{served.base}/"))[0] == 403
    wrong = served.token[:-1] + ("A" if served.token[-1] != "A" else "B")
    status, body, cookie = await _page_status(f"{served.base}/?token={wrong}")
    assert (status, body.strip(), cookie) == (403, "tokenwatch serve: wrong token", None)
    # A reload without the query: the cookie stands for the token (as the browser sends it back).
    cookie_name = f"tokenwatch-serve-{served.port}"
    assert (await _page_status(f"{served.base}/", Cookie=f"{cookie_name}={served.token}"))[0] == 200
    assert (await _page_status(f"{served.base}/", Cookie=f"{cookie_name}={wrong}"))[0] == 403

    _no_run(served)
    status, _, err = served.stop()
    assert status == 0
    assert _refusals(err) == [
        "tokenwatch serve: refused the page to 127.0.0.1: no token",
        "tokenwatch serve: refused the page to 127.0.0.1: wrong token",
        "tokenwatch serve: refused the page to 127.0.0.1: wrong token",
    ]
    assert served.token not in err


@pytest.mark.parametrize(
    ("path", "origin", "reason"),
    [
        ("/ws/{token}", "http://evil.example", "Origin 'http://evil.example' is another site's"),
        ("/ws/{token}", "null", "Origin 'null' is another site's"),
        ("/ws/{token}", None, "no Origin header"),
        (
            "/ws/{token}",
            "http://127.0.0.1:1",
            "Origin 'http://127.0.0.1:1' is another site's",
        ),  # another port
        ("/ws/{token}", "https://127.0.0.1:{port}", "Origin 'https://127.0.0.1:{port}' is another site's"),
        ("/ws", "http://127.0.0.1:{port}", "no token"),
        ("/ws/not-the-token", "http://127.0.0.1:{port}", "wrong token"),
    ],
)
async def test_the_websocket_refuses_other_sites_and_wrong_tokens(serve: ServeFactory, path, origin, reason):
    served = serve(*SIM)
    url = f"ws://127.0.0.1:{served.port}{path.format(token=served.token)}"
    headers = {} if origin is None else {"Origin": origin.format(port=served.port)}
    assert await _websocket_status(url, **headers) == 403
    # The page's own origin, under either of its names, is let in (and then starts the run).
    _no_run(served)
    assert await _websocket_status(served.ws_url, Origin=served.base) == 101
    assert await _websocket_status(served.ws_url, Origin=f"http://localhost:{served.port}") == 101

    status, _, err = served.stop()
    assert status == 0
    assert _refusals(err) == [
        f"tokenwatch serve: refused the websocket to 127.0.0.1: {reason.format(port=served.port)}"
    ]
    assert served.token not in err


async def test_a_host_that_is_not_this_server_is_refused(serve: ServeFactory):
    """DNS rebinding: an attacker's name resolving to 127.0.0.1 makes their page same-origin; its Host
    gives it away, for the page and for the websocket."""
    served = serve(*SIM)
    rebound = f"attacker.example:{served.port}"
    assert (await _page_status(served.url, Host=rebound))[0] == 403
    assert await _websocket_status(served.ws_url, Host=rebound, Origin=f"http://{rebound}") == 403
    assert (await _page_status(served.url, Host="127.0.0.1:1"))[0] == 403  # this machine, another port
    _no_run(served)
    # localhost with serve's port is this server: its page points the websocket back at that name.
    status, body, _ = await _page_status(served.url, Host=f"localhost:{served.port}")
    assert status == 200
    assert f'data-session-websocket-url="ws://localhost:{served.port}/ws/{served.token}"' in body

    status, _, err = served.stop()
    assert status == 0
    not_this = "is not this server (DNS rebinding?)"
    assert _refusals(err) == [
        f"tokenwatch serve: refused the page to 127.0.0.1: Host '{rebound}' {not_this}",
        f"tokenwatch serve: refused the websocket to 127.0.0.1: Host '{rebound}' {not_this}",
        f"tokenwatch serve: refused the page to 127.0.0.1: Host '127.0.0.1:1' {not_this}",
    ]


@pytest.mark.parametrize(
    ("bound", "host", "allowed"),
    [
        ("127.0.0.1", "127.0.0.1:8000", True),
        ("127.0.0.1", "localhost:8000", True),
        ("127.0.0.1", "LOCALHOST:8000", True),
        ("127.0.0.1", "127.0.0.1", False),  # port 80
        ("127.0.0.1", "127.0.0.2:8000", False),
        ("127.0.0.1", "evil.example:8000", False),
        ("127.0.0.1", "127.0.0.1.nip.io:8000", False),
        ("127.0.0.1", "", False),
        ("127.0.0.1", "[::1:8000", False),
        ("localhost", "127.0.0.1:8000", True),
        ("localhost", "[::1]:8000", True),
        ("localhost", "127.0.0.2:8000", False),
        ("::1", "[::1]:8000", True),
        ("::1", "localhost:8000", True),
        ("0.0.0.0", "192.168.7.20:8000", True),  # bound to every address: any IP literal is this machine
        ("0.0.0.0", "[fe80::1]:8000", True),
        ("0.0.0.0", "evil.example:8000", False),
        ("0.0.0.0", "192.168.7.20:8001", False),
    ],
)
def test_which_hosts_name_this_server(bound, host, allowed):
    rules = AccessRules.for_server(bound, 8000, "t")
    assert (rules.host_refusal(host) is None) is allowed


@pytest.mark.parametrize(
    ("origin", "allowed"),
    [
        ("http://127.0.0.1:8000", True),
        ("http://localhost:8000", True),
        ("http://127.0.0.1:8001", False),
        ("https://127.0.0.1:8000", False),
        ("http://evil.example:8000", False),
        ("null", False),
        ("", False),
        (None, False),
        ("file://", False),
    ],
)
def test_which_origins_are_the_page_own(origin, allowed):
    rules = AccessRules.for_server("127.0.0.1", 8000, "t")
    assert (rules.origin_refusal(origin) is None) is allowed


def test_tokens_differ_per_start_and_compare_exactly():
    first = AccessRules.for_server("127.0.0.1", 8000, "secret-token")
    assert first.token_matches("secret-token")
    assert not first.token_matches("secret-toke")
    assert not first.token_matches("")
    assert not first.token_matches(None)
    from tokenwatch.cli.serve_access import new_token

    assert len({new_token() for _ in range(100)}) == 100
