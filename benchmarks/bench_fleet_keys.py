"""Enter into a rack, Escape back and ``s`` on the 64-rack fleet board at 200x60, pressed through Pilot:
the whole path a key takes in the app (its binding, the screen's push or pop, Textual's restyle and
footer, the snapshot, every frame until the app is idle), in CPU time and wall time from the key to
the app idle. ``bench_fleet_board.py`` times the action and one forced frame; this adds what Textual
does around them.

    python benchmarks/bench_fleet_keys.py                       # this checkout
    python benchmarks/bench_fleet_keys.py --code /tmp/before    # another checkout's tokenwatch (before)

Run both in one session and compare: the machine's load moves the absolute figures. CPU time is the
steadier figure on a loaded machine; the target is on wall time, p95, for a quiet one.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def ms(values: list[float]) -> str:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
    median = statistics.median(ordered)
    return f"min {ordered[0] * 1e3:6.1f}  median {median * 1e3:6.1f}  p95 {p95 * 1e3:6.1f} ms"


async def measure(rounds: int) -> dict[str, tuple[list[float], list[float]]]:
    from bench_tui import sixty_four_racks

    from tokenwatch.frontends.tui.app import TokenwatchApp
    from tokenwatch.frontends.tui.screens.fleet_screen import FleetScreen
    from tokenwatch.frontends.tui.theme_loader import shipped_dir
    from tokenwatch.session import Session

    core = sixty_four_racks(300.0)
    app = TokenwatchApp(Session(core, [], flush_interval_s=None), mode="sim", theme_dirs=[shipped_dir()])
    times: dict[str, tuple[list[float], list[float]]] = {"enter": ([], []), "escape": ([], []), "s": ([], [])}
    async with app.run_test(size=(200, 60)) as pilot:
        for _ in range(500):
            if isinstance(app.screen, FleetScreen) and app.screen.is_mounted:
                break
            await pilot.pause(0.02)
        await pilot.pause(0.3)
        for round_ in range(rounds + 1):  # the first round mounts the rack's dashboard: not counted
            for key in ("enter", "escape", "s"):
                cpu0, wall0 = time.process_time(), time.perf_counter()
                await pilot.press(key)
                await pilot.pause()
                if round_:
                    times[key][0].append(time.process_time() - cpu0)
                    times[key][1].append(time.perf_counter() - wall0)
            await pilot.press("down")  # the next rack
            await pilot.pause()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--code", type=Path, help="import tokenwatch from this checkout (the code before)")
    parser.add_argument("--rounds", type=int, default=16)
    parser.add_argument("--short", action="store_true", help="4 rounds: the script still works")
    args = parser.parse_args()
    if args.code is not None:
        sys.path.insert(0, str(args.code.resolve()))
    else:
        sys.path.insert(0, str(ROOT))
    sys.path.insert(1, str(ROOT / "benchmarks"))
    from bench_common import target

    import tokenwatch

    rounds = 4 if args.short else args.rounds
    print(f"tokenwatch from {Path(tokenwatch.__file__).parent.parent}, load {os.getloadavg()[0]:.1f}")
    times = asyncio.run(measure(rounds))
    for key, (cpu, wall) in times.items():
        print(f"  {key:<7} CPU {ms(cpu)}   wall {ms(wall)}")
    wall = times["enter"][1]
    p95 = sorted(wall)[min(len(wall) - 1, int(len(wall) * 0.95))] * 1000
    target(
        "Enter into a rack through Pilot, key to idle (64 racks, 200x60)",
        f"p95 {p95:.0f} ms",
        "<= 100 ms",
        p95 <= 100,
    )


if __name__ == "__main__":
    main()
