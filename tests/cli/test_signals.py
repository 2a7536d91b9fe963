"""An interrupted run says so: Ctrl-C (SIGINT), SIGTERM and SIGHUP (a closed terminal)
sent to a real ``python -m tokenwatch`` process end the run as interrupted: ``RunEnded(reason=
"interrupted")`` is the recording's last event, the partial summary is printed marked ``INTERRUPTED at
MM:SS (x % of samples)``, and the exit status is 130, headless and in the dashboard.
"""

from __future__ import annotations

import re
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import orjson
import pytest

from tests.conftest import REPO_ROOT, RunCli, dashboard_in_pty, recorded_until, start_tokenwatch
from tokenwatch.base.events import ProgressBatch, RunEnded, RunStarted
from tokenwatch.recording import read_events

pytestmark = pytest.mark.timeout(120)
STOP_SIGNALS = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP]
MARK = re.compile(r"^INTERRUPTED at (\d\d):(\d\d) \((\d+\.\d) % of samples\)$", re.MULTILINE)


def wait_for_events(path: Path, minimum_t: float, proc: subprocess.Popen[str] | None = None) -> None:
    """Until the recording holds events at run time ``minimum_t`` or later (the writer flushes often)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"tokenwatch exited early: {proc.returncode}")
        until = recorded_until(path)  # None while the file is not made, or its header not written yet
        if until is not None and until >= minimum_t:
            return
        time.sleep(0.2)  # the poll interval
    raise AssertionError(f"no events at {minimum_t} s in {path} within 60 s (up to {recorded_until(path)})")


def check_interrupted(recording: Path, stdout: str, run_cli: RunCli) -> None:
    """The recording ends as interrupted at the run time the printed summary names."""
    events, warnings = read_events(recording)
    assert warnings == []  # closed cleanly: no torn line
    start, end = events[0], events[-1]
    assert isinstance(start, RunStarted)
    assert isinstance(end, RunEnded)
    assert end.reason == "interrupted"
    assert sum(isinstance(e, RunEnded) for e in events) == 1
    assert end.t == max(e.t for e in events)
    m = MARK.search(stdout)
    assert m, stdout[-2000:]
    assert int(m[1]) * 60 + int(m[2]) == int(end.t)
    summary = orjson.loads(run_cli("summarize", str(recording), "--json").stdout)
    assert summary["complete"] is False
    assert summary["end_reason"] == "interrupted"
    assert summary["duration_s"] == end.t
    # The share of samples done, from the progress reports.
    assert start.total_samples
    done = np.zeros(len(start.nodes), np.int64)
    for e in events:
        if isinstance(e, ProgressBatch):
            done[e.node_index] = e.samples_done
    assert float(m[3]) == pytest.approx(done.sum() / start.total_samples * 100, abs=0.051)


@pytest.mark.parametrize("sig", STOP_SIGNALS, ids=[s.name for s in STOP_SIGNALS])
def test_a_stop_signal_ends_a_headless_sim_as_interrupted(
    sig: signal.Signals, tmp_path: Path, run_cli: RunCli
) -> None:
    rec = tmp_path / "run.jsonl"
    proc = start_tokenwatch("sim", "--speed", "120", "--headless", "--interval", "30s", "--record", str(rec))
    try:
        wait_for_events(rec, 60.0, proc)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert err == ""
    lines, _, table = out.partition("\n\n")
    assert table.startswith("INTERRUPTED at ")  # the summary, marked, first thing
    assert "Total aggregate" in table
    assert "run figures; INTERRUPTED at " in lines.splitlines()[-1]  # the last line says it too
    check_interrupted(rec, out, run_cli)


def test_sigterm_ends_a_headless_replay_as_interrupted(tmp_path: Path, run_cli: RunCli) -> None:
    """A paced replay, recorded again: the new recording ends as interrupted where the replay was."""
    rec = tmp_path / "again.jsonl"
    source = REPO_ROOT / "sample_runs" / "gb300-nvl72-offline.jsonl.zst"
    proc = start_tokenwatch(
        "replay", str(source), "--speed", "120", "--headless", "--interval", "1m", "--record", str(rec)
    )
    try:
        wait_for_events(rec, 60.0, proc)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    check_interrupted(rec, out, run_cli)


def test_sighup_ends_a_local_watch_as_interrupted(tmp_path: Path) -> None:
    """``watch`` in local mode (this machine, a harness log being written): SIGHUP as a closed terminal
    sends it. The watch records its own RunEnded(interrupted); nothing is recorded twice."""
    log = tmp_path / "harness.log"
    log.write_text("")
    cfg = tmp_path / "w.yaml"
    cfg.write_text(
        "run: {name: local, scenario: Offline, total_samples: 1000}\n"
        "gpu: {source: none}\n"
        f"progress:\n  - {{kind: log, path: '{log}', preset: vllm}}\n"
    )
    rec = tmp_path / "watch.jsonl"
    proc = start_tokenwatch("watch", str(cfg), "--headless", "--interval", "1s", "--record", str(rec))
    try:
        wait_for_events(rec, 2.0, proc)
        proc.send_signal(signal.SIGHUP)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    events, warnings = read_events(rec)
    assert warnings == []
    assert isinstance(events[-1], RunEnded)
    assert events[-1].reason == "interrupted"
    assert sum(isinstance(e, RunEnded) for e in events) == 1
    assert re.search(r"^INTERRUPTED at \d\d:\d\d \(\d+\.\d % of samples\)$", out, re.MULTILINE), out


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_stop_signal_ends_the_dashboard_as_interrupted(
    sig: signal.Signals, tmp_path: Path, run_cli: RunCli
) -> None:
    """The dashboard in a real terminal (a pty): the signal quits it as Ctrl-C does, the recording ends as
    interrupted, and the same summary table as headless is printed after the screen is gone."""
    rec = tmp_path / "dash.jsonl"
    with dashboard_in_pty(("sim", "--speed", "120", "--record", str(rec)), tmp_path) as dash:
        wait_for_events(rec, 60.0)
        dash.proc.send_signal(sig)
        assert dash.proc.wait(timeout=30) == 130
    screen = dash.screen
    text = screen.decode(errors="replace").replace("\r\n", "\n")
    assert "Total aggregate" in text
    check_interrupted(rec, text, run_cli)


def test_a_run_that_ends_by_itself_exits_0(run_cli: RunCli) -> None:
    """Not every stop is an interruption: a run that ended by itself exits 0 and prints no mark."""
    result = run_cli("sim", "--speed", "0", "--duration", "1m", "--headless", "--interval", "1m")
    assert result.returncode == 0
    assert "INTERRUPTED" not in result.stdout
