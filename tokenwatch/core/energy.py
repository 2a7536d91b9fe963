"""GPU energy per node: from the GPUs' own cumulative energy counters where they have one, else from their
power readings integrated tick by tick.

The counter (NVML ``nvmlDeviceGetTotalEnergyConsumption``, dcgm ``DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION``;
mJ at the source, J in the event model) is what the GPU measured itself, every joule, where integrated
power holds one reading for a whole tick and misses what a silent GPU drew. A counter counts from whenever
the driver started it, so its first reading is a baseline; a reading below the last one means it
restarted (a driver reload): what it had counted is kept and the new reading counts from zero.

A node's energy comes from its counters when every GPU of it that has reported has a counter; otherwise
(an nvidia-smi source, which has no such field; an older recording) from its integrated power. The run's
energy is the sum over nodes, and says which it is: ``counter``, ``power``, or ``mixed``.

A node's energy covers a window: from its first counter reading, or from the tick before its first fresh
power reading (the interval that reading is integrated over). A watch that attached to a run in progress
has the tokens of the whole run (its log's history) but GPU readings only from the attach, so a node's
tokens per joule and the run's mean power divide the tokens and the time of that same window
(:func:`node_window`), never the whole run's tokens by the energy since the attach.

Tokens are credited when their line arrives, a moment after the interval it states; ticks fall where
they fall. So a power window's edges are the node's own reads, not the ticks around them: it opens at
the catch-up (the read that brings what was made before it), and ends at the node's last read when
that fell within the last tick, each edge's energy taken from the power integrated over that tick.
Counted by ticks instead, a line arriving just before or just after one moved a whole line (1 s of a
minute's window: 1.4 %) in or out of the tokens while the energy stayed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from tokenwatch.base.events import FloatArray, IntArray

COUNTER, POWER, MIXED = "counter", "power", "mixed"
# Marks drawn beside a tokens-per-joule figure: which energy it divides by.
SOURCE_MARK = {COUNTER: "∑", POWER: "∫", MIXED: "±"}
SOURCE_WORDS = {COUNTER: "GPU energy counters", POWER: "integrated power", MIXED: "counters and power"}


@dataclass(slots=True, eq=False)
class EnergyCounters:
    """Per GPU (nodes, gpus): the counter's first reading (NaN: no counter yet), its latest, and what its
    earlier lives counted before restarts; per node, power integrated over the ticks (J)."""

    base: FloatArray
    last: FloatArray
    offset: FloatArray
    node_integrated_j: FloatArray
    # Per node, the window each energy covers: the run time it opened (NaN: not yet), the node's generated
    # tokens and that energy's joules then; every node's tokens at the last tick.
    counter_since: FloatArray
    counter_tokens: FloatArray
    counter_j: FloatArray
    power_since: FloatArray
    power_tokens: FloatArray
    power_j: FloatArray
    tokens_last_tick: FloatArray
    # Per node, where its power window ends (the run time of its last read when that fell within the
    # last tick, else the tick) and the integrated joules then; windows opened by a catch-up between
    # ticks, whose joules at their opening the next tick gives.
    power_until: FloatArray
    power_until_j: FloatArray
    opening: npt.NDArray[np.bool_]
    caught_up_t: FloatArray  # per node, the run time of its catch-up (NaN: none yet)
    # A watch that attached mid-run (at ``attach_s``): each node's first live progress is the catch-up of
    # what its log said while the watch was starting; a window opened at the attach opens again there.
    attach_s: float = 0.0
    caught_up: npt.NDArray[np.bool_] = field(default_factory=lambda: np.zeros(0, bool))

    @classmethod
    def for_rack(cls, nodes: int, gpus: int, attach_s: float = 0.0) -> EnergyCounters:
        return cls(
            np.full((nodes, gpus), np.nan),
            np.full((nodes, gpus), np.nan),
            np.zeros((nodes, gpus)),
            np.zeros(nodes),
            np.full(nodes, np.nan),
            np.zeros(nodes),
            np.zeros(nodes),
            np.full(nodes, np.nan),
            np.zeros(nodes),
            np.zeros(nodes),
            np.zeros(nodes),
            np.zeros(nodes),
            np.zeros(nodes),
            np.zeros(nodes, bool),
            np.full(nodes, np.nan),
            attach_s,
            np.full(nodes, not attach_s > 0),
        )

    def catch_up(self, i: int, t: float, tokens: int) -> None:
        """Node ``i``'s first progress after the attach, at ``t`` (``tokens``: its count with it). Lines
        written while the watch was starting arrive with it, credited now though made before: a window
        that opened at the attach (GPU readings without history) opens again here, its tokens and energy
        counted from now; a window with history (Prometheus) keeps it. A power window opens at ``t``
        itself, not at the tick before it (whose next second the tokens after ``t`` would not cover):
        its joules then are the next tick's less that tick's power over the rest of it."""
        self.caught_up[i], self.caught_up_t[i] = True, t
        # made before the last tick: a power window that opens at the next one starts from them
        self.tokens_last_tick[i] = tokens
        since_attach = self.attach_s - 1.0  # a first reading at the attach opens its window a tick before
        if self.power_since[i] >= since_attach:  # NaN (not open yet) compares False
            self.power_since[i], self.power_tokens[i] = t, tokens
            self.opening[i] = True
            # until that tick the window holds nothing: no tokens, no joules (not a figure of 0 tok/J)
            self.power_j[i] = self.power_until_j[i] = self.node_integrated_j[i]
        if self.counter_since[i] >= since_attach:
            self.counter_since[i], self.counter_tokens[i] = t, tokens
            self.counter_j[i] = float(np.nansum(self.counted_j()[i]))

    def note(
        self, where: tuple[np.ndarray | int | slice, ...], readings: FloatArray, t: float, tokens: IntArray
    ) -> None:
        """Counter readings (J) of the GPUs at ``where`` (an index into the (nodes, gpus) arrays, in the
        order of ``readings``) at run time ``t``; ``tokens``: every node's generated tokens now. NaN
        readings (no counter, or not this time) change nothing."""
        ok = np.isfinite(readings) & (readings >= 0)
        if not ok.any():  # the common case for sources without a counter: one pass, nothing written
            return
        last = self.last[where]
        with np.errstate(invalid="ignore"):
            restarted = ok & (readings < last)  # NaN (first reading) compares False
        if restarted.any():
            self.offset[where] = self.offset[where] + np.where(restarted, last, 0.0)
        first = ok & np.isnan(self.base[where])
        if first.any():  # once per GPU: a node's window opens with its first counter reading
            self.base[where] = np.where(first, readings, self.base[where])
            opens = np.isfinite(self.base).any(axis=1) & np.isnan(self.counter_since)
            self.counter_since[opens] = t
            self.counter_tokens[opens] = tokens[opens]
        self.last[where] = np.where(ok, readings, last)

    def tick(
        self,
        previous_t: float,
        t: float,
        has_power: npt.NDArray[np.bool_],
        node_power_w: FloatArray,
        tokens: IntArray,
        read_t: FloatArray,
        tick_s: float,
    ) -> None:
        """A tick at ``t`` that integrates each node's measured power ``node_power_w`` (0: none) over the
        time since the previous tick (at ``previous_t``): the power windows of the nodes ``has_power``
        open there. ``tokens``: every node's now; ``read_t``: the run time each node's tokens were read;
        ``tick_s``: the ticks' interval (a run's end may come sooner after the last tick)."""
        opens = np.isnan(self.power_since) & has_power
        if opens.any():
            # a catch-up within this tick: the window opens at it (its tokens are from there)
            late = opens & (self.caught_up_t > previous_t)  # NaN compares False
            self.power_since[opens] = np.where(late, self.caught_up_t, previous_t)[opens]
            self.power_tokens[opens] = self.tokens_last_tick[opens]
            self.opening |= late
        span = t - previous_t if t > previous_t else 0.0
        if span:
            self.node_integrated_j += node_power_w * span
        if self.opening.any():  # opened between the ticks: the joules up to then
            k = self.opening
            self.power_j[k] = self.node_integrated_j[k] - node_power_w[k] * (t - self.power_since[k])
            self.opening[:] = False
        self.tokens_last_tick[:] = tokens
        if span:  # the tokens are those read by ``read_t``: a read within a tick of now ends the window
            within = read_t > t - tick_s  # NaN compares False
            self.power_until[:] = np.where(within, read_t, t)
            self.power_until_j[:] = self.node_integrated_j - node_power_w * (t - self.power_until)

    def counted_j(self) -> FloatArray:
        """(nodes, gpus) energy each GPU's counter has counted since its first reading (NaN: no counter)."""
        return self.offset + self.last - self.base


