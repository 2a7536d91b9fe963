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

    @property
    def run_racks(self) -> int:
        """How many racks the simulated run has (``--racks``): a dashboard leads with the fleet board
        from its first frame when it is more than one."""
        per_rack = self.settings.extra_meta.get("nodes_per_rack")
        nodes = self.settings.profile.nodes
        return nodes // per_rack if isinstance(per_rack, int) and 0 < per_rack < nodes else 1

    async def run(self, emit: Emit) -> None:
        for event in self.simulation.events():
            await self.pacer.wait_until(event.t)
            await emit(event)
