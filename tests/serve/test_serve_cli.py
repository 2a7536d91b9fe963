"""``tokenwatch serve`` without a browser: what it refuses (one line, exit 2, before it listens), the port
and address it listens on, the page's websocket address, Ctrl-C. Refusals run ``main`` in this process
(nothing listens); whatever listens runs as its own process."""

from __future__ import annotations

import re
import signal
import socket
import urllib.request

import pytest

from tests.conftest import PATIENCE_S, RunCli, free_port, start_tokenwatch
from tests.serve.conftest import ServeFactory
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
    port = int(served.url.rsplit(":", 1)[1])
    assert served.url == f"http://127.0.0.1:{port}"  # loopback unless --host says otherwise
    with urllib.request.urlopen(served.url, timeout=PATIENCE_S) as response:
        page = response.read().decode()
    assert f'data-session-websocket-url="ws://127.0.0.1:{port}/ws"' in page
    # Reached under another name (a laptop through a tunnel, a --host 0.0.0.0 server by its hostname).
    request = urllib.request.Request(served.url, headers={"Host": "rack-a.example:8443"})
    with urllib.request.urlopen(request, timeout=PATIENCE_S) as response:
        page = response.read().decode()
    assert 'data-session-websocket-url="ws://rack-a.example:8443/ws"' in page
    assert "http://rack-a.example:8443/static/js/textual.js" in page

    status, out, err = served.stop()
    assert status == 0
    assert "stopped (0 browser sessions)" in out
    assert err == ""


def test_host_and_port_are_the_ones_given():
    port = free_port()
    process = start_tokenwatch("serve", "--host", "127.0.0.2", "--port", str(port), "--", "sim")
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        assert re.search(rf"tokenwatch sim on http://127\.0\.0\.2:{port} \(Ctrl-C stops\)", first), first
        with socket.create_connection(("127.0.0.2", port), timeout=5):
            pass
        with pytest.raises(ConnectionRefusedError), socket.create_connection(("127.0.0.1", port), timeout=5):
            pass  # bound to the one address asked for, not every address
    finally:
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=PATIENCE_S)
    assert process.returncode == 0, err
    assert "stopped (0 browser sessions)" in out
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


def test_help_says_there_is_no_authentication(run_cli: RunCli):
    done = run_cli("serve", "--help")
    assert done.returncode == 0
    text = " ".join(done.stdout.split())
    assert "default 127.0.0.1" in text
    assert "there is no authentication" in text
    assert "tokenwatch serve --port 8000 -- sim --speed 10" in text
