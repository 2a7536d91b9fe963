"""What the CLI's demand tests share: a headless session's own core, and what a run's surfaces say through
cores of different configurations fed the same events (the JSONL snapshots and /metrics pages)."""

from __future__ import annotations

import orjson

from tokenwatch.cli.options import RunOptions
from tokenwatch.cli.running import run_session
from tokenwatch.core import CoreConfig, RackCore
from tokenwatch.core.snapshot_json import snapshot_json
from tokenwatch.frontends.metrics.exposition import render
from tokenwatch.frontends.metrics.families import take_view
from tokenwatch.inputs.sim.collector import SimulatorCollector
from tokenwatch.inputs.sim.rack_sim import RackSimulation, SimSettings


def headless_sim_core(settings: SimSettings) -> RackCore:
    """The core of ``tokenwatch sim --headless`` (a line a minute) after the whole simulated run."""
    seen: list[RackCore] = []
    status = run_session(
        RunOptions("sim", headless=True, speed=0.0, interval_s=60.0),
        [SimulatorCollector(settings, speed=0.0)],
        after=lambda session: seen.append(session.core),
    )
    assert status == 0
    return seen[0]


def surfaces_through(
    configs: list[CoreConfig], settings: SimSettings, every_s: float, *, without_board: bool = False
) -> tuple[list[RackCore], list[list[bytes]]]:
    """The simulated run through one core per config: each core's JSONL snapshot and /metrics page every
    ``every_s`` of run time (``without_board``: the snapshot's fleet board rows left out)."""
    cores = [RackCore(config) for config in configs]
    said: list[list[bytes]] = [[] for _ in cores]
    for core, out in zip(cores, said, strict=True):

        def look(t: float, core: RackCore = core, out: list[bytes] = out) -> None:
            record = snapshot_json(core.snapshot(t))
            if without_board:
                record.pop("fleet", None)
            out.append(orjson.dumps(record))
            out.append(render(take_view(core)))

        core.every(every_s, look)
    for event in RackSimulation(settings).events():
        for core in cores:
            core.ingest(event)
    return cores, said
