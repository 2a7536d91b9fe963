"""The fleet board at 64 racks (1,152 nodes, 4,608 GPUs): a full refresh, a key's response, drilling into a
rack, and what the garbage collector did meanwhile; and the cost of the per-rack forecasts in the core.

    python benchmarks/bench_fleet_board.py                  # 120x40 and 200x60
    python benchmarks/bench_fleet_board.py --no-gc-freeze   # as before the fix: the long tail comes back
    python benchmarks/bench_fleet_board.py --parts terminal # sim --racks 64 --speed 60 in a real terminal

Then 1,000 racks watched through Prometheus, grouped in 4 sites of 10 rows (benchmarks/fleet_thousand.py,
the core fed as a fleet watch feeds it), at 200x60: a full refresh of the sites' board, then the refresh
after each new round of the racks' figures (5 s of run time ingested before it, not timed: what the live
board does when data came), and the keys that walk it (s, down, enter to a site's rows, enter to a row's
racks, escape, escape). ``--short``: 100 racks.

A "full refresh" is what the 4 Hz timer does when data changed, made to repaint everything: the core's
snapshot (with the fleet table), every panel of the board updated from it, and the whole screen rendered to
terminal bytes. A key's time is its action plus the repaint of the whole screen. Enter is measured to the
rack dashboard's first full frame (its mount included); escape back to the board's. Figures are printed,
never asserted (tests do not time things).

``--parts terminal``: ``tokenwatch sim --racks 64 --speed 60`` started in a real terminal (a 200x60 tmux
pane, read with ``capture-pane``): the wall time from the start to the first frame (anything drawn) and
to the board with its racks' rows (target <= 3 s); then ``s`` pressed again and again, each timed from
``send-keys`` to the screen whose footer names the next sort column (target <= 100 ms p95; the figure
includes tmux's own capture, a few ms). The same for ``sim --racks 2 --speed 60`` first, a fleet that keeps
its pace: the floor the machine's load sets, printed beside the 64-rack figures as a ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import io
import os
import re
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_common import add_short_option, full_frame, target, timed_refresh  # noqa: E402
from bench_tui import ms, sixty_four_racks  # noqa: E402
from fleet_thousand import ThousandRacks, thousand_racks_feed  # noqa: E402
from rich.console import Console  # noqa: E402
from textual.pilot import Pilot  # noqa: E402
from tmux_terminal import TmuxTerminal  # noqa: E402

from tokenwatch.core import RackCore  # noqa: E402
from tokenwatch.core.fleet import fleet_tick  # noqa: E402
from tokenwatch.frontends.tui.app import TokenwatchApp  # noqa: E402
from tokenwatch.frontends.tui.screens.fleet_screen import FleetScreen  # noqa: E402
from tokenwatch.frontends.tui.theme_loader import shipped_dir  # noqa: E402
from tokenwatch.frontends.tui.widgets.fleet_board import FleetBoard  # noqa: E402
from tokenwatch.frontends.tui.widgets.group_board import GroupBoard  # noqa: E402
from tokenwatch.session import Session  # noqa: E402


class GcWatch:
    """Each full (generation 2) collection's pause while the measurement runs."""

    def __init__(self) -> None:
        self.pauses: list[float] = []
        self._t0 = 0.0
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._t0 = time.perf_counter()
        elif info["generation"] == 2:
            self.pauses.append(time.perf_counter() - self._t0)

    def report(self) -> str:
        if not self.pauses:
            return "no full collection"
        return f"{len(self.pauses)} full collections, longest {max(self.pauses) * 1000:.0f} ms"

    def close(self) -> None:
        gc.callbacks.remove(self._callback)


REFRESH_P95_MS = 50.0
KEY_P95_MS = 100.0


def p95_ms(values: list[float]) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * 0.95))] * 1000


def judged(what: str, values: list[float], limit_ms: float) -> None:
    p95 = p95_ms(values)
    target(what, f"p95 {p95:.1f} ms", f"<= {limit_ms:.0f} ms", p95 <= limit_ms)


