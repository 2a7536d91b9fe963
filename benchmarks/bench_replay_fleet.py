"""Replay at fleet size: seeks in the dashboard's replay of a 64-rack, 80-minute recording, with its index.

    python benchmarks/bench_replay_fleet.py                      # makes the recording in a temp folder
    python benchmarks/bench_replay_fleet.py --folder DIR         # made once into DIR, then reused
    python benchmarks/bench_replay_fleet.py --recording FILE     # any recording
    python benchmarks/bench_replay_fleet.py --folder DIR --reuse-index   # seeks only, with the index made
    python benchmarks/bench_replay_fleet.py --short              # 8 racks x 10 minutes, 5 seeks (CI)

The input is what `tokenwatch sim --racks 64 --duration 80m --speed 0 --headless --record FILE` writes
(4,608 GPUs, ~236 MB compressed). Two processes, each the real app headless:

1. the first pass: no index yet; the replay plays to the end at full speed, writing ``FILE.twidx``;
2. the next open: the index is used at once; ~20 seeks to random places (seeded), each timed from the
   key to the new core on screen, in wall-clock time and in the process's CPU time (on a machine shared
   with other work, the CPU time is what a quiet core would take).

Each prints its peak resident memory (ru_maxrss). Also measured: the parts of a seek (restoring one
keyframe; playing 30 s of 64-rack events through a core). Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_common import add_short_option, sim_recording, target  # noqa: E402

SEEKS = 20
SEEK_P95_MS = 300.0
PLAYER_PEAK_MB = 500.0


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


async def dashboard(path: Path, phase: str, seeks: int) -> None:
    from tokenwatch.core import RackCore
    from tokenwatch.frontends.tui.app import TokenwatchApp
    from tokenwatch.frontends.tui.theme_loader import shipped_dir
    from tokenwatch.inputs.replay.index_place import index_path_for
    from tokenwatch.inputs.replay.player import ReplayPlayer
    from tokenwatch.session import Session

    player = ReplayPlayer(path, speed=0, paused=phase == "seeks", index=True)
    session = Session(RackCore(), [player], flush_interval_s=None)
    player.bind(session)
    app = TokenwatchApp(session, mode="replay", player=player, theme_dirs=[shipped_dir()])
    async with app.run_test(size=(160, 50)) as pilot:
        if phase == "first-pass":
            began = time.perf_counter()
            while not player.at_end:
                await pilot.pause(0.5)
            index = index_path_for(path)
            print(
                f"  first pass to the end ({player.position_s / 60:.0f} min of run time) in "
                f"{time.perf_counter() - began:.0f} s: {player.keyframe_count} keyframes, index "
                f"{index.stat().st_size / 1e6:.0f} MB (complete: {player.index_complete}), "
                f"peak {peak_mb():.0f} MB"
            )
        else:
            while player.seeking or not player.loaded:
                await pilot.pause(0.05)
            print(
                f"  opened with a complete index: {player.index_complete}, {player.keyframe_count} keyframes"
            )
            end = player.duration_s or 0.0
            rng = random.Random(15)
            times, cpu = [], []
            for _ in range(seeks):
                to_s = rng.uniform(0, end)
                t0, c0 = time.perf_counter(), time.process_time()
                player.seek(to_s)
                await pilot.pause()
                while player.seeking:
                    await pilot.pause(0.005)
                times.append(time.perf_counter() - t0)
                cpu.append(time.process_time() - c0)
                print(
                    f"    seek to {to_s / 60:5.1f} min: {times[-1] * 1000:4.0f} ms "
                    f"({cpu[-1] * 1000:4.0f} ms CPU)",
                    flush=True,
                )
            times.sort()
            p95 = times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]
            target(
                f"{len(times)} seeks in the dashboard's replay",
                f"median {statistics.median(times) * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms, "
                f"max {times[-1] * 1000:.0f} ms; warnings {player.warnings}",
                f"p95 < {SEEK_P95_MS:.0f} ms",
                p95 * 1000 < SEEK_P95_MS,
            )
            cpu.sort()
            print(
                f"  the same in CPU time (this process, all threads; what a quiet core would take): median "
                f"{statistics.median(cpu) * 1000:.0f} ms, "
                f"p95 {cpu[round(0.95 * (len(cpu) - 1))] * 1000:.0f} ms, "
                f"max {cpu[-1] * 1000:.0f} ms"
            )
        await pilot.press("q")
    if phase == "seeks":
        peak = peak_mb()
        target(
            "the player's peak resident memory",
            f"{peak:.0f} MB",
            f"< {PLAYER_PEAK_MB:.0f} MB",
            peak < PLAYER_PEAK_MB,
        )
    else:
        print(f"  {phase}: peak resident memory {peak_mb():.0f} MB", flush=True)


def parts(path: Path) -> None:
    """The two parts of a seek, alone: restoring a keyframe from the index, and playing on from it."""
    from tokenwatch.inputs.replay.index_place import index_path_for
    from tokenwatch.inputs.replay.index_store import open_keyframes
    from tokenwatch.inputs.replay.tape import as_replayed
    from tokenwatch.recording import RecordingReader

    store, warning = open_keyframes(path, None)
    assert store is not None, warning
    assert not store.building
    middle = store.frames[len(store.frames) // 2]
    t0, c0 = time.perf_counter(), time.process_time()
    position = store.position_of(middle)
    core = store.core_of(middle)
    restored, restored_cpu = time.perf_counter() - t0, time.process_time() - c0
    assert core is not None
    reader = RecordingReader(path, start=None if position is None else position.point)
    skip = 0 if position is None else position.skip
    t0, c0 = time.perf_counter(), time.process_time()
    for event in reader.events():
        if skip:
            skip -= 1
            continue
        if event.t > middle.t + store.every_s:
            break
        core.ingest(as_replayed(event))
    played, played_cpu = time.perf_counter() - t0, time.process_time() - c0
    print(
        f"  restoring one keyframe: {restored * 1000:.0f} ms ({restored_cpu * 1000:.0f} ms CPU); reading and "
        f"playing the {store.every_s:.0f} s after it: {played * 1000:.0f} ms "
        f"({played_cpu * 1000:.0f} ms CPU); "
        f"index {index_path_for(path).stat().st_size / 1e6:.0f} MB "
        f"({len(store.frames) - 1} keyframes, one every {store.every_s:.0f} s)"
    )
    store.close()


def make_recording(folder: Path, short: bool = False) -> Path:
    racks, duration = (8, "10m") if short else (64, "80m")
    path = folder / f"r{racks}-{duration}.jsonl.zst"
    if path.exists():
        return path
    sim_recording(path, racks=racks, duration=duration)
    return path


def run(path: Path, reuse_index: bool, seeks: int = SEEKS) -> None:
    from tokenwatch.inputs.replay.index_place import index_path_for

    phases = ["first-pass", "seeks", "parts"]
    if reuse_index and index_path_for(path).exists():
        phases.remove("first-pass")
    else:
        index_path_for(path).unlink(missing_ok=True)  # the first pass builds it
    for phase in phases:
        print(f"{phase} ({path.name}):", flush=True)
        subprocess.run(
            [
                sys.executable,
                __file__,
                "--in-process",
                phase,
                "--recording",
                str(path),
                "--seeks",
                str(seeks),
            ],
            check=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--recording", type=Path)
    parser.add_argument("--folder", type=Path, help="make the recording here once, and reuse it")
    parser.add_argument("--reuse-index", action="store_true", help="skip the first pass if FILE.twidx exists")
    parser.add_argument("--in-process", choices=("first-pass", "seeks", "parts"), help=argparse.SUPPRESS)
    parser.add_argument("--seeks", type=int, default=SEEKS, help=argparse.SUPPRESS)
    add_short_option(parser)
    args = parser.parse_args()
    seeks = 5 if args.short else args.seeks
    if args.in_process == "parts":
        parts(args.recording)
    elif args.in_process:
        asyncio.run(dashboard(args.recording, args.in_process, seeks))
    elif args.recording or args.folder:
        run(args.recording or make_recording(args.folder, args.short), args.reuse_index, seeks)
    else:
        with tempfile.TemporaryDirectory() as folder:
            run(make_recording(Path(folder), args.short), reuse_index=False, seeks=seeks)


if __name__ == "__main__":
    main()
