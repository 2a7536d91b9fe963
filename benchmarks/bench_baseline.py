"""What ``--baseline`` adds to one dashboard refresh, at 72 GPUs and at 4,608 (``sim --racks 64``).

    python benchmarks/bench_baseline.py                 # both sizes, 120x40 and 200x60
    python benchmarks/bench_baseline.py --iterations 200

The cost has two parts, measured separately and added:

- **the core**: the comparison each snapshot carries (``baseline_view``: the baseline read at the
  snapshot's run time, node matching, the deltas), timed on its own;
- **the panels**: one full refresh as ``bench_tui.py`` times it (every panel updated from the snapshot,
  the layout, the whole screen rendered to terminal bytes), alternately with the snapshot as it is and with
  its ``baseline`` removed: the header's comparison, the node table's column, the timeline's second line
  and the latency overlay are then the only difference. Paired differences (with minus without, iteration
  by iteration) cancel most of what other work on the machine does to both.

72 GPUs: the gb300 sample run paused at 41:07 against the node-failure sample (an 80-minute baseline).
4,608 GPUs: 64 racks simulated to 5:00 against ``sim:gb300-nvl72`` laid over its 1,152 nodes.
Figures are printed, never asserted (tests do not time things).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import io
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rich.console import Console  # noqa: E402

from tokenwatch.collectors.replay import ReplayPlayer  # noqa: E402
from tokenwatch.core import CoreConfig, RackCore  # noqa: E402
from tokenwatch.core.baseline import Baseline, RunIdentity  # noqa: E402
from tokenwatch.core.baseline_compare import baseline_view  # noqa: E402
from tokenwatch.runs.baseline import load_baseline  # noqa: E402
from tokenwatch.session import Session  # noqa: E402
from tokenwatch.sim.profile import load_profile  # noqa: E402
from tokenwatch.sim.rack_sim import RackSimulation, SimSettings  # noqa: E402
from tokenwatch.tui.app import TokenwatchApp  # noqa: E402
from tokenwatch.tui.screens.dashboard import DashboardScreen  # noqa: E402
from tokenwatch.tui.theme_loader import shipped_dir  # noqa: E402

SAMPLES = ROOT / "sample_runs"


def ms(values: list[float]) -> str:
    values = sorted(values)
    p95 = values[min(len(values) - 1, int(len(values) * 0.95))]
    return f"median {statistics.median(values) * 1000:6.2f} ms   p95 {p95 * 1000:6.2f} ms"


def core_part(core: RackCore, iterations: int) -> list[float]:
    """The comparison alone, at the core's latest run time (the verdict's forecast computed once)."""
    state = core.state
    forecast = core.snapshot().verdict
    assert forecast is not None
    times = []
    for _ in range(iterations):
        t0 = time.perf_counter()
        baseline_view(state, state.now, forecast.forecast)
        times.append(time.perf_counter() - t0)
    return times


async def panel_part(app: TokenwatchApp, size: tuple[int, int], iterations: int, settle: bool) -> list[float]:
    """Paired: a full refresh with the snapshot's baseline, minus one without it."""
    async with app.run_test(size=size) as pilot:
        if settle:
            player = app.player
            assert player is not None
            while player.seeking or player.position_s == 0 or not app.session.queue.empty():
                await pilot.pause(0.02)
        await pilot.pause(0.2)
        screen = app.screen
        assert isinstance(screen, DashboardScreen)
        out = Console(file=io.StringIO(), width=size[0], height=size[1], force_terminal=True)
        with_it = app.session.core.snapshot()
        assert with_it.baseline is not None
        without = dataclasses.replace(with_it, baseline=None)

        def refresh(snap: object) -> float:
            t0 = time.perf_counter()
            screen.show_snapshot(snap, app.badge(), app.replay_state())  # type: ignore[arg-type]
            if screen._layout_required:
                screen._refresh_layout(app.size)
                screen._layout_required = False
            update = screen._compositor.render_update(full=True, screen_stack=app._background_screens)
            out.file = io.StringIO()
            out.print(update, end="")
            return time.perf_counter() - t0

        for _ in range(3):  # both states laid out once
            refresh(with_it)
            await pilot.pause()
            refresh(without)
            await pilot.pause()
        differences = []
        for _ in range(iterations):
            a = refresh(with_it)
            await pilot.pause()
            b = refresh(without)
            await pilot.pause()
            differences.append(a - b)
        return differences


def sixty_four_racks(run_s: float, baseline: Baseline | None) -> RackCore:
    profile = load_profile("gb300-nvl72")
    profile = dataclasses.replace(
        profile,
        name=f"{profile.name} x64",
        nodes=profile.nodes * 64,
        total_samples=profile.total_samples * 64,
    )
    core = RackCore(CoreConfig(baseline=baseline))
    for event in RackSimulation(SimSettings(profile, seed=0, faults=())).events():
        if event.t > run_s:
            break
        core.ingest(event)
    return core


def report(label: str, core_times: list[float], panel_times: list[float]) -> None:
    core_ms = statistics.median(core_times) * 1000
    panel_ms = statistics.median(panel_times) * 1000
    print(f"    core: baseline_view       {ms(core_times)}")
    print(f"    panels: with - without    {ms(panel_times)}")
    print(f"    {label}: added per refresh {core_ms + panel_ms:.2f} ms (medians)")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--iterations", type=int, default=60)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores\n")

    t0 = time.perf_counter()
    base, _ = load_baseline(str(SAMPLES / "gb300-nvl72-node-failure.jsonl.zst"), RunIdentity("Offline"))
    print(f"(80-minute baseline recording loaded in {time.perf_counter() - t0:.2f} s)")
    for size in ((120, 40), (200, 60)):
        print(f"72 GPUs, gb300 sample at 41:07 against the node-failure sample, {size[0]}x{size[1]}:")
        player = ReplayPlayer(SAMPLES / "gb300-nvl72-offline.jsonl.zst", speed=0, start_s=2467, paused=True)
        session = Session(RackCore(CoreConfig(baseline=base)), [player], flush_interval_s=None)
        player.bind(session)
        app = TokenwatchApp(session, mode="replay", player=player, theme_dirs=[shipped_dir()])
        panels = asyncio.run(panel_part(app, size, args.iterations, settle=True))
        report("72 GPUs", core_part(session.core, args.iterations * 5), panels)

    t0 = time.perf_counter()
    names = tuple(f"node{i:04d}" for i in range(1, 64 * 18 + 1))
    expected, _ = load_baseline("sim:gb300-nvl72", RunIdentity("Offline", nodes=names))
    print(f"\n(sim:gb300-nvl72 built in {time.perf_counter() - t0:.2f} s)")
    core = sixty_four_racks(300.0, expected)
    for size in ((120, 40), (200, 60)):
        print(f"4,608 GPUs (64 racks) at 5:00 against sim:gb300-nvl72, {size[0]}x{size[1]}:")
        session = Session(core, [], flush_interval_s=None)
        app = TokenwatchApp(session, mode="sim", speed=1.0, theme_dirs=[shipped_dir()])
        panels = asyncio.run(panel_part(app, size, max(10, args.iterations // 2), settle=False))
        report("4,608 GPUs", core_part(core, args.iterations * 2), panels)


if __name__ == "__main__":
    main()
