"""The deterministic rack simulation: a seeded generator of the event stream, independent of pacing.

Offline: every node gets an equal share of the samples and a measured tokens/s drawn around the
profile's node figures. Its rate ramps up over the warm-up, holds with ~1 % noise, and drains
over the tail as its work runs out, so faster nodes finish first. The steady rate is set so that
generated tokens / own duration equals the drawn figure, as MLPerf measures a node.

Every duration gets the same shape: the warm-up and the drain scale with the run (a 10-s run has a
half-second warm-up, not the profile's 90 s that it could never finish), and a short run steps in
finer time steps (at least :data:`MIN_STEPS` of them), so its rates and finish times stay true.
Server: Poisson arrivals per node with log-normal TTFT/TPOT; latencies travel as histogram deltas, and
the samples over the benchmark's TTFT/TPOT limits are counted exactly as they are drawn and sent as
cumulative counters, so the verdict's latency rules and early stopping are judged as LoadGen would. With
a benchmark (the profile's ``benchmark``) each node also sends its simulated LoadGen settings and query
plan at t = 0, as a detail log would (see :mod:`tokenwatch.inputs.sim.loadgen_plan`).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from tokenwatch.base.events import (
    Event,
    GpuBatch,
    LatencyBatch,
    NodeStatus,
    ProgressBatch,
    RunEnded,
    RunStarted,
    Scenario,
)
from tokenwatch.inputs.sim.faults import Fault
from tokenwatch.inputs.sim.gpu_model import HOT_CLOCK_FACTOR, THROTTLE_CLOCK_FACTOR, RackGpuModel
from tokenwatch.inputs.sim.loadgen_plan import simulated_details
from tokenwatch.inputs.sim.node_work import OfflineWork, ServerWork
from tokenwatch.inputs.sim.profile import Profile

# The simulated run "starts" at a fixed instant (MLPerf Inference v5.1's publication day, 00:00 UTC)
# so a seed reproduces its recording byte for byte.
SIM_EPOCH = 1_757_376_000.0
SLOW_FACTOR = 0.8
_NOISE_AR = 0.9
_NOISE_SD = 0.004
_MAX_RUN_FACTOR = 4.0  # an Offline run stops at 4x its nominal duration whatever happens
MIN_STEPS = 150  # a run shorter than 150 intervals steps in halved intervals (exact binary fractions)
_MIN_WARMUP_SHARE = 0.05  # a short run still warms up over 5 % of its length...
_MIN_TAIL_SHARE = 0.02  # ...and drains over 2 %


@dataclass(frozen=True, slots=True)
class SimSettings:
    profile: Profile
    scenario: Scenario = "Offline"
    seed: int = 0
    duration_s: float | None = None  # None: the profile's
    faults: tuple[Fault, ...] = ()
    interval_s: float = 1.0
    latency_interval_s: float = 5.0
    name: str | None = None
    extra_meta: dict[str, object] = field(default_factory=dict)

    @property
    def run_duration_s(self) -> float:
        return self.duration_s if self.duration_s is not None else self.profile.duration_s

    @property
    def step_s(self) -> float:
        """The simulation's time step: ``interval_s``, halved until the run has ``MIN_STEPS`` of them."""
        step = self.interval_s
        while self.run_duration_s / step < MIN_STEPS and step > 1e-3:
            step /= 2
        return step


def phase_lengths(profile: Profile, duration_s: float) -> tuple[float, float]:
    """(warm-up, drain) in seconds for a run of ``duration_s``: the profile's, scaled down with a shorter
    run (never below 5 % and 2 % of it), never longer than the profile's own."""
    scale = duration_s / profile.duration_s
    warmup = min(profile.warmup_s, max(profile.warmup_s * scale, _MIN_WARMUP_SHARE * duration_s))
    tail = min(profile.tail_s, max(profile.tail_s * scale, _MIN_TAIL_SHARE * duration_s))
    return warmup, tail


def draw_node_rates(profile: Profile, rng: np.random.Generator) -> np.ndarray:
    """Each node's measured tokens/s: a normal around the mean, kept inside the profile's range."""
    spec = profile.node_tokens_per_s
    if profile.nodes == 1:
        return np.array([spec.mean])
    if spec.min is not None and spec.max is not None:
        lo, hi = spec.min, spec.max
    else:
        half = spec.mean * (spec.spread_pct or 0.0) / 100.0 / 2.0
        lo, hi = spec.mean - half, spec.mean + half
    sd = (hi - lo) / 4.0
    return np.clip(rng.normal(spec.mean, sd, profile.nodes), lo, hi)


