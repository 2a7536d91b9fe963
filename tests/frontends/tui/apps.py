"""Apps for the dashboard tests: apps fed by the real core from the sample recordings or the simulator.

Replays run at speed 0 to a fixed run time and pause there, so what is drawn never depends on the
wall clock: the same app draws the same screen on every machine.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from textual.pilot import Pilot

from tests.conftest import wait_until_async
from tokenwatch.core import CoreConfig, RackCore
from tokenwatch.frontends.tui.app import TokenwatchApp
from tokenwatch.frontends.tui.screens.fleet_screen import FleetScreen
from tokenwatch.frontends.tui.widgets.fleet_board import FleetBoard
from tokenwatch.inputs.replay.player import ReplayPlayer
from tokenwatch.inputs.sim.collector import SimulatorCollector
from tokenwatch.inputs.sim.profile import load_profile
from tokenwatch.inputs.sim.rack_sim import SimSettings
from tokenwatch.recording import RecordingReader, RecordingWriter
from tokenwatch.runs.from_core import ingest_recording
from tokenwatch.session import Session

REPO_ROOT = Path(__file__).resolve().parents[3]
SAMPLE_RUNS = REPO_ROOT / "sample_runs"
OFFLINE = SAMPLE_RUNS / "gb300-nvl72-offline.jsonl.zst"
SERVER = SAMPLE_RUNS / "gb300-nvl72-server.jsonl.zst"
NODE_FAILURE = SAMPLE_RUNS / "gb300-nvl72-node-failure.jsonl.zst"
SNAPSHOT_TIME_S = 41 * 60 + 7  # 41:07, as in the issue

ReplayAppFactory = Callable[..., TokenwatchApp]


def core_until(path: Path, until_s: float) -> RackCore:
    """The reference core: every event of the recording with t <= until_s ingested in order."""
    core, _ = ingest_recording(path, until_s=until_s)
    return core


def end_of(path: Path) -> float:
    """The run time of the recording's last event: a replay started there shows the run at its end (a
    start past it would be said on the replay bar)."""
    return max(event.t for event in RecordingReader(path).events())


def replay_app(
    path: Path = OFFLINE,
    at_s: float = SNAPSHOT_TIME_S,
    *,
    theme: str | None = None,
    theme_dirs: list[Path] | None = None,
    recorder: RecordingWriter | None = None,
    config: CoreConfig | None = None,
) -> TokenwatchApp:
    """A dashboard over a paused replay that will have played ``path`` up to ``at_s``."""
    from tokenwatch.frontends.tui.theme_loader import shipped_dir

    player = ReplayPlayer(path, speed=0, start_s=at_s, paused=True)
    session = Session(RackCore(config), [player], recorder=recorder, flush_interval_s=None)
    player.bind(session)
    dirs = theme_dirs if theme_dirs is not None else [shipped_dir()]
    return TokenwatchApp(session, mode="replay", player=player, theme=theme, theme_dirs=dirs)


def sim_app(
    *, duration: str = "10m", speed: float = 0.0, recorder: RecordingWriter | None = None, faults: str = ""
) -> TokenwatchApp:
    """A dashboard over the seeded gb300 simulator (``speed`` 0: as fast as possible)."""
    from tokenwatch.base.durations import parse_duration
    from tokenwatch.frontends.tui.theme_loader import shipped_dir
    from tokenwatch.inputs.sim.faults import parse_faults

    profile = load_profile("gb300-nvl72")
    settings = SimSettings(
        profile,
        seed=1,
        duration_s=parse_duration(duration),
        faults=parse_faults(faults, profile.node_names()),
    )
    collector = SimulatorCollector(settings, speed=speed)
    session = Session(RackCore(), [collector], recorder=recorder, flush_interval_s=0.5 if speed else None)
    return TokenwatchApp(session, mode="sim", speed=speed, theme_dirs=[shipped_dir()])


async def settle(pilot: Pilot[None], app: TokenwatchApp) -> None:
    """Wait until the replay has reached its target and is drawn."""
    player = app.player
    assert player is not None
    # Reached, the whole recording loaded (the bar shows its length), and every event the player
    # sent is through the session's queue into the core.
    await wait_until_async(
        lambda: not player.seeking and player.position_s > 0 and player.loaded and app.session.queue.empty(),
        "the replay at its start time, loaded, and every event through to the core",
        pause=pilot.pause,
    )
    app.refresh_data(force=True)
    await pilot.pause()


def settle_sync(app: TokenwatchApp) -> Callable[[Pilot[None]], object]:
    """``run_before`` for snap_compare."""

    async def run_before(pilot: Pilot[None]) -> None:
        await settle(pilot, app)

    return run_before


def ready(app: TokenwatchApp, *keys: str) -> Callable[[Pilot[None]], object]:
    """``run_before`` for snap_compare: settled, ``keys`` pressed, then every panel redrawn."""

    async def run_before(pilot: Pilot[None]) -> None:
        await settle(pilot, app)
        for key in keys:
            await pilot.press(key)
        app.refresh_data(force=True)
        await pilot.pause()

    return run_before


def fleet_board_shown(app: TokenwatchApp) -> FleetBoard | None:
    """The fleet board once it is mounted with its racks' table (None before)."""
    screen = app.screen
    if not isinstance(screen, FleetScreen) or not screen.is_mounted:
        return None
    found = screen.query_one(FleetBoard)
    return found if found.table is not None else None
