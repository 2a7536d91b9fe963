"""A fleet's node-level series hold memory only for what was measured: the GPUs' recent ring and the
engines' queue ring of a fleet whose GPUs were never read (its backfill: rack figures alone) and whose
sources report no queue are times alone; once a GPU is read, the node screen shows its readings and
NaN where nothing was measured, as the ring filled with NaN from the start did.

At 1,000 racks (18,000 nodes, 72,000 GPUs) those rings were ~180 MB of NaN made at the run's start.
"""

from __future__ import annotations

import numpy as np

from tokenwatch.base.events import GPU_METRICS, RACK_FIGURES, GpuBatch, RackFiguresBatch, RunStarted
from tokenwatch.core import RackCore

RACKS = ("rack01", "rack02")
NODES, GPUS = 3, 2
COL = {name: i for i, name in enumerate(RACK_FIGURES)}
ATTACH_S = 600.0


def started() -> RunStarted:
    nodes = tuple(f"{rack}/node{n:02d}" for rack in RACKS for n in range(1, NODES + 1))
    meta = {
        "racks": [r for r in RACKS for _ in range(NODES)],
        "fleet": {
            "source": "prometheus",
            "racks": [[rack, r * NODES, NODES] for r, rack in enumerate(RACKS)],
        },
        "attached_at_s": ATTACH_S,
    }
    return RunStarted(0.0, "fleet", "Offline", nodes, GPUS, None, None, "live", 0.0, meta)


def figures(t: float) -> RackFiguresBatch:
    values = np.full((len(RACKS), len(RACK_FIGURES)), np.nan)
    values[:, [COL["nodes_total"], COL["nodes_up"], COL["nodes_running"]]] = NODES
    values[:, COL["gpus"]] = NODES * GPUS
    values[:, COL["tokens_per_s"]] = 50_000.0
    values[:, COL["power_w"]] = 4_000.0
    return RackFiguresBatch(t, RACKS, values, np.zeros(len(RACKS), bool), ("",) * 2, ("",) * 2)


def test_unmeasured_rings_hold_no_storage_and_read_as_nothing_measured() -> None:
    core = RackCore()
    core.ingest(started())
    t = 15.0
    while t <= ATTACH_S:  # the backfill: rack figures alone
        core.ingest(figures(t))
        t += 15.0
    state = core.state
    assert len(state.recent_gpu) > 0  # its ticks were sampled...
    assert not state.recent_gpu.has_storage  # ...as times alone
    assert not state.recent_throttle.has_storage
    assert not state.engine.recent.has_storage
    # The alerting pass reads every GPU once.
    rows = len(state.run.nodes) * GPUS
    values = np.full((rows, len(GPU_METRICS)), np.nan)
    power = 700.0 + np.arange(rows, dtype=np.float64)
    values[:, GPU_METRICS.index("power_w")] = power
    node_index = np.repeat(np.arange(len(state.run.nodes), dtype=np.int64), GPUS)
    gpu = np.tile(np.arange(GPUS, dtype=np.int64), len(state.run.nodes))
    read_at = ATTACH_S + 2.5
    core.ingest(GpuBatch(read_at, node_index, gpu, values, np.zeros(rows, np.uint64)))
    core.ingest(figures(ATTACH_S + 15.0))
    assert state.recent_gpu.has_storage
    assert not state.engine.recent.has_storage  # no source reported a queue
    assert not state.recent_throttle.has_storage  # no GPU throttled: nothing but zeros pushed
    assert not state.recent_samples.has_storage  # no node counted samples
    history = core.node_history("rack02/node03")
    assert history is not None
    shown = history.gpu_series["power_w"]  # (gpus, points)
    node = state.index["rack02/node03"]
    # The ticks after the reading while it is fresh (within the node's staleness limit).
    measured = (history.times > read_at) & (history.times - read_at <= state.stale_limit_s[node])
    assert measured.any()
    assert (~measured).any()
    np.testing.assert_array_equal(
        shown[:, measured], np.repeat(power[node * GPUS : node * GPUS + GPUS, None], measured.sum(), 1)
    )
    assert np.isnan(shown[:, ~measured]).all()
    assert (history.throttle_reasons[:, ~measured] == 0).all()
