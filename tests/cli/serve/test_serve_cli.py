"""``tokenwatch serve`` without a browser: what it refuses (one line, exit 2, before it listens), the port
and address it listens on, the page's websocket address, Ctrl-C. Refusals run ``main`` in this process
(nothing listens); whatever listens runs as its own process."""

from __future__ import annotations

import re
import signal
import socket
import urllib.error
import urllib.request

import pytest

from tests.cli.serve.conftest import ServeFactory
from tests.conftest import PATIENCE_S, RunCli, listening_addresses, start_listening, start_tokenwatch
from tokenwatch.cli import main
from tokenwatch.cli.serve_cmd import is_loopback


def _one_error_line(stderr: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("tokenwatch "), stderr  # "tokenwatch <command>: problem", said once
    assert "error: tokenwatch" not in lines[0], stderr
    return lines[0]


@pytest.mark.parametrize(
    ("run_option", "named"),
    [
        (["--headless"], "--headless"),
        (["--jsonl", "-"], "--jsonl"),
        (["--jsonl", "snapshots.jsonl"], "--jsonl"),
        (["--interval", "30s"], "--interval"),
        (["--record", "run.jsonl.zst"], "--record"),
        (["--prometheus-port", "9400"], "--prometheus-port"),
    ],
)
def test_options_that_mean_nothing_in_a_browser_are_refused(capsys, run_option, named):
    assert main(["serve", "--port", "0", "--", "sim", *run_option]) == 2
    out, err = capsys.readouterr()
    assert out == ""  # it never listened
    assert f"tokenwatch serve: {named} makes no sense in a browser" in _one_error_line(err)


@pytest.mark.parametrize(
    ("run_command", "expected"),
    [
        (["summarize", "x.jsonl"], "summarize is not a run command: serve sim, replay or watch"),
        (["serve"], "serve is not a run command"),
        (["replay", "does-not-exist.jsonl"], "does-not-exist.jsonl: no such file"),
        (["sim", "--faults", "node99:down@1m"], "node99"),
        (["sim", "--profile", "no-such-profile"], "no-such-profile"),
        (["sim", "--speed", "fast"], "bad speed 'fast'"),
        (["sim", "--no-such-option"], "unrecognized arguments: --no-such-option"),
        (["watch", "missing.yaml"], "missing.yaml"),
    ],
)
def test_a_bad_run_command_is_one_line_before_listening(capsys, run_command, expected):
    assert main(["serve", "--port", "0", "--", *run_command]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert expected in _one_error_line(err)


def test_a_port_in_use_is_one_line(run_cli: RunCli):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run_cli("serve", "--port", str(port), "--", "sim", "--speed", "0", timeout=PATIENCE_S)
    assert done.returncode == 2
    assert done.stdout == ""
    assert _one_error_line(done.stderr) == f"tokenwatch serve: port {port} is in use"


def test_an_address_of_another_machine_is_one_line(capsys):
    # 203.0.113.0/24 is TEST-NET-3 (RFC 5737): never an address of this machine.
    assert main(["serve", "--host", "203.0.113.9", "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert "cannot listen on 203.0.113.9: not an address of this machine" in _one_error_line(err)


def test_the_page_connects_back_to_the_address_the_browser_used(serve: ServeFactory):
    served = serve("sim", "--speed", "0")  # no browser: nothing runs until a page connects
    port = served.port
    # Loopback unless --host says otherwise, with a token of this start (as Jupyter prints its address).
    assert re.fullmatch(rf"http://127\.0\.0\.1:{port}/\?token=[A-Za-z0-9_-]{{32}}", served.url), served.url
    with urllib.request.urlopen(served.url, timeout=PATIENCE_S) as response:
        page = response.read().decode()
    assert f'data-session-websocket-url="ws://127.0.0.1:{port}/ws/{served.token}"' in page
    # Reached as localhost (an SSH tunnel to the same port): the page connects back to that name.
    request = urllib.request.Request(served.url, headers={"Host": f"localhost:{port}"})
    with urllib.request.urlopen(request, timeout=PATIENCE_S) as response:
        page = response.read().decode()
    assert f'data-session-websocket-url="ws://localhost:{port}/ws/{served.token}"' in page
    assert f"http://localhost:{port}/static/js/textual.js" in page

    status, out, err = served.stop()
    assert status == 0
    assert "stopped (0 runs, 0 viewers)" in out
    assert err == ""


def test_each_start_has_its_own_token(serve: ServeFactory):
    first, second = serve("sim", "--speed", "0"), serve("sim", "--speed", "0")
    assert first.token != second.token
    request = urllib.request.Request(f"{second.base}/?token={first.token}")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=PATIENCE_S)
    assert refused.value.code == 403


def test_host_and_port_are_the_ones_given():
    process, port = start_listening(
        lambda port: start_tokenwatch("serve", "--host", "127.0.0.2", "--port", str(port), "--", "sim"),
        "tokenwatch serve",
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        assert re.search(
            rf"tokenwatch sim on http://127\.0\.0\.2:{port}/\?token=\S+ \(Ctrl-C stops\)", first
        ), first
        with socket.create_connection(("127.0.0.2", port), timeout=5):
            pass
        # bound to the one address asked for, not every address (asked of the process, not of 127.0.0.1:
        # another process may listen there on the same port)
        assert listening_addresses(process.pid, port) == {"127.0.0.2"}
    finally:
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=PATIENCE_S)
    assert process.returncode == 0, err
    assert "stopped (0 runs, 0 viewers)" in out
    assert err == ""  # 127.0.0.2 is loopback: no warning


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.0.0.2", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.20", False),
        ("rack-a.example", False),
    ],
)
def test_loopback_addresses_need_no_warning(host, loopback):
    assert is_loopback(host) is loopback


def test_help_says_how_pages_get_in(run_cli: RunCli):
    done = run_cli("serve", "--help")
    assert done.returncode == 0
    text = " ".join(done.stdout.split())
    assert "default 127.0.0.1" in text
    assert "http://127.0.0.1:8000/?token=..." in text
    assert "Only the page's own origin may open the websocket" in text
    assert "--max-viewers N pages open at once (default 8)" in text
    assert "later pages join that run read-only" in text
    assert "there is no authentication" not in text
    assert "tokenwatch serve --port 8000 -- sim --speed 10" in text


@pytest.mark.parametrize("given", ["0", "-1", "many"])
def test_a_bad_max_viewers_is_one_line(capsys, given):
    assert main(["serve", "--port", "0", "--max-viewers", given]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert f"bad number of viewers '{given}'" in _one_error_line(err)