async def fleet_screen_up(
    app: TokenwatchApp, pilot: Pilot[None], size: tuple[int, int], tries: int
) -> Console:
    """Wait (``tries`` x 20 ms at most) for the fleet board's screen; a console to draw whole frames on."""
    for _ in range(tries):
        if isinstance(app.screen, FleetScreen) and app.screen.is_mounted:
            break
        await pilot.pause(0.02)
    await pilot.pause(0.2)
    return Console(
        file=io.StringIO(), width=size[0], height=size[1], force_terminal=True, color_system="truecolor"
    )


async def timed_refreshes(
    app: TokenwatchApp,
    screen: FleetScreen,
    out: Console,
    pilot: Pilot[None],
    iterations: int,
    label: str,
    before_each: Callable[[], None] | None = None,
) -> list[float]:
    """``iterations`` full refreshes, each stage printed under ``label``; the totals (ms). The total's
    CPU time is printed too: on a loaded machine it is the steadier figure."""
    stages: dict[str, list[float]] = {"snapshot": [], "panels": [], "layout+render": [], "total": []}
    cpu = []
    for _ in range(iterations):
        if before_each is not None:
            before_each()  # not timed
        started = time.process_time()
        for key, value in zip(stages, timed_refresh(app, screen, out), strict=True):
            stages[key].append(value)
        cpu.append(time.process_time() - started)
        await pilot.pause()
    stages["total CPU"] = cpu
    for key, values in stages.items():
        print(f"    {label} {key:<14} {ms(values)}")
    return stages["total"]


