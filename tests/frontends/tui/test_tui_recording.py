"""Quitting while recording: the recording is flushed, closed, complete, and replays to the same state."""

from __future__ import annotations

import os
from pathlib import Path

from tests.conftest import PATIENCE_S, RunCli, dashboard_in_pty, recorded_until, wait_until, wait_until_async
from tests.frontends.tui.apps import sim_app
from tokenwatch.recording import RecordingReader, RecordingWriter
from tokenwatch.runs.from_core import ingest_recording


async def test_q_while_recording_flushes_and_closes(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl.zst"
    recorder = RecordingWriter(path)
    app = sim_app(duration="80m", speed=120, recorder=recorder)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until_async(lambda: app.session.core.now >= 30, "30 s of run time", pause=pilot.pause)
        assert not recorder.closed
        assert not app.session.core.ended
        await pilot.press("q")
        await pilot.pause()
    assert recorder.closed
    core, reader = ingest_recording(path)
    warnings = reader.warnings
    assert warnings == []  # a complete zstd stream, every line whole
    live = app.session.core
    assert core.now == live.now
    assert core.now >= 30
    assert int(core.state.tokens.sum()) == int(live.state.tokens.sum()) > 0
    assert core.snapshot().aggregate.tokens_per_s == live.snapshot().aggregate.tokens_per_s
    events = sum(1 for _ in RecordingReader(path).events())
    assert events == recorder.events_written == app.session.events_seen


def test_the_cli_dashboard_quits_cleanly_while_recording(tmp_path: Path, run_cli: RunCli) -> None:
    """`tokenwatch sim --record` in a real terminal (a pty), `q` pressed, then the recording replayed."""
    path = tmp_path / "live.jsonl.zst"
    with dashboard_in_pty(("sim", "--speed", "60", "--record", str(path)), tmp_path) as dash:
        wait_until(lambda: b"SIM x60" in dash.screen or dash.proc.poll() is not None, "the dashboard drawn")
        assert b"SIM x60" in dash.screen, dash.screen[-2000:].decode(errors="replace")
        wait_until(lambda: (recorded_until(path) or 0.0) > 0, "some of the run recorded")
        os.write(dash.master, b"q")
        assert dash.proc.wait(timeout=PATIENCE_S) == 130  # quit before the run's end: interrupted
    core, recording = ingest_recording(path)
    warnings = recording.warnings
    assert warnings == []
    assert core.started
    assert core.now > 0
    summary = run_cli("summarize", str(path))
    assert summary.returncode == 0
    assert "Total aggregate" in summary.stdout
    headless = run_cli("replay", str(path), "--speed", "0", "--headless", "--interval", "10m")
    assert headless.returncode == 0
    assert headless.stderr == ""