class RackSimulation:
    """Iterate :meth:`events` for the whole run; the same settings give the same events."""

    def __init__(self, settings: SimSettings, wall_epoch: float = SIM_EPOCH) -> None:
        self.s = settings
        self.wall_epoch = wall_epoch
        names = settings.profile.node_names()
        self._fault_nodes = [(f, names.index(f.node)) for f in settings.faults]
        self._no_node_fault = np.zeros(settings.profile.nodes, bool)
        self._no_gpu_fault = np.zeros(settings.profile.nodes * settings.profile.gpus_per_node, bool)
        self._no_slowdown = np.ones(settings.profile.nodes)
        for unchanging in (self._no_node_fault, self._no_gpu_fault, self._no_slowdown):
            unchanging.flags.writeable = False

    def run_started(self) -> RunStarted:
        s, p = self.s, self.s.profile
        meta = {
            "profile": p.name,
            "seed": s.seed,
            "faults": [f.label() for f in s.faults],
        }
        if p.benchmark is not None:
            meta["benchmark"] = p.benchmark
        meta.update(s.extra_meta)
        total = self._offline_samples() if s.scenario == "Offline" else None
        return RunStarted(
            t=0.0,
            name=s.name or f"{p.name} {s.scenario.lower()} (simulated)",
            scenario=s.scenario,
            nodes=p.node_names(),
            gpus_per_node=p.gpus_per_node,
            nominal_duration_s=s.run_duration_s,
            total_samples=total,
            source="sim",
            wall_epoch=self.wall_epoch,
            meta=meta,
        )

    def _offline_samples(self) -> int:
        p = self.s.profile
        return max(p.nodes, round(p.total_samples * self.s.run_duration_s / p.duration_s))

    def events(self) -> Iterator[Event]:
        s, p = self.s, self.s.profile
        rng = np.random.default_rng(s.seed)
        start = self.run_started()
        yield start
        n, nodes = p.nodes, start.nodes
        node_rates = draw_node_rates(p, rng)
        gpus = RackGpuModel(p.gpu, n, p.gpus_per_node, rng)
        warmup, tail = phase_lengths(p, s.run_duration_s)
        work = (
            OfflineWork(p, node_rates, self._offline_samples(), warmup, tail, s.step_s)
            if s.scenario == "Offline"
            else ServerWork(p, node_rates, s.latency_interval_s, s.run_duration_s, warmup)
        )
        for i in range(n):
            yield NodeStatus(0.0, nodes[i], "up", "simulated node started")
        quota = work.quota if isinstance(work, OfflineWork) else None
        yield from simulated_details(p, s.scenario, s.run_duration_s, nodes, quota, work.qps_of())
        noise = np.zeros(n)
        was_down = np.zeros(n, bool)
        done = np.zeros(n, bool)  # the node's work is complete
        finished = np.zeros(n, bool)  # ...and it has said so (a node that reports nothing cannot)
        dt = s.step_s
        all_nodes = np.arange(n)
        down_forever_from = np.full(n, np.inf)
        for f in s.faults:
            if f.kind == "down" and math.isinf(f.end_s):
                i = nodes.index(f.node)
                down_forever_from[i] = min(down_forever_from[i], f.start_s)
        for k in range(int(_MAX_RUN_FACTOR * s.run_duration_s / dt) + 1):
            t = k * dt
            down, stale, slow = (self._fault_mask(kind, t) for kind in ("down", "stale", "slow"))
            throttled, hot = (self._gpu_fault_mask(kind, t) for kind in ("throttle", "hot"))
            cap_w = self._cap_w(t)
            changed = down != was_down
            for i in np.flatnonzero(changed).tolist() if changed.any() else ():
                yield NodeStatus(
                    t,
                    nodes[i],
                    "down" if down[i] else "up",
                    "simulated fault: node down" if down[i] else "simulated node recovered",
                )
            was_down = down
            noise = np.minimum(np.maximum(_NOISE_AR * noise + rng.normal(0.0, _NOISE_SD, n), -0.05), 0.05)
            if self._fault_nodes:
                mult = np.where(slow, SLOW_FACTOR, 1.0) * self._gpu_factor(gpus, throttled, hot, cap_w)
            else:  # no fault in the run: every factor is one
                mult = self._no_slowdown
            active = ~down & ~done
            load = work.step(t, dt, np.where(active, (1.0 + noise) * mult, 0.0), rng) if k else np.zeros(n)
            gpu_active = np.repeat(active, p.gpus_per_node)
            values, reasons = gpus.step(np.where(down, 0.0, load), throttled & gpu_active, dt, hot, cap_w)
            report = ~down & ~stale
            if report.all():  # the same index arrays every tick: consumers cache work on them
                yield GpuBatch(t, gpus.node_index, gpus.gpu_index, values, reasons)
                yield ProgressBatch(t, all_nodes, work.samples.copy(), work.tokens_int())
            else:
                rows = np.repeat(report, p.gpus_per_node)
                yield GpuBatch(t, gpus.node_index[rows], gpus.gpu_index[rows], values[rows], reasons[rows])
                yield ProgressBatch(t, all_nodes[report], work.samples[report], work.tokens_int()[report])
            for node_i, metric, values_s, counts in work.latency_deltas(t, report):
                yield LatencyBatch(t, nodes[node_i], metric, values_s, counts)
            yield from work.limit_counts(t, report)
            done |= work.finished(t)
            newly = done & ~finished & report
            for i in np.flatnonzero(newly).tolist() if newly.any() else ():
                yield NodeStatus(t, nodes[i], "finished", "simulated node completed its samples")
            finished |= newly
            if k and (done | (t >= down_forever_from)).all():
                yield RunEnded(t, _end_reason(nodes, finished, down))
                return
        yield RunEnded(t, "time limit")

    def _fault_mask(self, kind: str, t: float) -> np.ndarray:
        if not self._fault_nodes:  # the usual run: one all-False mask, read only, serves every tick
            return self._no_node_fault
        mask = np.zeros(self.s.profile.nodes, bool)
        for fault, node_i in self._fault_nodes:
            if fault.kind == kind and fault.active(t):
                mask[node_i] = True
        return mask

    def _gpu_rows(self, fault: Fault, node_i: int) -> slice:
        """The node-major GPU rows a fault covers: one GPU, or all of the node's."""
        g = self.s.profile.gpus_per_node
        first = node_i * g + (fault.gpu or 0)
        return slice(first, first + 1) if fault.gpu is not None else slice(first, first + g)

    def _gpu_fault_mask(self, kind: str, t: float) -> np.ndarray:
        if not self._fault_nodes:
            return self._no_gpu_fault
        p = self.s.profile
        mask = np.zeros(p.nodes * p.gpus_per_node, bool)
        for fault, node_i in self._fault_nodes:
            if fault.kind == kind and fault.active(t):
                mask[self._gpu_rows(fault, node_i)] = True
        return mask

    def _cap_w(self, t: float) -> np.ndarray | None:
        """Per GPU row, a lowered power limit in force (NaN none); None when no cap is."""
        caps = None
        for fault, node_i in self._fault_nodes:
            if fault.kind == "powercap" and fault.active(t) and fault.value is not None:
                p = self.s.profile
                caps = np.full(p.nodes * p.gpus_per_node, np.nan) if caps is None else caps
                caps[self._gpu_rows(fault, node_i)] = fault.value
        return caps

    def _gpu_factor(
        self, gpus: RackGpuModel, throttled: np.ndarray, hot: np.ndarray, cap_w: np.ndarray | None
    ) -> np.ndarray:
        """Per node, the throughput factor of its GPU faults: its slowest GPU's (every tensor-parallel
        step waits for the last GPU)."""
        factor = np.where(throttled, THROTTLE_CLOCK_FACTOR * 1.06, 1.0)
        if hot.any():
            factor = np.where(gpus.hot_slowed(hot), np.minimum(factor, HOT_CLOCK_FACTOR), factor)
        if cap_w is not None:
            factor = np.minimum(factor, gpus.cap_factor(cap_w))
        return np.asarray(factor.reshape(self.s.profile.nodes, -1).min(axis=1))


def _end_reason(nodes: tuple[str, ...], finished: np.ndarray, down: np.ndarray) -> str:
    """Why the run ended, true to what happened: every node finished, or which ones never said so."""
    if finished.all():
        return "completed"
    lost = [nodes[i] for i in np.flatnonzero(~finished & down).tolist()]
    silent = [nodes[i] for i in np.flatnonzero(~finished & ~down).tolist()]
    parts = [f"{int(finished.sum())} of {len(nodes)} nodes finished"]
    parts += [f"{', '.join(lost)} down"] if lost else []
    parts += [f"{', '.join(silent)} not reporting"] if silent else []
    return "; ".join(parts)
