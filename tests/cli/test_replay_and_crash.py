"""Replay equals live, and a recording survives kill -9."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from tests.conftest import REPO_ROOT, cli_env
from tokenwatch.recording import read_events

FAULTS = "node07:down@4m,node03:throttle@2m-5m,node11:slow@1m-3m,node05:stale@3m-3m20s"


@pytest.mark.parametrize("scenario", ["Offline", "Server"])
def test_replay_shows_what_the_live_run_showed(run_cli, tmp_path: Path, scenario: str) -> None:
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


def test_replay_from_a_start_time_matches_the_live_run_from_there(run_cli, tmp_path: Path) -> None:
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


def test_paced_replay_takes_run_time_over_speed(run_cli, tmp_path: Path) -> None:
    rec = tmp_path / "run.jsonl"
    assert (
        run_cli(
            "sim",
            "--speed",
            "0",
            "--duration",
            "90s",
            "--profile",
            "h100-dgx",
            "--record",
            str(rec),
            "--headless",
        ).returncode
        == 0
    )
    began = time.monotonic()
    rep = run_cli("replay", str(rec), "--speed", "60", "--headless", "--interval", "30s")
    took = time.monotonic() - began
    assert rep.returncode == 0
    events, _ = read_events(rec)
    assert took >= events[-1].t / 60 * 0.9  # paced: not faster than the speed allows


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
        time.sleep(1.5)  # older than about a second must be on disk
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
