"""A headless fleet watch that cannot see says so at once, on stderr, and does not exit 0 with no data:
a closed port, a server that answers 500, one that redirects to another host (never followed), and one
that answers but holds no tokenwatch series."""

from __future__ import annotations

import contextlib
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

from tests.conftest import refusing_port, run_tokenwatch


class Answers(http.server.BaseHTTPRequestHandler):
    """One canned answer for every GET, and a count of the requests that reached it."""

    status = 200
    body = b""
    headers_out: dict[str, str] = {}  # noqa: RUF012 - set per server class below
    hits: list[str] = []  # noqa: RUF012

    def do_GET(self) -> None:
        type(self).hits.append(self.path)
        self.send_response(self.status)
        for key, value in self.headers_out.items():
            self.send_header(key, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        with contextlib.suppress(BrokenPipeError):  # the watch ended mid-answer
            self.wfile.write(self.body)

    def log_message(self, *_args: object) -> None:
        pass


@contextlib.contextmanager
def serving(status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> Iterator[type[Answers]]:
    handler = type(
        "Handler", (Answers,), {"status": status, "body": body, "headers_out": headers or {}, "hits": []}
    )
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    handler.url = f"http://127.0.0.1:{server.server_address[1]}"  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield handler
    finally:
        server.shutdown()
        server.server_close()


def watch_fleet(tmp_path: Path, url: str) -> tuple[int, str, str]:
    config = tmp_path / "fleet.yaml"
    config.write_text(
        "run: {name: blind, scenario: Offline, duration: 80m}\n"
        f"fleet:\n  url: {url}\n  preset: tokenwatch\n  interval: 1s\n  detail_interval: 5s\n"
        "  lookback: 10m\n"
    )
    result = run_tokenwatch("watch", str(config), "--headless", "--interval", "1s", "--stop-after", "4s")
    return result.returncode, result.stdout, result.stderr


def test_a_closed_port_is_said_at_once_and_the_watch_does_not_pass_for_a_run(tmp_path: Path) -> None:
    code, out, err = watch_fleet(tmp_path, f"http://127.0.0.1:{refusing_port()}")
    assert code == 1
    assert out == ""
    lines = err.splitlines()
    assert lines[0].startswith(
        "tokenwatch: warning: prometheus fleet: cannot list the fleet's nodes: cannot reach"
    )
    assert lines[-1].startswith("tokenwatch: the watch ended without data from any source (last said: ")
    assert len(lines) == len(set(lines))  # each problem once, not once a round
    assert "Traceback" not in err


def test_an_http_error_is_named(tmp_path: Path) -> None:
    with serving(500, b"boom") as server:
        code, _, err = watch_fleet(tmp_path, server.url)  # type: ignore[attr-defined]
    assert code == 1
    assert "HTTP 500" in err.splitlines()[0]


def test_a_redirect_to_another_host_is_not_followed(tmp_path: Path) -> None:
    with serving(200, b'{"status":"success","data":{"resultType":"vector","result":[]}}') as elsewhere:
        target = elsewhere.url + "/api/v1/query"  # type: ignore[attr-defined]
        with serving(302, headers={"Location": target}) as redirecting:
            code, _, err = watch_fleet(tmp_path, redirecting.url)  # type: ignore[attr-defined]
            asked = len(redirecting.hits)
    assert asked >= 1
    assert elsewhere.hits == []
    assert code == 1
    assert f"a redirect to {target}: not followed" in err


def test_a_server_holding_no_tokenwatch_series_says_which_query_found_nothing(tmp_path: Path) -> None:
    empty = b'{"status":"success","data":{"resultType":"vector","result":[]}}'
    with serving(200, empty) as server:
        code, _, err = watch_fleet(tmp_path, server.url)  # type: ignore[attr-defined]
    assert code == 1
    first = err.splitlines()[0]
    assert "holds no series for group by (" in first
    assert "tokenwatch_" in first  # the query itself, to paste into the server's own console
