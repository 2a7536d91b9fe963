"""Inputs: everything that emits events with ``async def run(self, emit)`` -- the simulator, replay,
Prometheus, live nodes -- and the watch wiring (``watch``: a config -> its collectors).
"""
