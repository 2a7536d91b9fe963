"""Terminal control sequences never reach the terminal or a file.

A crafted recording names its run and a node with escape sequences (an OSC 52 clipboard write, a screen
clear, a colour) and carries them in log lines, notices and a down reason. Every output is checked as
BYTES: `summarize`, headless replay lines, CSV exports, the HTML report, and the dashboard itself,
run on a real pseudo-terminal.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import PATIENCE_S, dashboard_in_pty, run_tokenwatch, wait_until
from tokenwatch.base.events import (
    GPU_METRICS,
    GpuBatch,
    LogLine,
    NodeStatus,
    Notice,
    ProgressBatch,
    RunEnded,
    RunStarted,
)
from tokenwatch.base.formatting import printable
from tokenwatch.recording import RecordingWriter

OSC52 = "\x1b]52;c;ZWNobyBwd25lZA==\x07"  # "write this to the clipboard"
CLEAR = "\x1b[2J\x1b[H"
PINK = "\x1b[38;5;199m"
C1_CSI = "\x9b31m"  # the 8-bit CSI
RUN_NAME = f"evil{OSC52}{CLEAR}run"
NODE = f"n{PINK}01"
INJECTED = [OSC52.encode(), b"\x1b[2J", PINK.encode(), C1_CSI.encode(), b"\x1b]52"]


def crafted_recording(path: Path) -> Path:
    nodes = (NODE, "n02")
    with RecordingWriter(path) as writer:
        writer.write(RunStarted(0.0, RUN_NAME, "Offline", nodes, 2, 60.0, 1000, "sim", 1.7e9))
        for t in range(1, 41):
            values = np.full((4, len(GPU_METRICS)), 500.0)
            writer.write(
                GpuBatch(
                    float(t), np.array([0, 0, 1, 1]), np.array([0, 1, 0, 1]), values, np.zeros(4, np.uint64)
                )
            )
            done = np.array([t * 10, t * 11])
            writer.write(ProgressBatch(float(t), np.array([0, 1]), done, done * 100))
            for node in nodes:
                writer.write(LogLine(float(t), node, f"step {t} {OSC52}{C1_CSI}red"))
            if t == 20:
                writer.write(Notice(float(t), "warning", f"harness says {CLEAR}{PINK}boo", NODE, "log"))
            if t == 30:
                writer.write(NodeStatus(float(t), "n02", "down", f"gone {OSC52}"))
        writer.write(RunEnded(40.5, f"completed {PINK}"))
    return path


def assert_clean(data: bytes, what: str) -> None:
    for sequence in INJECTED:
        assert sequence not in data, f"{what} carries {sequence!r}"


def test_printable_escapes_every_control_character() -> None:
    text = printable(f"{RUN_NAME}\t{C1_CSI}\u202eabc\n")
    assert all(ch.isprintable() for ch in text)
    assert "\\x1b]52;c;" in text  # escaped, so still readable
    assert "\\x9b31m" in text
    assert "\\u202e" in text
    assert printable("node01 · 1,100,948 tok/s ✓") == "node01 · 1,100,948 tok/s ✓"


def test_summarize_and_headless_lines_carry_no_control_sequences(tmp_path: Path) -> None:
    rec = crafted_recording(tmp_path / "crafted.jsonl")
    for args in (
        ["summarize", str(rec)],
        ["summarize", str(rec), "--json"],
        ["replay", str(rec), "--speed", "0", "--headless", "--interval", "5s"],
    ):
        done = run_tokenwatch(*args, timeout=60)
        assert done.returncode == 0, done.stderr
        assert_clean(done.stdout.encode(), f"{args[0]} stdout")
        assert_clean(done.stderr.encode(), f"{args[0]} stderr")
        if "--json" not in args:
            assert "evil\\x1b]52;c;" in done.stdout  # shown, escaped


def test_exports_and_the_report_carry_no_control_sequences(tmp_path: Path) -> None:
    rec = crafted_recording(tmp_path / "crafted.jsonl")
    done = run_tokenwatch("export", str(rec), "--csv", str(tmp_path / "csv"), timeout=60)
    assert done.returncode == 0, done.stderr
    files = list((tmp_path / "csv").glob("*.csv"))
    assert files
    for path in files:
        assert_clean(path.read_bytes(), path.name)
        assert b"\x1b" not in path.read_bytes()
    assert b"n\\x1b[38;5;199m01" in b"".join(p.read_bytes() for p in files)
    report = tmp_path / "r.html"
    done = run_tokenwatch("report", str(rec), "-o", str(report), timeout=90)
    assert done.returncode == 0, done.stderr
    html = report.read_bytes()
    assert_clean(html, "report")
    assert b"\x1b" not in html


@pytest.mark.skipif(sys.platform != "linux", reason="a Linux pseudo-terminal")
def test_the_dashboard_writes_no_injected_sequence_to_the_terminal(tmp_path: Path) -> None:
    rec = crafted_recording(tmp_path / "crafted.jsonl")
    with dashboard_in_pty(["replay", str(rec), "--speed", "0"], tmp_path) as dash:
        # The dashboard draws the whole (short) replay: its bar at the recording's end (in every layout).
        wait_until(lambda: b"00:40 / 00:40" in dash.screen, "the replay at its end on screen")
        os.write(dash.master, b"\r")  # the node screen of the selected node: its log lines
        wait_until(lambda: b"step 40" in dash.screen, "the node screen's last log line")
        drawn = len(dash.screen)
        os.write(dash.master, b"\x1b")  # back
        wait_until(lambda: b"Sort" in dash.screen[drawn:], "the dashboard's keys again after Escape")
        os.write(dash.master, b"q")
        dash.proc.wait(timeout=PATIENCE_S)
    out = bytes(dash.screen)  # all of it: the reading thread has seen the terminal close
    assert len(out) > 10_000, out[-500:]  # it did draw
    assert b"evil" in out
    assert b"step 40" in out
    assert_clean(bytes(out), "the dashboard")
