"""What several benchmarks share: their inputs (a simulated recording, the 64-rack profile) and a forced
repaint of the whole screen.

Only the standard library is imported at the top: the memory benchmarks import this before they measure a
process's peak memory, so tokenwatch and Textual are imported inside the functions that need them.
"""

from __future__ import annotations

import argparse
import io
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console
    from textual.pilot import Pilot

    from tokenwatch.frontends.tui.app import TokenwatchApp
    from tokenwatch.frontends.tui.screens.dashboard import DashboardScreen
    from tokenwatch.frontends.tui.screens.fleet_screen import FleetScreen
    from tokenwatch.inputs.sim.profile import Profile

ROOT = Path(__file__).resolve().parent.parent

SHORT_HELP = (
    "a quick pass with small inputs and few repeats, so CI can run every script (benchmarks/run_all.py); "
    "its figures only show the script still works, the targets are judged on the full run"
)


def add_short_option(parser: argparse.ArgumentParser) -> None:
    """The ``--short`` flag every benchmark takes (``run_all.py --short`` passes it to each)."""
    parser.add_argument("--short", action="store_true", help=SHORT_HELP)


def verdict_text(label: str, figure: str, goal: str, met: bool) -> str:
    """``MET     label: figure  (target goal)`` (or MISSED): the line ``run_all.py`` collects."""
    return f"{'MET   ' if met else 'MISSED'}  {label}: {figure}  (target {goal})"


def target(label: str, figure: str, goal: str, met: bool) -> bool:
    """One figure against its target, printed as a line starting MET or MISSED; returns ``met``."""
    print(verdict_text(label, figure, goal, met), flush=True)
    return met


def bytecode_compiled(checkout: Path) -> None:
    """Writes the bytecode caches of ``checkout``'s tokenwatch, as ``pip install`` does: a process timed
    here then reads them, as an installed tokenwatch's does. Where ``PYTHONDONTWRITEBYTECODE`` is set (a CI
    machine, this project's development one) an editable checkout has none, and every timed process
    compiled its ~160 modules first: ~0.15-0.35 s of CPU that no floor pays."""
    import compileall

    compileall.compile_dir(str(checkout / "tokenwatch"), quiet=1)


def sim_recording(path: Path, racks: int, duration: str) -> None:
    """Writes ``path`` with `tokenwatch sim --racks RACKS --duration DURATION --speed 0 --record PATH`."""
    print(
        f"making the input: tokenwatch sim --racks {racks} --duration {duration} --speed 0 --record ...",
        flush=True,
    )
    t0 = time.perf_counter()
    sim = ["sim", "--racks", str(racks), "--duration", duration, "--speed", "0", "--headless"]
    subprocess.run(
        [sys.executable, "-m", "tokenwatch", *sim, "--interval", duration, "--record", str(path)],
        check=True,
        stdout=subprocess.DEVNULL,
        cwd=ROOT,
    )
    print(f"  {path.stat().st_size / 1e6:.0f} MB in {time.perf_counter() - t0:.0f} s")


def sixty_four_rack_profile() -> Profile:
    """The GB300 NVL72 profile 64 times over: 1,152 nodes, 4,608 GPUs (as `tokenwatch sim --racks 64`)."""
    import dataclasses

    from tokenwatch.inputs.sim.profile import load_profile

    profile = load_profile("gb300-nvl72")
    return dataclasses.replace(
        profile,
        name=f"{profile.name} x64",
        nodes=profile.nodes * 64,
        total_samples=profile.total_samples * 64,
    )


def full_frame(app: TokenwatchApp, out: Console) -> None:
    """The whole screen rendered to terminal bytes in ``out``, as Textual's own frame does when everything
    changed: layout only when a size changed."""
    screen = app.screen
    if screen._layout_required:
        screen._refresh_layout(app.size)
        screen._layout_required = False
    update = screen._compositor.render_update(full=True, screen_stack=app._background_screens)
    out.file = io.StringIO()
    out.print(update, end="")


def timed_refresh(
    app: TokenwatchApp, screen: DashboardScreen | FleetScreen, out: Console
) -> tuple[float, float, float, float]:
    """One full refresh of ``screen`` (the app's screen), in seconds: the core's snapshot, the panels
    updated from it, the layout and render, and the total."""
    t0 = time.perf_counter()
    snap = app.session.core.snapshot()
    t1 = time.perf_counter()
    screen.show_snapshot(snap, app.badge(), app.replay_state())
    t2 = time.perf_counter()
    full_frame(app, out)
    t3 = time.perf_counter()
    return t1 - t0, t2 - t1, t3 - t2, t3 - t0


async def dashboard_on_screen(app: TokenwatchApp, pilot: Pilot[None], settle: bool) -> DashboardScreen:
    """The dashboard on screen, ready to measure: a replay (``settle``) has played its first events and
    the session has handled them; 64 racks lead with the board, so its "all nodes" dashboard is opened."""
    from tokenwatch.frontends.tui.screens.dashboard import DashboardScreen
    from tokenwatch.frontends.tui.screens.fleet_screen import FleetScreen

    if settle:
        player = app.player
        assert player is not None
        while player.seeking or player.position_s == 0 or not app.session.queue.empty():
            await pilot.pause(0.02)
    await pilot.pause(0.2)
    if isinstance(app.screen, FleetScreen):
        await pilot.press("a")
        await pilot.pause(0.2)
    screen = app.screen
    assert isinstance(screen, DashboardScreen)
    return screen
