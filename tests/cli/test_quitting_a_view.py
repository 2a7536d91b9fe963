"""Quitting a replay or the demo is not an interrupted run: the recording was whole (a replay) or nobody
asked for the run to finish (the demo), so ``q`` exits 0 and the summary says who stopped where
(``REPLAY STOPPED at 31:02 (38.8 % of samples)``), never ``INTERRUPTED``. Quitting ``tokenwatch sim``
still interrupts the run being made (tests/frontends/tui/test_tui_recording.py)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.cli.test_signals import wait_for_events
from tests.conftest import SAMPLE_RUNS, RunCli, dashboard_in_pty
from tokenwatch.base.events import RunEnded
from tokenwatch.recording import read_events

pytestmark = pytest.mark.timeout(180)
FAULT_RUN = SAMPLE_RUNS / "gb300-nvl72-node-failure.jsonl.zst"


def quit_and_read(args: tuple[str, ...], copy: Path, tmp_path: Path, minimum_t: float) -> tuple[int, str]:
    """``tokenwatch ARGS`` in a pty, ``q`` once ``copy`` (its --record) reaches ``minimum_t``: (exit status,
    what the terminal showed)."""
    with dashboard_in_pty(args, tmp_path) as dash:
        wait_for_events(copy, minimum_t)
        os.write(dash.master, b"q")
        status = dash.proc.wait(timeout=60)
    return status, dash.screen.decode(errors="replace").replace("\r\n", "\n")


def stopped_at(kind: str, screen: str) -> int:
    """The run time (s) the summary's ``KIND STOPPED at MM:SS (x % of samples)`` names."""
    mark = re.search(rf"^{kind} STOPPED at (\d\d):(\d\d) \(\d+\.\d % of samples\)$", screen, re.MULTILINE)
    assert mark, screen[-3000:]
    return int(mark[1]) * 60 + int(mark[2])


def test_quitting_a_replay_of_a_fault_run_exits_0_and_says_replay_stopped(
    tmp_path: Path, run_cli: RunCli
) -> None:
    copy = tmp_path / "copy.jsonl"
    args = ("replay", str(FAULT_RUN), "--speed", "60", "--start", "30m", "--record", str(copy))
    status, screen = quit_and_read(args, copy, tmp_path, 30 * 60 + 20)
    assert status == 0, screen[-3000:]
    assert "INTERRUPTED" not in screen
    at = stopped_at("REPLAY", screen)
    assert "the replay was stopped at" in screen
    assert "no run end" not in screen  # not "the writer was killed": nothing is wrong with the recording
    # The copy stops there, and says so: it ends as interrupted at the time the summary names.
    events, warnings = read_events(copy)
    assert warnings == []
    assert isinstance(events[-1], RunEnded)
    assert events[-1].reason == "interrupted"
    assert int(events[-1].t) == at
    assert run_cli("summarize", str(FAULT_RUN)).returncode == 0  # the recording itself untouched


def test_quitting_the_demo_exits_0_and_says_demo_stopped(tmp_path: Path) -> None:
    copy = tmp_path / "demo.jsonl"
    # `tokenwatch` with options and no command is the demo (the simulator at x10); faster here.
    args = ("--speed", "60", "--faults", "node07:down@1m", "--record", str(copy))
    status, screen = quit_and_read(args, copy, tmp_path, 90)
    assert status == 0, screen[-3000:]
    assert "INTERRUPTED" not in screen
    assert stopped_at("DEMO", screen) >= 90
    assert "node07 did not finish" in screen  # the fault run's own warnings still come
