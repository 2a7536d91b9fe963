"""The simulator as a collector: the seeded event stream, released at ``speed`` x real time."""

from __future__ import annotations

from tokenwatch.clock import Clock, MonotonicClock
from tokenwatch.pacing import Pacer
from tokenwatch.session import Emit
from tokenwatch.sim.rack_sim import RackSimulation, SimSettings

# The simulated run "starts" at a fixed instant (MLPerf Inference v5.1's publication day, 00:00 UTC)
# so a seed reproduces its recording byte for byte.
SIM_EPOCH = 1_757_376_000.0


class SimulatorCollector:
    name = "simulator"

    def __init__(self, settings: SimSettings, *, speed: float = 1.0, clock: Clock | None = None) -> None:
        self.settings = settings
        self.pacer = Pacer(clock or MonotonicClock(), speed)
        self.simulation = RackSimulation(settings, wall_epoch=SIM_EPOCH)

    async def run(self, emit: Emit) -> None:
        for event in self.simulation.events():
            await self.pacer.wait_until(event.t)
            await emit(event)