def node_energy(counters: EnergyCounters, gpu_seen: np.ndarray) -> tuple[FloatArray, np.ndarray]:
    """Per node: (energy in J over its window, from its counters?). ``gpu_seen`` (nodes, gpus) bool: GPUs
    that have reported. A node with no GPU reading has NaN energy."""
    has_counter = np.isfinite(counters.base)
    from_counter = has_counter.any(axis=1) & (has_counter | ~gpu_seen).all(axis=1)
    counted = np.where(has_counter, counters.counted_j(), 0.0).sum(axis=1)
    energy = np.where(
        from_counter, counted - counters.counter_j, counters.node_integrated_j - counters.power_j
    )
    return np.where(gpu_seen.any(axis=1), energy, np.nan), from_counter


def node_window(
    counters: EnergyCounters, from_counter: npt.NDArray[np.bool_], tokens: IntArray
) -> tuple[FloatArray, FloatArray]:
    """Per node: (run time its energy window opened, NaN: none; the tokens it generated since then), of
    the energy :func:`node_energy` gives it (``from_counter``)."""
    since = np.where(from_counter, counters.counter_since, counters.power_since)
    at_start = np.where(from_counter, counters.counter_tokens, counters.power_tokens)
    # integrated power ends at the last tick: so do its tokens (a live snapshot's lines may be newer)
    at_end = np.where(from_counter, tokens, counters.tokens_last_tick)
    return since, np.maximum(at_end - at_start, 0.0)  # until the tick after a catch-up: none yet


