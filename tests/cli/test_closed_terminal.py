"""A dashboard whose terminal goes ends with it: ``tmux kill-session`` around a real dashboard (the pty
hung up, SIGHUP and SIGCONT sent, as a closed window does), and a pty whose other end closes with no
signal at all (reads and writes fail with EIO). Either way the process ends, the run as interrupted, and
the recording is closed with its end. Before, Textual's driver took the hangup's SIGCONT for a return from
Ctrl-Z, started a second writer thread that died on EIO, and the app deadlocked in its shutdown, deaf to
SIGTERM, until SIGKILL.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from tests.cli.test_signals import wait_for_events
from tests.conftest import REPO_ROOT, RunCli, cli_env, dashboard_in_pty
from tokenwatch.base.events import RunEnded, RunStarted
from tokenwatch.recording import read_events

pytestmark = pytest.mark.timeout(150)
CEILING_S = 60.0  # generous: a loaded 2-core machine; a dashboard that outlives its terminal never ends


def process_gone(pid: int) -> bool:
    """Ended: no such process, or a zombie (ended, its parent not yet waiting)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rpartition(")")[2].split()[0] == "Z"


def wait_until(condition: object, what: str) -> None:
    assert callable(condition)
    deadline = time.monotonic() + CEILING_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"still waiting after {CEILING_S:.0f} s: {what}")
        time.sleep(0.1)


def check_closed_as_interrupted(recording: Path, run_cli: RunCli) -> None:
    """The recording reads without a torn line and ends with the run's one RunEnded(interrupted), and
    ``summarize`` reads it so."""
    events, warnings = read_events(recording)
    assert warnings == []
    assert isinstance(events[0], RunStarted)
    end = events[-1]
    assert isinstance(end, RunEnded)
    assert end.reason == "interrupted"
    assert sum(isinstance(e, RunEnded) for e in events) == 1
    result = run_cli("summarize", str(recording), "--json")
    assert result.returncode == 0, result.stderr
    summary = orjson.loads(result.stdout)
    assert summary["end_reason"] == "interrupted"
    assert summary["duration_s"] == end.t


def pane_dashboard_pid(pane_pid: int, under_shell: bool) -> int:
    """The dashboard's pid: the pane's first process, or its shell's child (0 while not started)."""
    if not under_shell:
        return pane_pid
    try:
        children = Path(f"/proc/{pane_pid}/task/{pane_pid}/children").read_text().split()
    except FileNotFoundError:
        return 0
    return int(children[0]) if children else 0


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
@pytest.mark.parametrize(
    "under_shell", [False, True], ids=["dashboard-leads-the-pane", "under-the-pane-shell"]
)
def test_killing_the_tmux_session_ends_the_dashboard(
    under_shell: bool, tmp_path: Path, run_cli: RunCli
) -> None:
    """The pane's process is the dashboard (``exec``), or a shell that runs it and waits: the kernel's
    hangup signals the session's leader in one case and the foreground group as the shell dies in the
    other."""
    rec = tmp_path / "dash.jsonl.zst"
    tmux = ["tmux", "-S", str(tmp_path / "tmux.sock"), "-f", os.devnull]
    env = cli_env(TOKENWATCH_THEMES=str(tmp_path / "none"))
    env.pop("TMUX", None)  # a test run inside tmux starts its own server all the same
    dashboard = f"{sys.executable} -m tokenwatch sim --speed 60 --record {rec}"
    command = f"{dashboard}; echo ended" if under_shell else f"exec {dashboard}"
    subprocess.run(
        [*tmux, "new-session", "-d", "-s", "dash", "-x", "120", "-y", "40", "-c", str(REPO_ROOT), command],
        env=env,
        check=True,
    )
    pane = subprocess.run(
        [*tmux, "display-message", "-p", "-t", "dash", "#{pane_pid}"], env=env, capture_output=True, text=True
    )
    pane_pid = int(pane.stdout)
    pid = 0
    try:

        def drawn() -> bool:
            screen = subprocess.run(
                [*tmux, "capture-pane", "-p", "-t", "dash"], env=env, capture_output=True, text=True
            )
            return "MLPerf verdict" in screen.stdout

        wait_until(drawn, "the dashboard drawn in the tmux pane")
        pid = pane_dashboard_pid(pane_pid, under_shell)
        assert pid, "the pane's shell runs no dashboard"
        wait_for_events(rec, 30.0)
        subprocess.run([*tmux, "kill-session", "-t", "dash"], env=env, check=True)
        wait_until(lambda: process_gone(pid), "the dashboard to end after its tmux session was killed")
    finally:
        subprocess.run([*tmux, "kill-server"], env=env, capture_output=True)
        if pid and not process_gone(pid):
            os.kill(pid, 9)
    check_closed_as_interrupted(rec, run_cli)


def test_a_closed_pty_ends_the_dashboard(tmp_path: Path, run_cli: RunCli) -> None:
    """The terminal's other end closes and no signal comes (the pty is not the dashboard's controlling
    terminal): the failing reads and writes end the run, the exit status that of an interrupted one."""
    rec = tmp_path / "dash.jsonl.zst"
    with dashboard_in_pty(("sim", "--speed", "60", "--record", str(rec)), tmp_path) as dash:
        wait_for_events(rec, 30.0)
        wait_until(lambda: b"MLPerf verdict" in dash.screen, "the dashboard drawn")
        dash.close_terminal()
        assert dash.proc.wait(timeout=CEILING_S) == 130
    check_closed_as_interrupted(rec, run_cli)
