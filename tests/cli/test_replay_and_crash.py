"""Replay equals live, and a recording survives kill -9."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from tests.conftest import REPO_ROOT, RunCli, cli_env, recorded_until, wait_until
from tokenwatch.base.clock import ManualClock
from tokenwatch.base.events import Event, RunEnded
from tokenwatch.inputs.replay.player import ReplayPlayer
from tokenwatch.recording import read_events

FAULTS = "node07:down@4m,node03:throttle@2m-5m,node11:slow@1m-3m,node05:stale@3m-3m20s"


@pytest.mark.parametrize("scenario", ["Offline", "Server"])
def test_replay_shows_what_the_live_run_showed(run_cli: RunCli, tmp_path: Path, scenario: str) -> None:
    rec, live, replay = tmp_path / "run.jsonl.zst", tmp_path / "live.jsonl", tmp_path / "replay.jsonl"
    common = ["--headless", "--interval", "15s"]
    sim = run_cli(
        "sim",
        "--speed",
        "0",
        "--duration",
        "8m",
        "--seed",
        "5",
        "--scenario",
        scenario,
        "--faults",
        FAULTS,
        "--record",
        str(rec),
        "--jsonl",
        str(live),
        *common,
    )
    assert sim.returncode == 0, sim.stderr
    rep = run_cli("replay", str(rec), "--speed", "0", "--jsonl", str(replay), *common)
    assert rep.returncode == 0, rep.stderr
    live_lines, replay_lines = live.read_bytes().splitlines(), replay.read_bytes().splitlines()
    assert len(live_lines) > 30
    assert live_lines == replay_lines
    kinds = {a["kind"] for line in live_lines for a in orjson.loads(line)["alerts"]}
    assert {"down", "throttle", "stale"} <= kinds  # the faults are in what both showed
    # The human lines and the closing summary agree too.
    assert sim.stdout == rep.stdout


def test_replay_from_a_start_time_matches_the_live_run_from_there(run_cli: RunCli, tmp_path: Path) -> None:
    rec, live, replay = tmp_path / "run.jsonl", tmp_path / "live.jsonl", tmp_path / "replay.jsonl"
    sim = run_cli(
        "sim",
        "--speed",
        "0",
        "--duration",
        "6m",
        "--seed",
        "2",
        "--record",
        str(rec),
        "--headless",
        "--interval",
        "30s",
        "--jsonl",
        str(live),
    )
    assert sim.returncode == 0, sim.stderr
    rep = run_cli(
        "replay",
        str(rec),
        "--speed",
        "0",
        "--start",
        "3m",
        "--headless",
        "--interval",
        "30s",
        "--jsonl",
        str(replay),
    )
    assert rep.returncode == 0, rep.stderr
    from_three = [line for line in live.read_bytes().splitlines() if orjson.loads(line)["t"] >= 180]
    assert replay.read_bytes().splitlines() == from_three
    assert rep.stdout.splitlines()[0].startswith("03:00")


@pytest.fixture
def short_recording(run_cli: RunCli, tmp_path: Path) -> Path:
    """A 90-second h100-dgx run, recorded unpaced."""
    rec = tmp_path / "run.jsonl"
    made = run_cli(
        "sim",
        "--speed",
        "0",
        "--duration",
        "90s",
        "--profile",
        "h100-dgx",
        "--headless",
        "--record",
        str(rec),
    )
    assert made.returncode == 0, made.stderr
    return rec


@pytest.mark.parametrize(("speed", "start_s"), [(60.0, 0.0), (2.5, 0.0), (60.0, 30.0)])
def test_paced_replay_releases_each_event_at_its_run_time_over_speed(
    short_recording: Path, speed: float, start_s: float
) -> None:
    """On the injected clock: from --start on, an event at run time t leaves (t - t_start) / speed after
    the first; the events before --start leave at once (the core must catch up to where the replay starts)."""
    clock = ManualClock()
    replay = ReplayPlayer(short_recording, speed=speed, start_s=start_s, clock=clock)
    released: list[tuple[float, float]] = []  # (clock time when emitted, the event's run time)

    async def emit(event: Event) -> None:
        released.append((clock.time(), event.t))

    asyncio.run(replay.run(emit))
    recorded, _ = read_events(short_recording)
    assert [t for _, t in released] == [e.t for e in recorded]  # every event, in order, none added
    assert all(at == 0.0 for at, t in released if t < start_s)
    paced = [(at, t) for at, t in released if t >= start_s]
    first_at, first_t = paced[0]
    assert first_t == start_s  # the simulator reports every second: the first paced event is at --start
    for at, t in paced:
        assert at - first_at == pytest.approx((t - first_t) / speed, abs=1e-9), t
    # The whole replay took its run time (from --start) over the speed, on the clock it was given.
    assert clock.time() == pytest.approx((recorded[-1].t - start_s) / speed, abs=1e-9)


def test_paced_replay_shows_what_an_unpaced_one_shows(
    run_cli: RunCli, short_recording: Path, tmp_path: Path
) -> None:
    """--speed changes when lines appear, never what they say: a paced replay finishes by itself and prints
    the same lines (one per 30 s of run time, then one at the end) and summary as --speed 0."""
    outputs = {}
    for speed in ("60", "0"):
        jsonl = tmp_path / f"x{speed}.jsonl"
        headless = ("--headless", "--interval", "30s", "--jsonl", str(jsonl))
        rep = run_cli("replay", str(short_recording), "--speed", speed, *headless)
        assert rep.returncode == 0, rep.stderr
        outputs[speed] = (rep.stdout, jsonl.read_bytes())
    assert outputs["60"] == outputs["0"]
    stdout, snapshots = outputs["60"]
    end = read_events(short_recording)[0][-1]
    assert isinstance(end, RunEnded)
    boundaries = [30.0 * k for k in range(1, 10) if 30.0 * k < end.t]
    assert [orjson.loads(line)["t"] for line in snapshots.splitlines()] == [*boundaries, end.t]
    lines, _, table = stdout.partition("\n\n")
    assert len(lines.splitlines()) == len(boundaries) + 1
    assert "Total aggregate" in table


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.zst"])
def test_recording_survives_kill_9(tmp_path: Path, suffix: str) -> None:
    rec = tmp_path / f"crash{suffix}"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tokenwatch",
            "sim",
            "--speed",
            "20",
            "--headless",
            "--interval",
            "10s",
            "--record",
            str(rec),
        ],
        stdout=subprocess.PIPE,
        text=True,
        env=cli_env(),
        cwd=REPO_ROOT,
        start_new_session=True,
    )
    assert proc.stdout is not None
    shown = 0.0
    try:
        for line in proc.stdout:  # each line is printed once the run reached that time
            minutes, seconds = line.split()[0].split(":")
            shown = int(minutes) * 60 + int(seconds)
            if shown >= 60:
                break
        wait_until(
            lambda: (recorded_until(rec) or 0.0) >= shown, f"the recording on disk up to {shown} s"
        )  # flushed often
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert shown >= 60
    events, warnings = read_events(rec)
    assert events[0].t == 0.0
    assert max(e.t for e in events) >= shown
    assert all("not JSON" not in w for w in warnings)  # at most a torn last line / a cut-off block
    # ...and the cut-off recording replays and summarises.
    env_run = subprocess.run(
        [sys.executable, "-m", "tokenwatch", "summarize", str(rec), "--json"],
        capture_output=True,
        text=True,
        env=cli_env(),
        cwd=REPO_ROOT,
    )
    assert env_run.returncode == 0, env_run.stderr
    summary = orjson.loads(env_run.stdout)
    assert summary["aggregate"]["tokens_per_s"] > 0
    # It says it is cut off: not complete, no run end, a warning, and the last time it covers.
    assert summary["complete"] is False
    assert summary["end_reason"] is None
    assert summary["duration_s"] == max(e.t for e in events)
    assert any(w.startswith("no run end: the stream stops at ") for w in summary["warnings"])
