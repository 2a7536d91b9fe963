"""``tokenwatch serve [--host H] [--port N] -- RUN_COMMAND``: the dashboard of a run command in a browser.

The run command is checked here, once, before anything listens: a typo, a missing recording or a flag
that means nothing in a browser is one line and exit status 2 on the terminal, not an error in every
browser page. The first page then starts one ``python -m tokenwatch RUN_COMMAND`` under Textual's web
driver, which every later page shares (see :mod:`tokenwatch.cli.browser_server`).
"""

from __future__ import annotations

import argparse
import errno
import ipaddress
import shlex
import socket
import sys

from tokenwatch.cli.parser import parse
from tokenwatch.cli.usage import UsageError, stderr_line

RUN_COMMANDS = ("sim", "replay", "watch")

# Options of the run commands that mean nothing in a browser, and why (the run lives while a page is open,
# starts over when one comes back after all had left, and its stdout is the pages' connection).
_BROWSERLESS: dict[str, str] = {
    "headless": "--headless makes no sense in a browser: the page is the dashboard",
    "jsonl": "--jsonl makes no sense in a browser: it writes headless snapshots (run it in a terminal)",
    "interval": "--interval makes no sense in a browser: it paces headless lines (run it in a terminal)",
    "record": "--record makes no sense in a browser: the run starts over whenever a page comes back after "
    "all had left, writing the same file again (record in a terminal, then serve `replay FILE`)",
    "prometheus_port": "--prometheus-port makes no sense in a browser: the run, and its /metrics, lives only "
    "while a page is open (run the exporter in a terminal)",
    "prometheus_host": "--prometheus-host makes no sense in a browser: the run, and its /metrics, lives only "
    "while a page is open (run the exporter in a terminal)",
}


def cmd_serve(args: argparse.Namespace) -> int:
    from tokenwatch.cli.browser_server import BrowserServer

    run_argv = run_command_argv(args.run_command)
    check_run_command(run_argv)
    shown = shlex.join(["tokenwatch", *run_argv]) if run_argv else "tokenwatch (sim --speed 10)"
    server = BrowserServer(
        [sys.executable, "-m", "tokenwatch", *run_argv],
        host=args.host,
        port=args.port,
        title=shown,
        max_viewers=args.max_viewers,
    )
    try:
        server.bind()
    except OSError as exc:
        raise UsageError(f"tokenwatch serve: {listen_error(exc, args.host, args.port)}") from None
    sys.stdout.write(f"tokenwatch serve: {shown} on {server.url} (Ctrl-C stops)\n")
    sys.stdout.flush()
    if not is_loopback(args.host):
        stderr_line(
            f"tokenwatch serve: warning: listening on {args.host}: the page and its token cross the network "
            "unencrypted (plain HTTP); where the network is not trusted, keep 127.0.0.1 and tunnel over SSH"
        )
    server.run_until_stopped()
    runs, viewers = server.runs_started, server.viewers_joined
    sys.stdout.write(
        f"tokenwatch serve: stopped ({runs} run{'s' * (runs != 1)}, {viewers} viewer{'s' * (viewers != 1)})\n"
    )
    return 0


def run_command_argv(words: list[str]) -> list[str]:
    """The run command's words as given after ``serve`` (a leading ``--`` separates them)."""
    return words[1:] if words[:1] == ["--"] else list(words)


def check_run_command(argv: list[str]) -> argparse.Namespace:
    """Parse ``argv`` as ``tokenwatch`` would, refuse what a browser cannot use, and open its inputs.

    Raises :class:`UsageError` (or the input's own one-line error) before any browser connects.
    """
    run = parse(argv)  # no words, or options only: the default simulator, as `tokenwatch` alone
    if run.command not in RUN_COMMANDS:
        given = run.command or "nothing"
        raise UsageError(f"tokenwatch serve: {given} is not a run command: serve sim, replay or watch")
    defaults = parse([run.command, *(["FILE"] if run.command != "sim" else [])])
    for option, why in _BROWSERLESS.items():
        if getattr(run, option) != getattr(defaults, option):
            raise UsageError(f"tokenwatch serve: {why}")
    _open_inputs(run)
    return run


def _open_inputs(run: argparse.Namespace) -> None:
    """What the run command reads first (profile and faults, the recording's header, the watch config)."""
    if run.command == "sim":
        from tokenwatch.cli.sim_settings import sim_settings

        sim_settings(run)
    elif run.command == "replay":
        from tokenwatch.recording import RecordingReader

        RecordingReader(run.file).close()
    else:
        from tokenwatch.inputs.config import load_watch_config

        load_watch_config(run.config)


def listen_error(exc: OSError, host: str, port: int) -> str:
    if isinstance(exc, socket.gaierror):
        return f"cannot listen on {host!r}: no such host"
    if exc.errno == errno.EADDRINUSE:
        return f"port {port} is in use"
    if exc.errno == errno.EACCES:
        return f"port {port}: permission denied (ports below 1024 need privileges)"
    if exc.errno == errno.EADDRNOTAVAIL:
        return f"cannot listen on {host}: not an address of this machine"
    return f"cannot listen on {host}:{port}: {exc.strerror or exc}"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
