"""Each node's work in a simulated run, stepped by :class:`~tokenwatch.inputs.sim.rack_sim.RackSimulation`:
Offline, a share of the samples worked through at the node's drawn rate (a ramp up, a steady rate, a
drain); Server, Poisson arrivals at that rate with log-normal latencies, sent as histogram deltas and
exact counts of the samples over the benchmark's limits.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np

from tokenwatch.base.events import LATENCY_METRICS, LatencyLimitCounts, LatencyMetric
from tokenwatch.base.log_buckets import N_BUCKETS, bucket_index, compress
from tokenwatch.inputs.sim.loadgen_plan import latency_limits_of
from tokenwatch.inputs.sim.profile import Profile


class OfflineWork:
    """Each node works through its share of samples at its own drawn rate."""

    def __init__(
        self,
        p: Profile,
        node_rates: np.ndarray,
        total_samples: int,
        warmup_s: float,
        tail_s: float,
        step_s: float,
    ) -> None:
        n = p.nodes
        self.tokens_per_sample = p.tokens_per_sample
        self.quota = np.full(n, total_samples // n, np.int64)
        self.quota[: total_samples % n] += 1
        self.target_tokens = self.quota * self.tokens_per_sample
        own_duration = self.target_tokens / node_rates
        # Area under ramp-steady-drain = R * (D - (warmup + tail)/2): solve for the steady rate R. The work
        # ends inside a step and is reported at its end, half a step late on average: aim that much early.
        self.steady = self.target_tokens / (own_duration - (warmup_s + tail_s + step_s) / 2.0)
        self.warmup, self.tail = warmup_s, tail_s
        self.tokens = np.zeros(n)
        self.samples = np.zeros(n, np.int64)
        self.done_at = np.full(n, np.nan)

    def step(self, t: float, dt: float, factor: np.ndarray, _rng: np.random.Generator) -> np.ndarray:
        remaining = self.target_tokens - self.tokens
        # The ramp's value at the middle of the step makes its area exact (the end's overshoots).
        ramp = min(1.0, max(0.0, (t - dt / 2) / self.warmup)) if self.warmup > 0 else 1.0
        speed = self.steady * ramp * factor
        step = speed * dt
        if self.tail > 0:
            # Draining the last steady * tail / 2 tokens: the rate goes as sqrt(remaining), so sqrt(remaining)
            # falls linearly, to zero over `tail` seconds. Stepped exactly: an Euler step would drain early.
            drain_from = self.steady * self.tail / 2.0
            root = np.sqrt(np.maximum(remaining, 0.0))
            drained = remaining - np.maximum(0.0, root - speed * dt / (2.0 * np.sqrt(drain_from))) ** 2
            step = np.where(remaining < drain_from, drained, step)
        step = np.minimum(step, remaining)
        finishing = (remaining - step < 0.5) & (factor > 0) & (remaining > 0)  # the last token is out
        step = np.where(finishing, remaining, step)
        self.tokens += step
        self.samples = np.minimum(self.quota, np.floor(self.tokens / self.tokens_per_sample).astype(np.int64))
        self.done_at = np.where(finishing, t, self.done_at)
        # A finished node has done its whole quota (tokens / tokens-per-sample can round just below it).
        self.samples = np.where(np.isnan(self.done_at), self.samples, self.quota)
        return np.asarray(step / (dt * self.steady))

    def tokens_int(self) -> np.ndarray:
        return np.round(self.tokens).astype(np.int64)

    def finished(self, _t: float) -> np.ndarray:
        return np.asarray(~np.isnan(self.done_at))

    def latency_deltas(
        self, _t: float, _report: np.ndarray
    ) -> Iterator[tuple[int, LatencyMetric, np.ndarray, np.ndarray]]:
        return iter(())

    def limit_counts(self, _t: float, _report: np.ndarray) -> Iterator[LatencyLimitCounts]:
        return iter(())

    def qps_of(self) -> np.ndarray | None:
        return None


class ServerWork:
    """Poisson arrivals at each node's rate; completed samples count at their arrival tick."""

    def __init__(
        self,
        p: Profile,
        node_rates: np.ndarray,
        latency_interval_s: float,
        duration_s: float,
        warmup_s: float,
    ) -> None:
        n = p.nodes
        srv = p.server
        self.qps = srv.samples_per_s_per_node * node_rates / p.node_tokens_per_s.mean
        self.out_mean = srv.output_tokens_per_sample
        self.ttft, self.tpot = srv.ttft_median_s, srv.tpot_median_s
        self.warmup = min(warmup_s, 30.0)
        self.tokens = np.zeros(n)
        self.samples = np.zeros(n, np.int64)
        self.pending = {m: np.zeros((n, N_BUCKETS), np.int64) for m in LATENCY_METRICS}
        self.latency_interval = latency_interval_s
        self.next_flush = latency_interval_s
        self.duration = duration_s
        # Samples over the benchmark's limits, counted exactly as drawn (cumulative, per node).
        self.limits = latency_limits_of(p)
        self.over = {m: np.zeros(n, np.int64) for m in self.limits}
        self.counts_due = False

    def step(self, t: float, dt: float, factor: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        ramp = min(1.0, t / self.warmup) if self.warmup > 0 else 1.0
        arrivals = rng.poisson(self.qps * dt * ramp * factor)
        total = int(arrivals.sum())
        owner = np.repeat(np.arange(len(arrivals)), arrivals)
        out_tokens = np.clip(np.round(rng.gamma(2.0, self.out_mean / 2.0, total)), 1, 2048)
        # A slow or throttled node queues: its latencies stretch by 1/factor.
        stretch = 1.0 / np.maximum(factor[owner], 0.05)
        ttft = rng.lognormal(math.log(self.ttft), 0.45, total) * stretch
        tpot = rng.lognormal(math.log(self.tpot), 0.2, total) * stretch
        e2e = ttft + tpot * (out_tokens - 1)
        for metric, values in zip(LATENCY_METRICS, (ttft, tpot, e2e), strict=True):
            np.add.at(self.pending[metric], (owner, bucket_index(values)), 1)
            if metric in self.limits:
                over = values > self.limits[metric]
                self.over[metric] += np.bincount(owner[over], minlength=len(arrivals))
        self.tokens += np.bincount(owner, weights=out_tokens, minlength=len(arrivals))
        self.samples += arrivals
        return np.asarray(ramp * factor)

    def tokens_int(self) -> np.ndarray:
        return np.round(self.tokens).astype(np.int64)

    def finished(self, t: float) -> np.ndarray:
        return np.full(len(self.qps), t >= self.duration)

    def latency_deltas(
        self, t: float, report: np.ndarray
    ) -> Iterator[tuple[int, LatencyMetric, np.ndarray, np.ndarray]]:
        if t + 1e-9 < self.next_flush and t < self.duration:
            return
        self.next_flush += self.latency_interval
        self.counts_due = True
        for metric, pending in self.pending.items():  # keys are LatencyMetric names
            for i in np.flatnonzero(report & (pending.sum(axis=1) > 0)).tolist():
                values, counts = compress(pending[i])
                pending[i] = 0
                yield int(i), metric, values, counts

    def limit_counts(self, t: float, report: np.ndarray) -> Iterator[LatencyLimitCounts]:
        """The over-limit counters of the reporting nodes, sent with each histogram flush."""
        if not self.counts_due:
            return
        self.counts_due = False
        nodes = np.flatnonzero(report)
        for metric, limit in self.limits.items():
            yield LatencyLimitCounts(
                t, metric, limit, nodes, self.samples[nodes].copy(), self.over[metric][nodes].copy()
            )

    def qps_of(self) -> np.ndarray | None:
        return np.asarray(self.qps)
