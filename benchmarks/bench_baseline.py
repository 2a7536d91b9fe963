"""What ``--baseline`` adds to one dashboard refresh, at 72 GPUs and at 4,608 (``sim --racks 64``).

    python benchmarks/bench_baseline.py                 # every case, 120x40 and 200x60
    python benchmarks/bench_baseline.py --iterations 200

What is added, measured in parts and summed (medians):

- **the core**: the comparison each snapshot carries (``baseline_view``: the baseline read at the
  snapshot's run time, node matching, the deltas), timed on its own;
- **the panels, directly**: the four panels the baseline changes (header, node table, throughput timeline,
  latency histogram), each given the snapshot and drawn to its visible lines, alternately with the
  snapshot as it is and with its ``baseline`` removed; the figure is the difference of the medians. This
  is the figure reported: a whole-screen refresh costs 15-40 ms and varies by more than the overlay costs
  on a shared machine;
- **a whole refresh, paired** (a check): one full refresh as ``bench_tui.py`` times it, with minus
  without, iteration by iteration. Its median should agree with the direct figure to within its noise.

72 GPUs: the gb300 Offline sample paused at 41:07 against the node-failure sample (an 80-minute baseline;
an Offline run has no latency histogram) and the Server sample at 5:00 against ``sim:gb300-nvl72`` (all
four overlays). 4,608 GPUs: 64 racks simulated (Server, 10 minutes) to 5:00 against ``sim:gb300-nvl72``
laid over its 1,152 nodes. Figures are printed, never asserted (tests do not time things).
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

from bench_common import (  # noqa: E402
    add_short_option,
    dashboard_on_screen,
    full_frame,
    sixty_four_rack_profile,
    target,
)
from rich.console import Console  # noqa: E402
from textual.geometry import Region  # noqa: E402
from textual.widgets import Static  # noqa: E402

from tokenwatch.core import CoreConfig, RackCore  # noqa: E402
from tokenwatch.core.baseline import Baseline, RunIdentity  # noqa: E402
from tokenwatch.core.baseline.compare import baseline_view  # noqa: E402
from tokenwatch.core.snapshot import RackSnapshot  # noqa: E402
from tokenwatch.frontends.tui.app import TokenwatchApp  # noqa: E402
from tokenwatch.frontends.tui.screens.dashboard import DashboardScreen  # noqa: E402
from tokenwatch.frontends.tui.theme_loader import shipped_dir  # noqa: E402
from tokenwatch.frontends.tui.widgets.latency_histogram import LatencyHistogram  # noqa: E402
from tokenwatch.frontends.tui.widgets.node_table import NodeTable  # noqa: E402
from tokenwatch.frontends.tui.widgets.run_header import RunHeader  # noqa: E402
from tokenwatch.frontends.tui.widgets.throughput_timeline import ThroughputTimeline  # noqa: E402
from tokenwatch.inputs.replay.player import ReplayPlayer  # noqa: E402
from tokenwatch.inputs.sim.rack_sim import RackSimulation, SimSettings  # noqa: E402
from tokenwatch.runs.baseline import load_baseline  # noqa: E402
from tokenwatch.session import Session  # noqa: E402

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


def draw_panels(screen: DashboardScreen, out: Console, snap: RackSnapshot) -> float:
    """The four panels a baseline changes, given ``snap`` and drawn to their visible lines."""
    t0 = time.perf_counter()
    header = screen.query_one(RunHeader)
    header.snapshot = snap
    out.print(header.query_one("#vs-baseline", Static).render(), end="")
    table = screen.query_one(NodeTable)
    table.update_snapshot(snap)
    table.render_lines(Region(0, 0, table.size.width, table.size.height))
    for panel in (screen.query_one(ThroughputTimeline), screen.query_one(LatencyHistogram)):
        panel.snapshot = snap
        out.print(panel.render(), end="")
    return time.perf_counter() - t0


async def panel_part(
    app: TokenwatchApp, size: tuple[int, int], iterations: int, settle: bool
) -> tuple[float, list[float]]:
    """The panels directly (difference of medians, with and without) and whole refreshes, paired."""
    async with app.run_test(size=size) as pilot:
        screen = await dashboard_on_screen(app, pilot, settle)
        out = Console(file=io.StringIO(), width=size[0], height=size[1], force_terminal=True)
        with_it = app.session.core.snapshot()
        assert with_it.baseline is not None
        without = dataclasses.replace(with_it, baseline=None)

        def refresh(snap: RackSnapshot) -> float:
            t0 = time.perf_counter()
            screen.show_snapshot(snap, app.badge(), app.replay_state())
            full_frame(app, out)
            return time.perf_counter() - t0

        for _ in range(3):  # both states laid out once
            refresh(with_it)
            await pilot.pause()
            refresh(without)
            await pilot.pause()
        direct_with, direct_without = [], []
        for _ in range(iterations * 4):
            out.file = io.StringIO()
            direct_with.append(draw_panels(screen, out, with_it))
            direct_without.append(draw_panels(screen, out, without))
        direct = statistics.median(direct_with) - statistics.median(direct_without)
        differences = []
        for _ in range(iterations):
            a = refresh(with_it)
            await pilot.pause()
            b = refresh(without)
            await pilot.pause()
            differences.append(a - b)
        return direct, differences


def sixty_four_racks(run_s: float, baseline: Baseline | None) -> RackCore:
    core = RackCore(CoreConfig(baseline=baseline))
    settings = SimSettings(sixty_four_rack_profile(), scenario="Server", seed=0, duration_s=600.0, faults=())
    for event in RackSimulation(settings).events():
        if event.t > run_s:
            break
        core.ingest(event)
    return core


def report(label: str, core_times: list[float], direct_s: float, paired: list[float]) -> None:
    core_ms = statistics.median(core_times) * 1000
    print(f"    core: baseline_view            {ms(core_times)}")
    print(f"    panels, directly: with-without {direct_s * 1000:6.2f} ms (difference of medians)")
    print(f"    check, whole refresh paired    {ms(paired)}")
    added = core_ms + direct_s * 1000
    limit = 3.0 if label == "72 GPUs" else 20.0
    target(
        f"{label}: what --baseline adds per refresh (core + panels)",
        f"{added:.2f} ms",
        f"< {limit:.0f} ms",
        added < limit,
    )


def replay_case(path: Path, at_s: float, baseline: Baseline) -> TokenwatchApp:
    player = ReplayPlayer(path, speed=0, start_s=at_s, paused=True)
    session = Session(RackCore(CoreConfig(baseline=baseline)), [player], flush_interval_s=None)
    player.bind(session)
    return TokenwatchApp(session, mode="replay", player=player, theme_dirs=[shipped_dir()])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--iterations", type=int, default=60)
    add_short_option(parser)
    args = parser.parse_args()
    if args.short:
        args.iterations = 10
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores\n")
    sizes = ((120, 40),) if args.short else ((120, 40), (200, 60))

    t0 = time.perf_counter()
    failure, _ = load_baseline(str(SAMPLES / "gb300-nvl72-node-failure.jsonl.zst"), RunIdentity("Offline"))
    expected, _ = load_baseline("sim:gb300-nvl72", RunIdentity("Server", duration_s=600.0))
    print(f"(both baselines loaded in {time.perf_counter() - t0:.2f} s)")
    cases = (
        ("Offline sample at 41:07 against the node-failure sample", "gb300-nvl72-offline", 2467, failure),
        ("Server sample at 5:00 against sim:gb300-nvl72", "gb300-nvl72-server", 300, expected),
    )
    for title, sample, at_s, base in cases:
        for size in sizes:
            print(f"72 GPUs, {title}, {size[0]}x{size[1]}:")
            app = replay_case(SAMPLES / f"{sample}.jsonl.zst", at_s, base)
            direct, paired = asyncio.run(panel_part(app, size, args.iterations, settle=True))
            report("72 GPUs", core_part(app.session.core, args.iterations * 5), direct, paired)

    t0 = time.perf_counter()
    names = tuple(f"node{i:04d}" for i in range(1, 64 * 18 + 1))
    expected, _ = load_baseline("sim:gb300-nvl72", RunIdentity("Server", nodes=names, duration_s=600.0))
    fleet_at_s = 60.0 if args.short else 300.0
    core = sixty_four_racks(fleet_at_s, expected)
    at = f"{fleet_at_s / 60:.0f}:00"
    print(f"\n(64 racks simulated to {at} with their baseline in {time.perf_counter() - t0:.1f} s)")
    for size in sizes:
        print(f"4,608 GPUs (64 racks, Server) at {at} against sim:gb300-nvl72, {size[0]}x{size[1]}:")
        session = Session(core, [], flush_interval_s=None)
        app = TokenwatchApp(session, mode="sim", speed=1.0, theme_dirs=[shipped_dir()])
        direct, paired = asyncio.run(panel_part(app, size, max(10, args.iterations // 2), settle=False))
        report("4,608 GPUs", core_part(core, args.iterations * 2), direct, paired)


if __name__ == "__main__":
    main()
