"""A fleet of 1,000 racks watched through its Prometheus server, as the core holds it, for the board's
benchmark: 18 nodes x 4 GPUs a rack (72,000 GPUs), in 4 sites of 10 rows (25 racks a row), fed what a
fleet watch feeds its core (the racks' figures every 5 s, every node's counters at each 30-s alerting
pass) without the server: the board's cost, not the server's (benchmarks/bench_fleet_1000.py times that).

Only the standard library and numpy are imported at the top, like bench_common.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from tokenwatch.core import RackCore

RACKS, NODES, GPUS = 1000, 18, 4
SITES, ROWS = 4, 10
INTERVAL_S, DETAIL_S = 5.0, 30.0


def rack_names(racks: int = RACKS) -> tuple[str, ...]:
    return tuple(f"rack{r + 1:04d}" for r in range(racks))


def places(racks: tuple[str, ...], sites: int = SITES, rows: int = ROWS) -> dict[str, list[str]]:
    """Consecutive racks to each site, and within it to each row (as ``sim --sites --rows`` deals them)."""
    per_site = len(racks) // sites
    per_row = max(1, per_site // rows)
    return {
        rack: [f"site{r // per_site + 1:02d}", f"row{(r % per_site) // per_row + 1:02d}"]
        for r, rack in enumerate(racks)
    }


class ThousandRacks:
    """The feed of a grouped ``racks``-rack fleet watch (one node of every 50th rack down from
    ``down_from_s``, every 97th rack's exporter gone after ``gone_from_s``): :meth:`round` ingests one
    interval's figures (and, every ``DETAIL_S``, every node's counters) into ``core``."""

    def __init__(self, core: RackCore, racks: int, down_from_s: float, gone_from_s: float, seed: int) -> None:
        self.core, self.racks = core, racks
        self.down_from_s, self.gone_from_s = down_from_s, gone_from_s
        self.names = rack_names(racks)
        self.rng = np.random.default_rng(seed)
        self.node_rate = self.rng.normal(55_000.0, 1_500.0, racks * NODES)
        self.tokens = np.zeros(racks * NODES)
        self.t = 0.0

    def round(self) -> None:
        """The next interval: the racks' figures at ``t`` (and the alerting pass's counters when due)."""
        from tokenwatch.base.events import RACK_FIGURES, ProgressBatch, RackFiguresBatch

        self.t = t = self.t + INTERVAL_S
        racks, rng, names, col = self.racks, self.rng, self.names, {n: i for i, n in enumerate(RACK_FIGURES)}
        self.tokens += self.node_rate * INTERVAL_S
        if t % DETAIL_S < 1e-9:  # the alerting pass: every node's counters
            done = self.tokens.astype(np.int64)
            self.core.ingest(ProgressBatch(t, np.arange(len(done), dtype=np.int64), done // 400, done))
        rates = self.node_rate.reshape(racks, NODES) * rng.normal(1.0, 0.01, (racks, NODES))
        up = np.full(racks, float(NODES))
        if t > self.down_from_s:
            rates[::50, 0] = np.nan
            up[::50] -= 1
        values = np.full((racks, len(RACK_FIGURES)), np.nan)
        values[:, col["nodes_total"]] = NODES
        values[:, col["nodes_up"]] = up
        values[:, col["nodes_running"]] = up
        values[:, col["gpus"]] = NODES * GPUS
        values[:, col["tokens_per_s"]] = np.nansum(rates, axis=1)
        values[:, col["power_w"]] = rng.normal(95_000.0, 800.0, racks)
        values[:, col["mean_max_tokens_per_s"]] = np.nanmax(rates, axis=1)
        values[:, col["mean_min_tokens_per_s"]] = np.nanmin(rates, axis=1)
        values[:, col["worst_tokens_per_s"]] = np.nanmin(rates, axis=1)
        values[:, col["median_tokens_per_s"]] = np.nanmedian(rates, axis=1)
        values[:, col["projected_tokens_per_s"]] = np.nansum(rates, axis=1) * 0.99
        values[:, col["projected_valid"]] = 1.0
        values[7::100, col["projected_valid"]] = 0.0
        present = np.ones(racks, bool)
        if t > self.gone_from_s:
            present[::97] = False  # their exporters gone: left out of the batch, so they go stale
        keep = np.flatnonzero(present)
        worst = tuple(f"node{int(k) + 1:02d}" for k in np.nanargmin(rates, axis=1)[keep])
        self.core.ingest(
            RackFiguresBatch(
                t,
                tuple(names[int(r)] for r in keep),
                values[keep],
                np.zeros(len(keep), bool),
                worst,
                tuple("" for _ in keep),
            )
        )


def thousand_racks(run_s: float, racks: int = RACKS, seed: int = 0) -> RackCore:
    """The core of a grouped ``racks``-rack fleet watch at run time ``run_s`` (one node of every 50th rack
    down from half-way, every 97th rack's exporter gone for the last 30 s). The node-level per-rack
    forecasts are off: they are made at ingest (1,000 of them each verdict tick, a cost of its own), not
    at a refresh, and a fleet known rack by rack shows the racks' published projections instead."""
    return thousand_racks_feed(run_s, racks, seed).core


def thousand_racks_feed(run_s: float, racks: int = RACKS, seed: int = 0) -> ThousandRacks:
    """:func:`thousand_racks`, with its feed: :meth:`ThousandRacks.round` goes on with the run."""
    from tokenwatch.base.events import RunStarted
    from tokenwatch.core import CoreConfig, RackCore

    names = rack_names(racks)
    nodes = tuple(f"{rack}/node{k + 1:02d}" for rack in names for k in range(NODES))
    meta = {
        "fleet": {
            "source": "prometheus",
            "preset": "tokenwatch",
            "racks": [[rack, r * NODES, NODES] for r, rack in enumerate(names)],
            "node_stale_after_s": 3 * DETAIL_S + 5.0,
        },
        "racks": [rack for rack in names for _ in range(NODES)],
        "rack_places": places(names),
    }
    core = RackCore(CoreConfig(rack_forecasts=False))
    core.ingest(RunStarted(0.0, "fleet", "Offline", nodes, GPUS, None, None, "live", 1.7e9, meta))
    feed = ThousandRacks(core, racks, down_from_s=run_s / 2, gone_from_s=run_s - 30.0, seed=seed)
    while feed.t + INTERVAL_S <= run_s:
        feed.round()
    return feed
