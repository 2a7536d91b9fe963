"""Recordings of runs that end badly, for the dashboard's tests: made from the seeded simulator and the
sample runs, so each is reproducible byte for byte.

``python -m tests.frontends.tui.recordings`` (from the repository root) regenerates ``tests/data/tui/``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

from tokenwatch.base.events import Event, NodeStatus, RunEnded
from tokenwatch.inputs.sim.faults import parse_faults
from tokenwatch.inputs.sim.profile import load_profile
from tokenwatch.inputs.sim.rack_sim import SIM_EPOCH, RackSimulation, SimSettings
from tokenwatch.recording import RecordingReader, RecordingWriter

DATA = Path(__file__).resolve().parents[2] / "data" / "tui"
FAULT_RUN = DATA / "fault-run-end.jsonl.zst"
# node07 down from 1:00 on; node03 throttled from 1:30 on (and so slow); node05's collector hangs at
# 4:00: the node works on but nothing of it arrives again, its "finished" included.
FAULTS = "node07:down@1m,node03:throttle@90s,node05:stale@4m"
STALE_NODE, STALE_FROM_S = "node05", 240.0


def fault_run_events() -> Iterator[Event]:
    """The seeded gb300 simulator, 5 minutes, with :data:`FAULTS`; the stale node never reports again."""
    profile = load_profile("gb300-nvl72")
    settings = SimSettings(
        profile, seed=4, duration_s=300.0, faults=parse_faults(FAULTS, profile.node_names())
    )
    for event in RackSimulation(settings, wall_epoch=SIM_EPOCH).events():
        # The simulator still sends the stale node's "finished" (it only withholds telemetry and
        # progress); a hung collector would not.
        if isinstance(event, NodeStatus) and event.node == STALE_NODE and event.t >= STALE_FROM_S:
            continue
        yield event


# node03 throttled from 1:30 (a clock hint); node05's power limit lowered to 1,200 W at 2:00 (a power-limit
# event and hint). The simulator of today: every GPU has an energy counter.
CAUSE_FAULTS = "node03:throttle@90s,node05:powercap=1200@2m"


def cause_run_events(duration_s: float = 300.0, faults: str = CAUSE_FAULTS) -> Iterator[Event]:
    """The seeded gb300 simulator with ``faults`` (by default two with a known cause)."""
    profile = load_profile("gb300-nvl72")
    settings = SimSettings(
        profile, seed=4, duration_s=duration_s, faults=parse_faults(faults, profile.node_names(), 4)
    )
    return RackSimulation(settings, wall_epoch=SIM_EPOCH).events()


def interrupted_events(source: Path, at_s: float) -> Iterator[Event]:
    """``source`` up to run time ``at_s``, then the run end an interrupt (Ctrl-C) writes."""
    for event in RecordingReader(source).events():
        if event.t > at_s:
            break
        if not isinstance(event, RunEnded):
            yield event
    yield RunEnded(at_s, "interrupted")


def write_recording(path: Path, events: Iterator[Event]) -> Path:
    created = dt.datetime.fromtimestamp(SIM_EPOCH, dt.UTC).isoformat(timespec="seconds")
    with RecordingWriter(path, meta={"created": created}, overwrite=True, flush_interval_s=1e9) as writer:
        for event in events:
            writer.write(event)
    return path


if __name__ == "__main__":
    DATA.mkdir(parents=True, exist_ok=True)
    print(write_recording(FAULT_RUN, fault_run_events()))
