"""Make the screenshots of the README and the docs from the real dashboard (Textual's SVG export).

    python scripts/docs_screenshots.py            # writes docs/images/*.svg

Every screenshot is a replay paused at a fixed run time: the sample runs in ``sample_runs/`` and a
3-rack run the seeded simulator records here first. What is drawn depends only on the recording and
the run time, never on the wall clock, so the same tokenwatch draws the same SVGs on every machine:
run it again after a change to the dashboard and commit what changed.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tokenwatch.core import RackCore
from tokenwatch.frontends.tui.app import TokenwatchApp
from tokenwatch.frontends.tui.theme_loader import shipped_dir
from tokenwatch.inputs.replay.player import ReplayPlayer
from tokenwatch.session import Session

REPO_ROOT = Path(__file__).resolve().parents[1]
SAMPLE_RUNS = REPO_ROOT / "sample_runs"
IMAGES = REPO_ROOT / "docs" / "images"
# The fleet board's run: three racks, a node of rack03 down and one of rack02 slow.
FLEET_RUN = (
    "sim",
    "--racks",
    "3",
    "--duration",
    "10m",
    "--seed",
    "1",
    "--faults",
    "node40:down@2m,node20:slow@1m",
)


@dataclass(frozen=True, slots=True)
class Shot:
    """One screenshot: ``recording`` replayed to ``at_s`` (run time), paused, ``keys`` pressed."""

    name: str
    title: str
    recording: Path
    at_s: float
    size: tuple[int, int] = (140, 44)
    keys: tuple[str, ...] = ()


def shots(fleet_recording: Path) -> list[Shot]:
    failure = SAMPLE_RUNS / "gb300-nvl72-node-failure.jsonl.zst"
    return [
        Shot("dashboard", "tokenwatch: a GB300 NVL72 rack at 41:07, node07 down", failure, 41 * 60 + 7),
        Shot(
            "server",
            "tokenwatch: a Server run at 5:00, at 200x60",
            SAMPLE_RUNS / "gb300-nvl72-server.jsonl.zst",
            300,
            size=(200, 60),
        ),
        Shot(
            "node-screen",
            "tokenwatch: node03 throttled at 15:00",
            failure,
            15 * 60,
            keys=("down", "down", "enter"),
        ),
        Shot(
            "fleet-board",
            "tokenwatch: the fleet board, three racks at 5:00",
            fleet_recording,
            300,
            size=(140, 28),
        ),
        Shot("narrow", "tokenwatch at 80x24", failure, 41 * 60 + 7, size=(80, 24)),
    ]


def record_fleet_run(folder: Path) -> Path:
    """The 3-rack run, recorded by the real CLI as fast as it can go."""
    path = folder / "fleet.jsonl.zst"
    command = [sys.executable, "-m", "tokenwatch", *FLEET_RUN, "--speed", "0", "--headless"]
    subprocess.run([*command, "--interval", "10m", "--record", str(path)], check=True, capture_output=True)
    return path


def replay_app(recording: Path, at_s: float) -> TokenwatchApp:
    player = ReplayPlayer(recording, speed=0, start_s=at_s, paused=True)
    session = Session(RackCore(), [player], flush_interval_s=None)
    player.bind(session)
    return TokenwatchApp(session, mode="replay", player=player, theme_dirs=[shipped_dir()])


async def take(shot: Shot, out: Path) -> Path:
    app = replay_app(shot.recording, shot.at_s)
    async with app.run_test(size=shot.size) as pilot:
        player = app.player
        assert player is not None
        # Wait, with a generous ceiling, until the replay has reached its run time and every event it
        # sent is through the session's queue into the core.
        for _ in range(6000):
            if not player.seeking and player.position_s > 0 and player.loaded and app.session.queue.empty():
                break
            await pilot.pause(0.01)
        else:
            raise SystemExit(f"{shot.name}: the replay did not reach {shot.at_s:.0f} s")
        app.refresh_data(force=True)
        await pilot.pause()
        for key in shot.keys:
            await pilot.press(key)
        app.refresh_data(force=True)
        await pilot.pause()
        path = out / f"{shot.name}.svg"
        path.write_text(app.export_screenshot(title=shot.title), encoding="utf-8")
    return path


async def take_all(wanted: list[Shot], out: Path) -> list[Path]:
    return [await take(shot, out) for shot in wanted]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, default=IMAGES, help="folder for the SVGs (default docs/images)")
    parser.add_argument("names", nargs="*", help="only these screenshots (default: all)")
    args = parser.parse_args()
    only: set[str] = set(args.names)
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        fleet = record_fleet_run(Path(tmp)) if not only or "fleet-board" in only else Path(tmp)
        wanted = [shot for shot in shots(fleet) if not only or shot.name in only]
        for path in asyncio.run(take_all(wanted, args.out)):
            print(path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path)


if __name__ == "__main__":
    main()
