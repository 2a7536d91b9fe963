"""A full disk does not end the watch.

The recording stops with one clear alert, monitoring and the headless output go on, and the summary at
the end says the recording is partial. On a real 2 MB tmpfs where this machine allows mounting one; and
always with the recording's file descriptor swapped for /dev/full mid-run (the kernel's ENOSPC).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import run_tokenwatch, wait_until_async
from tokenwatch.base.durations import format_clock
from tokenwatch.base.events import Notice, RunEnded
from tokenwatch.core import RackCore
from tokenwatch.inputs.sim.collector import SimulatorCollector
from tokenwatch.inputs.sim.profile import load_profile
from tokenwatch.inputs.sim.rack_sim import SimSettings
from tokenwatch.recording import RecordingError, RecordingWriter, read_events
from tokenwatch.session import Session

STOPPED = re.compile(
    r"recording stopped: disk full at (\d\d:\d\d); the file ends at (\d\d:\d\d), all of it readable"
)


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MB tmpfs, or a skip saying why there is none."""
    where = tmp_path / "tiny"
    where.mkdir()
    try:
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(where)],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"cannot run mount: {exc}")
    if done.returncode != 0:
        pytest.skip(f"mounting a tmpfs is not permitted here: {done.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], capture_output=True, timeout=20, check=False)


def clock_s(text: str) -> int:
    minutes, seconds = text.split(":")
    return int(minutes) * 60 + int(seconds)


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.zst"])
def test_a_full_tmpfs_stops_the_recording_not_the_run(tiny_disk: Path, suffix: str) -> None:
    rec = tiny_disk / f"run{suffix}"
    done = run_tokenwatch(
        "sim", "--speed", "0", "--headless", "--interval", "10m", "--record", str(rec), timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    stopped = STOPPED.findall(done.stderr)
    assert len(stopped) == 1, done.stderr  # one alert, not one per event
    failed_at, ends_at = stopped[0]
    lines = done.stdout.split("\n\n")[0].splitlines()
    assert [line.split()[0] for line in lines][-1] >= "80:00"  # every line to the end of the run
    assert "Total aggregate" in done.stdout
    assert "the recording is partial" in done.stdout
    events, warnings = read_events(rec)  # everything before is readable
    assert events
    assert len(warnings) <= 1
    assert not any(isinstance(e, RunEnded) for e in events)
    # The alert names the time the file really ends at (the last event read back), not the failure's.
    assert ends_at == format_clock(max(e.t for e in events))
    assert clock_s(ends_at) <= clock_s(failed_at)


async def run_until_the_disk_fills_at_300_s(path: Path) -> tuple[Session, RecordingWriter, list[str]]:
    """A 20-minute simulated run recorded to ``path`` whose disk fills at 5:00: what was flushed then
    stays, every later write is ENOSPC. Returns the session, its recorder and the recording-stopped alerts."""
    recorder = RecordingWriter(path)
    settings = SimSettings(load_profile("gb300-nvl72"), duration_s=1200.0)
    session = Session(
        RackCore(), [SimulatorCollector(settings, speed=0)], recorder=recorder, flush_interval_s=None
    )
    stopped: list[str] = []
    session.on_recording_stopped(stopped.append)
    full = os.open("/dev/full", os.O_WRONLY)

    def fill_the_disk(t: float) -> None:
        if t == 300.0:
            recorder.flush()  # the file holds the run up to here...
            os.dup2(full, recorder.fileno())  # ...and not a byte more: every later write is ENOSPC

    session.every(100.0, fill_the_disk)
    try:
        await asyncio.wait_for(session.run(), 120)
    finally:
        os.close(full)
    return session, recorder, stopped


async def test_enospc_mid_run_keeps_monitoring_and_says_so(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl.zst"
    session, recorder, stopped = await run_until_the_disk_fills_at_300_s(path)
    assert session.core.ended  # the run went on to its end
    assert session.core.now > 1000
    assert len(stopped) == 1
    alert = STOPPED.fullmatch(stopped[0])
    assert alert is not None, stopped[0]
    assert clock_s(alert.group(1)) >= 300
    notices = [a for a in session.core.state.alerts.newest_first() if "recording stopped" in a.message]
    assert len(notices) == 1
    assert notices[0].severity == "critical"
    summary = session.summary()
    assert any("the recording is partial" in w for w in summary.warnings)
    assert recorder.closed
    events, _ = read_events(path)
    # Everything flushed before the disk filled (the event that fired the callback included) is readable,
    # and the alert says where the file ends.
    assert 300 <= events[-1].t <= 301
    assert alert.group(2) == format_clock(max(e.t for e in events))


async def test_the_alert_names_where_the_file_ends_when_a_buffer_of_minutes_is_lost(tmp_path: Path) -> None:
    """Unpaced, the recorder flushes by size: the failed write carries minutes of run time, all lost.
    The alert said 'disk full at <now>; everything before is readable' though the file ended minutes
    earlier."""
    path = tmp_path / "run.jsonl"
    _, _, stopped = await run_until_the_disk_fills_at_300_s(path)
    assert len(stopped) == 1
    alert = STOPPED.fullmatch(stopped[0])
    assert alert is not None, stopped[0]
    events, _ = read_events(path)
    last = max(e.t for e in events)
    assert alert.group(2) == format_clock(last)
    assert clock_s(alert.group(1)) > clock_s(alert.group(2))  # the failure came after: the buffer was lost


def test_the_writer_reports_a_full_disk_once_and_then_stays_closed(tmp_path: Path) -> None:
    writer = RecordingWriter(tmp_path / "r.jsonl")
    full = os.open("/dev/full", os.O_WRONLY)
    try:
        os.dup2(full, writer.fileno())
    finally:
        os.close(full)

    def write_a_lot() -> None:
        for i in range(100_000):
            writer.write(Notice(float(i), "info", "x" * 100))

    with pytest.raises(RecordingError, match="No space left on device") as info:
        write_a_lot()
    assert info.value.disk_full
    assert writer.closed
    writer.write(Notice(1.0, "info", "after"))  # ignored: the recording has stopped
    writer.flush()
    with contextlib.suppress(RecordingError):
        writer.close()


async def test_the_dashboard_goes_on_when_the_disk_fills(tmp_path: Path) -> None:
    from tests.frontends.tui.apps import sim_app
    from tokenwatch.frontends.tui.widgets.alerts_panel import AlertsPanel

    recorder = RecordingWriter(tmp_path / "run.jsonl.zst")
    # Two hours at x120 is a minute of wall time: room for the steps below on a loaded machine, where a
    # 10-minute run (5 s) ended, and closed its recording, before the disk was filled.
    app = sim_app(duration="2h", speed=120, recorder=recorder)
    full = os.open("/dev/full", os.O_WRONLY)
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_until_async(lambda: app.session.core.now >= 30, "30 s of run time", pause=pilot.pause)
            await wait_until_async(  # some of the run on disk first, so the file has an end to name
                lambda: recorder.written_until_t is not None, "a flush of events", pause=pilot.pause
            )
            os.dup2(full, recorder.fileno())
            session = app.session
            await wait_until_async(  # at the writer's next flush
                lambda: session.recording_stopped is not None, "the recording stopped", pause=pilot.pause
            )
            assert session.recording_stopped is not None
            assert STOPPED.fullmatch(session.recording_stopped)
            stopped_at = session.core.now
            await wait_until_async(  # still running, still fed
                lambda: session.core.now >= stopped_at + 60, "a minute of run time more", pause=pilot.pause
            )
            panel = app.screen.query_one(AlertsPanel)
            await wait_until_async(
                lambda: any("recording stopped: disk full" in a.message for a in panel.alerts),
                "the alert on screen",
                pause=pilot.pause,
            )
            await pilot.press("q")
    finally:
        os.close(full)
    assert app.return_code in (0, None)