def window_energy(counters: EnergyCounters, energy_j: FloatArray, from_counter: np.ndarray) -> FloatArray:
    """Per node, the energy :func:`node_energy` gives it (``energy_j``, up to the last tick) over the
    window its tokens cover: a power window ends at the node's last read within that tick."""
    after_window = np.where(from_counter, 0.0, counters.node_integrated_j - counters.power_until_j)
    return energy_j - after_window


def energy_source(from_counter: np.ndarray, has_energy: np.ndarray) -> str:
    """``counter`` when every node with energy has it from its counters, ``power`` when none does,
    ``mixed`` otherwise; "" when no node has any energy."""
    counted = from_counter[has_energy]
    if not counted.size:
        return ""
    if counted.all():
        return COUNTER
    return MIXED if counted.any() else POWER


def run_energy(counters: EnergyCounters, gpu_seen: np.ndarray) -> tuple[float, str]:
    """The run's GPU energy so far (J, NaN when nothing reported) and its source
    (:func:`energy_source`)."""
    energy, from_counter = node_energy(counters, gpu_seen)
    has = np.isfinite(energy)
    if not has.any():
        return math.nan, ""
    return float(energy[has].sum()), energy_source(from_counter, has)


@dataclass(frozen=True, slots=True)
class EnergyWindow:
    """The run's energy figures over the windows the nodes' energy covers (:func:`node_window`):
    ``energy_j`` (NaN: none), its ``source``, the mean power (W) and tokens per joule (None: no energy),
    and ``since_s``, the run time the latest window opened when that was after the run's start (None:
    the energy covers the whole run, as far as the ticks tell)."""

    energy_j: float
    source: str
    mean_power_w: float | None
    tokens_per_joule: float | None
    since_s: float | None


def run_energy_window(
    counters: EnergyCounters, gpu_seen: np.ndarray, tokens: IntArray, covered_s: float, tick_s: float
) -> EnergyWindow:
    """The run's energy up to run time ``covered_s`` (the last sampled tick; a power window, up to the
    node's read within it), each node's over its own window: the mean power sums each node's energy
    over its window's length, tokens per joule divides the tokens made within the windows."""
    energy, from_counter = node_energy(counters, gpu_seen)
    has = np.isfinite(energy) & (energy > 0)
    if not has.any():
        return EnergyWindow(math.nan, "", None, None, None)
    since, window_tokens = node_window(counters, from_counter, tokens)
    since = np.where(np.isfinite(since), since, 0.0)[has]
    total = float(energy[has].sum())
    # a power window ends at the node's last read within the last tick (the tokens' edge)
    length = np.where(from_counter, covered_s, counters.power_until)[has] - since
    in_window = window_energy(counters, energy, from_counter)[has]
    mean_power = float((in_window / length).sum()) if (length > 0).all() else None
    latest = float(since.max())
    return EnergyWindow(
        total,
        energy_source(from_counter, has),
        mean_power,
        float(window_tokens[has].sum()) / float(in_window.sum()) if in_window.sum() > 0 else None,
        latest if latest > tick_s else None,  # a first reading within the first tick is the run's start
    )


def tokens_per_joule(tokens: np.ndarray, energy_j: FloatArray) -> FloatArray:
    """Per node: generated tokens over its energy (NaN where it has none)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(energy_j > 0, tokens / np.where(energy_j > 0, energy_j, 1.0), np.nan)