async def measure(app: TokenwatchApp, size: tuple[int, int], iterations: int) -> None:
    where = f"the fleet board, 64 racks, {size[0]}x{size[1]}"
    async with app.run_test(size=size) as pilot:
        out = await fleet_screen_up(app, pilot, size, tries=200)

        def frame() -> None:
            full_frame(app, out)

        watch = GcWatch()
        board_screen = app.screen
        assert isinstance(board_screen, FleetScreen)
        totals = await timed_refreshes(app, board_screen, out, pilot, iterations, "board refresh")
        judged(f"{where}: a full refresh", totals, REFRESH_P95_MS)
        print(f"    garbage collector meanwhile: {watch.report()}")
        watch.pauses.clear()
        board = board_screen.query_one(FleetBoard)
        for label, action in (
            ("key s (sort)", board_screen.action_sort_next),
            ("key down", lambda: board.action_cursor(1)),
        ):
            times = []
            for _ in range(iterations):
                t0 = time.perf_counter()
                action()
                frame()
                times.append(time.perf_counter() - t0)
                await pilot.pause()
            print(f"    {label:<28} {ms(times)}")
            judged(f"{where}: {label}", times, KEY_P95_MS)
        print(f"    garbage collector meanwhile: {watch.report()}")
        watch.pauses.clear()
        opened, back, rack_refresh = [], [], []
        for _ in range(max(5, iterations // 4)):
            t0 = time.perf_counter()
            await board_screen.open_dashboard(board.cursor_rack)  # what enter does, awaited
            app.refresh_data(force=True)
            frame()
            opened.append(time.perf_counter() - t0)
            await pilot.pause()
            for _ in range(3):
                t0 = time.perf_counter()
                app.refresh_data(force=True)
                frame()
                rack_refresh.append(time.perf_counter() - t0)
                await pilot.pause()
            t0 = time.perf_counter()
            await app.pop_screen()  # what escape does, awaited
            app.refresh_data(force=True)
            frame()
            back.append(time.perf_counter() - t0)
            await pilot.pause()
            board.action_cursor(1)
        print(f"    {'enter, first time (mount)':<28} {ms(opened[:1])}")
        opened = opened[1:]
        print(f"    {'enter (a rack, first frame)':<28} {ms(opened)}")
        print(f"    {'the rack dashboard refresh':<28} {ms(rack_refresh)}")
        print(f"    {'escape (back, first frame)':<28} {ms(back)}")
        judged(f"{where}: enter into a rack (after the first)", opened, KEY_P95_MS)
        judged(f"{where}: escape back to the board", back, KEY_P95_MS)
        print(f"    garbage collector meanwhile: {watch.report()}")
        watch.close()


async def measure_grouped(
    app: TokenwatchApp, feed: ThousandRacks, size: tuple[int, int], iterations: int
) -> None:
    """The sites' board of a grouped fleet: a full refresh, one after each new round of figures, and each
    key that walks the levels."""
    racks = feed.racks
    where = f"the grouped fleet board, {racks:,} racks, {size[0]}x{size[1]}"
    async with app.run_test(size=size) as pilot:
        out = await fleet_screen_up(app, pilot, size, tries=500)
        screen = app.screen
        assert isinstance(screen, FleetScreen)
        groups = screen.query_one(GroupBoard)
        assert groups.display, "a grouped fleet leads with its sites"
        totals = await timed_refreshes(app, screen, out, pilot, iterations, "board refresh")
        judged(f"{where}: a full refresh", totals, REFRESH_P95_MS)
        # each after the next 5 s of the run: new figures for every rack
        totals = await timed_refreshes(app, screen, out, pilot, iterations, "after a round", feed.round)
        judged(f"{where}: a refresh after a round of new figures", totals, REFRESH_P95_MS)

        def enter() -> None:  # what enter on the group board does: its message, handled
            key = groups.cursor_key if groups.display else None
            if key is not None:
                screen.on_group_board_group_selected(GroupBoard.GroupSelected(key))

        walk = (
            ("key s (sort)", screen.action_sort_next),
            ("key down", lambda: screen._board().action_cursor(1)),
            ("enter (a site's rows)", enter),
            ("enter (a row's racks)", enter),
            ("escape (back to the rows)", screen.action_up_level),
            ("escape (back to the sites)", screen.action_up_level),
        )
        times: dict[str, list[float]] = {label: [] for label, _ in walk}
        for _ in range(iterations):
            for label, action in walk:
                t0 = time.perf_counter()
                action()
                full_frame(app, out)
                times[label].append(time.perf_counter() - t0)
                await pilot.pause()
        for label, values in times.items():
            print(f"    {label:<28} {ms(values)}")
        judged(f"{where}: a key (all six, p95)", [v for vs in times.values() for v in vs], KEY_P95_MS)


def snapshot_cpu(feed: ThousandRacks, iterations: int) -> None:
    """The core's snapshot in CPU time (steadier than wall time on a loaded machine): with no new data,
    and after each new round of figures (the round not timed)."""
    core = feed.core
    paused, after = [], []
    for _ in range(iterations):
        t0 = time.process_time()
        core.snapshot()
        paused.append(time.process_time() - t0)
    for _ in range(max(5, iterations // 2)):
        feed.round()
        t0 = time.process_time()
        core.snapshot()
        after.append(time.process_time() - t0)
    print(f"    snapshot CPU, no new data    {ms(paused)}")
    print(f"    snapshot CPU, after a round  {ms(after)}")


def bench_grouped(short: bool, iterations: int) -> None:
    racks = 100 if short else 1000
    t0 = time.perf_counter()
    feed = thousand_racks_feed(40.0 if short else 90.0, racks=racks)
    core = feed.core
    print(f"\n({racks:,}-rack grouped fleet fed to the core in {time.perf_counter() - t0:.1f} s)")
    snapshot_cpu(feed, iterations)
    size = (200, 60)
    print(f"The grouped fleet board, {racks:,} racks in 4 sites of 10 rows, {size[0]}x{size[1]}:")
    app = TokenwatchApp(Session(core, [], flush_interval_s=None), mode="live", theme_dirs=[shipped_dir()])
    asyncio.run(measure_grouped(app, feed, size, iterations))


def bench_ticks(core: RackCore) -> None:
    """The per-rack forecasts a verdict tick makes (every verdict_interval_s of run time)."""
    state = core.state
    assert state.fleet is not None
    times = []
    for _ in range(10):
        state.fleet.next_due_s = 0.0
        t0 = time.perf_counter()
        fleet_tick(state, state.now)
        times.append(time.perf_counter() - t0)
    interval = state.config.verdict_interval_s
    median = statistics.median(times)
    print(
        f"64 racks' forecasts at a verdict tick: {ms(times)}; every {interval:g} s of run time, "
        f"{median / interval * 100:.2f} % of one core at real time"
    )


def _sorted_by(screen: str) -> str | None:
    found = re.search(r"sorted by (.+?) [▲▼]", screen)
    return found.group(1) if found else None


def measure_in_terminal(presses: int) -> None:
    """First frame and ``s`` of ``sim --racks 64 --speed 60`` in a tmux pane, after the same of a 2-rack
    fleet (never behind its pace: the floor a loaded machine sets, measured in the same run)."""
    if shutil.which("tmux") is None:
        print("skipped (through a real terminal): tmux is not installed")
        return
    floor_first, floor_keys = terminal_times(2, presses)
    first_s, keys = terminal_times(64, presses)
    print(
        f"the floor, sim --racks 2 --speed 60 in the same pane: the board {floor_first:.2f} s; "
        f"s: {ms(floor_keys)}; the 64-rack figures are {first_s / floor_first:.1f}x and "
        f"{p95_ms(keys) / p95_ms(floor_keys):.1f}x (p95) the floor's"
    )
    target(
        "the 64-rack board's first frame through a real terminal", f"{first_s:.2f} s", "<= 3 s", first_s <= 3
    )
    p95 = p95_ms(keys)
    target(
        "s on the 64-rack board at x60 through a real terminal", f"p95 {p95:.0f} ms", "<= 100 ms", p95 <= 100
    )


def terminal_times(racks: int, presses: int) -> tuple[float, list[float]]:
    """``sim --racks N --speed 60`` in a 200x60 tmux pane: seconds to the board with its rows, and each
    ``s``'s seconds to the screen that names the next sort column."""
    command = f"{sys.executable} -m tokenwatch sim --racks {racks} --speed 60"
    terminal = TmuxTerminal(command, 200, 60, cwd=ROOT)
    try:
        drawn = terminal.wait_for(lambda screen: bool(screen.strip()), 120.0)
        board = terminal.wait_for(lambda screen: "rack01 18/18" in screen, 120.0)
        if drawn is None or board is None:
            raise SystemExit(f"no board within 120 s:\n{terminal.screen()}")
        first_s = time.perf_counter() - terminal.started
        keys = []
        for _ in range(presses):
            before = _sorted_by(terminal.screen())
            began = time.perf_counter()
            terminal.press("s")
            took = terminal.wait_for(lambda screen, was=before: _sorted_by(screen) not in (None, was), 30.0)
            keys.append(30.0 if took is None else time.perf_counter() - began)
            time.sleep(0.25)  # an engineer's pace: the run moves between presses
        terminal.press("q")
    finally:
        terminal.close()
    print(
        f"sim --racks {racks} --speed 60 in a 200x60 tmux pane: first frame {drawn:.2f} s, "
        f"the board with its rows {first_s:.2f} s; s: {ms(keys)}"
    )
    return first_s, keys


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--iterations", type=int, default=40)
    parser.add_argument("--no-gc-freeze", action="store_true", help="leave the heap unfrozen (before)")
    parser.add_argument("--parts", default="board,terminal", help="board (in process), terminal (tmux)")
    add_short_option(parser)
    args = parser.parse_args()
    if args.short:
        args.iterations = 8
    parts = set(args.parts.split(","))
    print(
        f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores "
        "(other work on the machine inflates median and p95; min is the least disturbed)\n"
    )
    if "terminal" in parts:
        measure_in_terminal(5 if args.short else 30)
    if "board" not in parts:
        return
    t0 = time.perf_counter()
    core = sixty_four_racks(300.0)
    print(f"(64-rack run simulated and ingested to 5:00 in {time.perf_counter() - t0:.1f} s)")
    bench_ticks(core)
    for size in ((120, 40),) if args.short else ((120, 40), (200, 60)):
        print(f"\nThe fleet board, 64 racks at 5:00, {size[0]}x{size[1]}:")
        app = TokenwatchApp(Session(core, [], flush_interval_s=None), mode="sim", theme_dirs=[shipped_dir()])
        if args.no_gc_freeze:  # as if already done, so it is never done
            app._gc_thresholds = gc.get_threshold()
        asyncio.run(measure(app, size, args.iterations))
    bench_grouped(args.short, args.iterations)


if __name__ == "__main__":
    main()
