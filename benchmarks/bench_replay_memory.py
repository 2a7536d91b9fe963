"""Replay memory: the dashboard's seekable replay, and the headless replay, of a long, large recording.

    python benchmarks/bench_replay_memory.py                     # makes an 8-rack x 8-hour recording first
    python benchmarks/bench_replay_memory.py --recording FILE    # any recording
    python benchmarks/bench_replay_memory.py --only dashboard
    python benchmarks/bench_replay_memory.py --short             # 8 racks x 20 minutes (CI)

The default input is what `tokenwatch sim --racks 8 --duration 8h --speed 0 --record FILE` writes
(576 GPUs, ~180 MB compressed, ~1.3 GB of lines; about 15 s to make here), in a temporary folder.
Each measurement runs in its own process and prints its peak resident memory (ru_maxrss): the dashboard
(the real app, headless, replaying at full speed to the end, then seeking back and forth, each seek
timed) and the headless replay. Figures are printed, never asserted (tests do not time things).
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_common import add_short_option, sim_recording, target  # noqa: E402

DASHBOARD_PEAK_MB = 500.0
HEADLESS_PEAK_MB = 300.0


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


async def dashboard(path: Path) -> None:
    from tokenwatch.core import RackCore
    from tokenwatch.frontends.tui.app import TokenwatchApp
    from tokenwatch.frontends.tui.theme_loader import shipped_dir
    from tokenwatch.inputs.replay.player import ReplayPlayer
    from tokenwatch.session import Session

    player = ReplayPlayer(path, speed=0)
    session = Session(RackCore(), [player], flush_interval_s=None)
    player.bind(session)
    app = TokenwatchApp(session, mode="replay", player=player, theme_dirs=[shipped_dir()])
    async with app.run_test(size=(160, 50)) as pilot:
        began = time.perf_counter()
        next_report = 0.0
        while not player.at_end:
            await pilot.pause(0.5)
            if player.position_s >= next_report:
                print(f"    {player.position_s / 3600:5.2f} h played, peak {peak_mb():6.0f} MB", flush=True)
                next_report += 3600
        played = time.perf_counter() - began
        print(
            f"  played to the end ({player.position_s / 3600:.2f} h of run time) in {played:.0f} s: "
            f"peak {peak_mb():.0f} MB, {player.keyframe_count} keyframes "
            f"(one every {player.keyframe_every_s / 60:.0f} min)"
        )
        player.pause()
        end_h = player.position_s / 3600
        for share in (1 / 8, 7 / 8, 4 / 8, 0.5 / 8, 7.9 / 8):  # 1, 7, 4, 0.5 and 7.9 h of an 8-hour run
            target_h = share * end_h
            t0 = time.perf_counter()
            player.seek(target_h * 3600)
            await pilot.pause()
            while player.seeking:
                await pilot.pause(0.01)
            print(
                f"  seek to {target_h:4.1f} h: {time.perf_counter() - t0:5.2f} s "
                f"(at {player.position_s / 3600:.2f} h), peak {peak_mb():.0f} MB"
            )
        await pilot.press("q")
    peak = peak_mb()
    target(
        "dashboard replay: peak resident memory",
        f"{peak:.0f} MB",
        f"< {DASHBOARD_PEAK_MB:.0f} MB",
        peak < DASHBOARD_PEAK_MB,
    )


def headless(path: Path) -> None:
    from tokenwatch.cli import main

    began = time.perf_counter()
    with open("/dev/null", "w") as devnull:
        saved, sys.stdout = sys.stdout, devnull
        try:
            main(["replay", str(path), "--speed", "0", "--headless", "--interval", "1h"])
        finally:
            sys.stdout = saved
    peak = peak_mb()
    target(
        f"headless replay (in {time.perf_counter() - began:.0f} s): peak resident memory",
        f"{peak:.0f} MB",
        f"< {HEADLESS_PEAK_MB:.0f} MB",
        peak < HEADLESS_PEAK_MB,
    )


def make_recording(folder: Path, duration: str) -> Path:
    path = folder / f"r8-{duration}.jsonl.zst"
    sim_recording(path, racks=8, duration=duration)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--recording", type=Path)
    parser.add_argument("--only", choices=("dashboard", "headless"))
    parser.add_argument("--in-process", choices=("dashboard", "headless"), help=argparse.SUPPRESS)
    add_short_option(parser)
    args = parser.parse_args()
    if args.in_process == "dashboard":
        asyncio.run(dashboard(args.recording))
        return
    if args.in_process == "headless":
        headless(args.recording)
        return
    with tempfile.TemporaryDirectory() as folder:
        path = args.recording or make_recording(Path(folder), "20m" if args.short else "8h")
        for kind in ("dashboard", "headless"):
            if args.only in (None, kind):
                print(f"{kind} replay of {path.name}:", flush=True)
                subprocess.run(
                    [sys.executable, __file__, "--in-process", kind, "--recording", str(path)], check=True
                )


if __name__ == "__main__":
    main()
