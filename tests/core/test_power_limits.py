"""Power-limit changes are events of the run: grouped per node and (old, new) within a tick, alerted with
the words the README gives, and carried by the snapshot for the timelines."""

from __future__ import annotations

import math

from tokenwatch.base.events import GpuSample, NodeStatus, RunStarted
from tokenwatch.core import RackCore
from tokenwatch.core._power_limits import gpu_list


def _core() -> RackCore:
    core = RackCore()
    core.ingest(RunStarted(0.0, "p", "Offline", ("node04", "node05"), 4, None, None, "live", 0.0))
    for name in ("node04", "node05"):
        core.ingest(NodeStatus(0.0, name, "up"))
    return core


def _limits(core: RackCore, t: float, node: str, limits: list[float]) -> None:
    """One NVML-like sample per GPU (a source that reports GPU by GPU, as nvidia-smi rows do)."""
    for g, limit in enumerate(limits):
        core.ingest(GpuSample(t + 0.01 * g, node, g, power_w=600.0, power_limit_w=limit))


def test_changes_are_grouped_alerted_and_kept() -> None:
    core = _core()
    _limits(core, 0.0, "node05", [1400.0] * 4)  # the first reading: no change
    _limits(core, 0.0, "node04", [1400.0] * 4)
    _limits(core, 10.0, "node05", [1400.0] * 4)
    _limits(core, 20.0, "node05", [1200.0] * 4)  # all four, within one tick
    _limits(core, 20.0, "node04", [1400.0, 1000.0, 1400.0, 1000.0])  # two of them
    _limits(core, 30.0, "node04", [1400.0, math.nan, 1400.0, 1000.0])  # a missing limit is no change
    _limits(core, 40.0, "node05", [1400.0] * 4)
    core.advance(45.0)
    changes = core.snapshot().power_limit_changes
    assert [(c.t, c.node, c.gpus, c.old_w, c.new_w) for c in changes] == [
        (20.0, "node05", (0, 1, 2, 3), 1400.0, 1200.0),
        (20.01, "node04", (1, 3), 1400.0, 1000.0),
        (40.0, "node05", (0, 1, 2, 3), 1200.0, 1400.0),
    ]
    alerts = [(a.t, a.node, a.message, a.severity) for a in core.state.alerts.log if a.kind == "power_limit"]
    assert alerts == [
        (20.0, "node05", "power limit lowered 1,400 -> 1,200 W on node05 GPU0-3 at 00:20", "warning"),
        (20.01, "node04", "power limit lowered 1,400 -> 1,000 W on node04 GPU1,3 at 00:20", "warning"),
        (40.0, "node05", "power limit raised 1,200 -> 1,400 W on node05 GPU0-3 at 00:40", "info"),
    ]
    assert changes[0].text(with_node=False) == "power limit lowered 1,400 -> 1,200 W on all 4 GPUs at 00:20"
    assert changes[1].text(with_node=False) == "power limit lowered 1,400 -> 1,000 W on GPU1,3 at 00:20"


def test_gpu_lists() -> None:
    assert gpu_list((0, 1, 2, 3)) == "GPU0-3"
    assert gpu_list((2,)) == "GPU2"
    assert gpu_list((0, 1)) == "GPU0,1"
    assert gpu_list((1, 3, 4)) == "GPU1,3,4"
