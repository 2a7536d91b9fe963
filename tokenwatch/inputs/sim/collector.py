"""The simulator as a collector: the seeded event stream, released at ``speed`` x real time."""

from __future__ import annotations

from tokenwatch.base.clock import Clock, MonotonicClock
from tokenwatch.base.events import Emit
from tokenwatch.base.pacing import Pacer
from tokenwatch.inputs.sim.rack_sim import SIM_EPOCH, RackSimulation, SimSettings

__all__ = ["SIM_EPOCH", "SimulatorCollector"]


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
