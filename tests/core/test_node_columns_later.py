"""A node table's columns made when first read (``NodeColumns``: states, delta to the median, SM clock,
HBM, temperature, energy source, cause text, sparklines) are the snapshot's figures whenever they are
read: read after the core has gone on (nodes down and back, GPUs read again, stragglers judged), they
equal the same columns made at once from the core's state at the snapshot's time, to the bit."""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

from tests.core.fleet.fleet_runs import fleet_events
from tokenwatch.base.events import GPU_METRICS, NODE_STATES
from tokenwatch.core import RackCore
from tokenwatch.core._state import RackState
from tokenwatch.core.snapshot import FRESH, RackSnapshot

FAULTS = "node06:down@40-70,node03:throttle@20-90"


@dataclass(frozen=True, slots=True, eq=False)
class AtOnce:
    state: tuple[str, ...]
    sm_clock_mhz: np.ndarray
    hbm_used_mib: np.ndarray
    temp_c: np.ndarray
    delta_vs_median_pct: np.ndarray
    cause_text: tuple[str, ...]
    sparklines: np.ndarray


def made_at_once(core: RackCore, snap: RackSnapshot) -> AtOnce:
    """The columns from the core's state at the snapshot's time, each computed here on its own."""
    state = core.state
    codes = state.effective_state(snap.t)
    fresh = state.gpu_freshness(snap.t, codes) == FRESH
    gpu = np.where(fresh[:, :, None], state.gpu_values, np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        sm = np.nanmean(gpu[:, :, GPU_METRICS.index("sm_clock_mhz")], axis=1)
        temp = np.nanmax(gpu[:, :, GPU_METRICS.index("temp_c")], axis=1)
    hbm = gpu[:, :, GPU_METRICS.index("hbm_used_mib")]
    rates = snap.nodes.tokens_per_s
    running = (codes == NODE_STATES.index("up")) & (state.tokens > 0) & np.isfinite(rates)
    median = float(np.median(rates[running])) if running.sum() >= 2 else math.nan
    delta = np.where(running, (rates - median) / median * 100.0, np.nan)
    return AtOnce(
        state=tuple(NODE_STATES[c] for c in codes),
        sm_clock_mhz=sm,
        hbm_used_mib=np.where(np.isfinite(hbm).any(axis=1), np.nansum(hbm, axis=1), np.nan),
        temp_c=temp,
        delta_vs_median_pct=delta,
        cause_text=tuple(c.text if c is not None else "" for c in state.causes.causes),
        sparklines=plain_sparklines(state, core.config.sparkline_points),
    )


def plain_sparklines(state: RackState, points: int) -> np.ndarray:
    """Per node, its per-tick rates over the newest ``points`` ticks of the rings, read tick by tick;
    NaN at ticks it was down or stale."""
    times, cum = state.recent_tokens.view()
    _, codes = state.recent_state.view()
    times, cum, codes = times[-(points + 1) :], cum[-(points + 1) :], codes[-(points + 1) :]
    out = np.full((len(state.run.nodes), max(len(times) - 1, 0)), np.nan)
    for k in range(1, len(times)):
        for i in range(len(state.run.nodes)):
            if codes[k, i] not in (NODE_STATES.index("stale"), NODE_STATES.index("down")):
                out[i, k - 1] = (cum[k, i] - cum[k - 1, i]) / (times[k] - times[k - 1])
    return out


def test_columns_read_later_are_the_snapshots() -> None:
    events = fleet_events(1, 12, duration_s=120.0, faults=FAULTS)  # one rack: no fleet board reads them
    core = RackCore()
    rest = iter(events)
    taken_at = [30.0, 45.0, 60.0, 95.0]
    snaps, at_once = [], []
    for ev in rest:
        core.ingest(ev)
        if taken_at and ev.t >= taken_at[0]:
            taken_at.pop(0)
            snap = core.snapshot()
            assert not snap.nodes.later.made  # nothing read yet
            snaps.append(snap)
            at_once.append(made_at_once(core, snap))
    assert len(snaps) == 4
    now = core.snapshot()
    for snap, want in zip(snaps, at_once, strict=True):
        nodes = snap.nodes  # read only now, the core at the run's end
        assert nodes.state == want.state
        assert nodes.cause_text == want.cause_text
        for name in ("sm_clock_mhz", "hbm_used_mib", "temp_c"):
            np.testing.assert_array_equal(getattr(nodes, name), getattr(want, name), err_msg=name)
        np.testing.assert_allclose(nodes.delta_vs_median_pct, want.delta_vs_median_pct, rtol=1e-12)
        np.testing.assert_array_equal(nodes.sparkline_tokens_per_s, want.sparklines)
        assert len(nodes.energy_source) == len(nodes.names)
        assert nodes.later.made
    # what the core holds now is not what those snapshots showed: a read of it would have been caught
    assert any(s.nodes.state != now.nodes.state for s in snaps)
    assert not any(
        np.array_equal(s.nodes.sparkline_tokens_per_s, now.nodes.sparkline_tokens_per_s) for s in snaps
    )
    assert "down" in snaps[2].nodes.state
    assert any(text for s in snaps for text in s.nodes.cause_text)
