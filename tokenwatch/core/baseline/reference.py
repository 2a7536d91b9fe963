"""A reference run to hold a run against (``--baseline``): frozen series and figures of a finished run.

A :class:`Baseline` is made once, before the run starts, from a recording, MLPerf result folders or the
simulator's expected run (:mod:`tokenwatch.runs.baseline`), and never changes: the core reads it at every
snapshot (:mod:`tokenwatch.core.baseline.compare`). Whether two runs compare at all is judged here, the
same way before a run starts (the CLI) and in every snapshot:

- another **scenario** is refused: an Offline figure (the whole load at once) and a Server figure (a paced
  arrival schedule under latency limits) measure different things, so their ratio says nothing;
- another **benchmark** (model, or Interactive against plain Server) is refused: tokens/s of different
  models or latency limits are not the same work;
- another **node count** or **GPUs per node** is a warning: the aggregate still compares the two racks as
  they are, and the nodes are matched by rank, the i-th node of the run against the i-th of the reference;
- other **node names** (another cluster, the simulator's ``node01``...) with the same count: matched by
  rank, and the screen says so.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from tokenwatch.base.events import FloatArray, IntArray, LatencyMetric
from tokenwatch.core.baseline.view import BaselineLatency, MatchedBy
from tokenwatch.core.node_outcome import WHOLE, NodeOutcome
from tokenwatch.mlperf.rules import normalize_benchmark


@dataclass(frozen=True, slots=True, eq=False)
class Baseline:
    """A finished run, frozen. Times in s of its run time, rates in tokens/s, counters in tokens.

    ``times`` / ``node_tokens`` are its cumulative generated tokens per node at the points of its whole-run
    series (the core's history: 1 s apart for runs up to 17 minutes, coarser for longer ones; empty for
    result folders, which hold final figures only). ``node_changed_s[k, j]`` is when node j's counter last
    grew at or before point k (its exact last completion once it stopped growing); ``node_first_s`` its
    first report. With these a node's measured mean can be read at any run time as the core measures the
    live run's. ``per_node``: False for a system result (one LoadGen run for the whole system), which has
    no per-node figures to hold nodes against.
    """

    name: str
    source: str  # "recording" | "result folders" | "simulator"
    scenario: str
    benchmark: str | None  # as named (a benchmark tokenwatch knows); None: not known
    interactive: bool
    nodes: tuple[str, ...]
    gpus_per_node: int | None
    node_tokens_per_s: FloatArray  # final measured means (NaN: no figure)
    end_s: float  # its last completion (NaN: not known)
    times: FloatArray
    node_tokens: FloatArray
    node_changed_s: FloatArray
    node_first_s: FloatArray
    rack_tokens_per_s: FloatArray  # (points,) rack rate between points, NaN at the first
    latency: Mapping[LatencyMetric, BaselineLatency]
    per_node: bool = True
    uniform: bool = False  # every node is the same expected node (the simulator's): laid over any run
    # Per node: whether it stopped partway (down or stale at its end), from when, with how much of its
    # work; empty where not known. A comparison says so beside the node's figure.
    node_outcomes: tuple[NodeOutcome, ...] = ()

    def outcome(self, j: int, t: float = math.inf) -> NodeOutcome:
        """Baseline node ``j``'s outcome as of its run time ``t``: its stop once ``t`` has reached it."""
        if j < 0 or j >= len(self.node_outcomes):
            return WHOLE
        outcome = self.node_outcomes[j]
        return outcome if outcome.partial and not outcome.since_s > t else WHOLE

    def reference_total(self, node_values: FloatArray, counterparts: IntArray) -> float:
        """The reference rack figure from per-node ``node_values`` (its nodes' rates at some time): the sum
        over its nodes, or for a uniform baseline over the counterparts of the run's nodes (as many
        expected nodes as the run has)."""
        values = node_values[counterparts[counterparts >= 0]] if self.uniform else node_values
        finite = values[np.isfinite(values)]
        return float(finite.sum()) if finite.size else float("nan")

    @property
    def tokens_per_s(self) -> float:
        """The final rack figure: the sum of the nodes' final measured means."""
        finite = self.node_tokens_per_s[np.isfinite(self.node_tokens_per_s)]
        return float(finite.sum()) if finite.size else float("nan")

    @property
    def has_series(self) -> bool:
        return len(self.times) > 0

    def __deepcopy__(self, _memo: dict[int, Any]) -> Baseline:
        """Immutable: a copy of the core (a replay's keyframe) shares it rather than copying its arrays."""
        return self


@dataclass(frozen=True, slots=True)
class RunIdentity:
    """What is known of a run before it starts, to judge a baseline against (None: not known yet)."""

    scenario: str | None
    benchmark: str | None = None
    interactive: bool = False
    nodes: tuple[str, ...] | None = None
    gpus_per_node: int | None = None
    duration_s: float | None = None


@dataclass(frozen=True, slots=True, eq=False)
class BaselineFit:
    """How a baseline fits a run: ``refusal`` (one line) when they cannot be compared, else the notes
    (one line each) that say how they differ, and each run node's counterpart (an index into the
    baseline's nodes, -1 for none; empty when the run's nodes are not known yet)."""

    refusal: str | None
    notes: tuple[str, ...]
    counterparts: IntArray
    matched_by: MatchedBy


def benchmark_key(name: str | None, interactive: bool = False) -> tuple[str, bool] | None:
    """(mlperf.conf's model, Interactive) of a benchmark name: what must be equal for figures to compare
    (llama2-70b-99 and -99.9 run the same model and limits); None when the name is not a known one."""
    if not name:
        return None
    ref = normalize_benchmark(name)
    if ref is None:
        return None
    return ref.benchmark.conf_model, ref.interactive or interactive


def judge_fit(baseline: Baseline, run: RunIdentity) -> BaselineFit:
    """Refused for another scenario or benchmark; notes for another node count, GPU count or node names."""
    ours = benchmark_key(run.benchmark, run.interactive)
    theirs = benchmark_key(baseline.benchmark, baseline.interactive)
    if run.scenario is not None and baseline.scenario and run.scenario != baseline.scenario:
        return _refused(
            f"the baseline {baseline.name} ran {baseline.scenario} and this run {run.scenario}: "
            "their figures do not compare (give a baseline of the same scenario)",
        )
    if ours is not None and theirs is not None and ours != theirs:
        return _refused(
            f"the baseline {baseline.name} ran {_bench_label(theirs)} and this run {_bench_label(ours)}: "
            "tokens/s of different benchmarks do not compare",
        )
    notes: list[str] = []
    counterparts = np.full(len(run.nodes or ()), -1, np.int64)
    matched_by: MatchedBy = "none"
    if not baseline.per_node:
        notes.append(
            f"the baseline {baseline.name} is one system result: the rack is compared, nodes are not"
        )
    elif baseline.uniform:
        count = max(1, len(baseline.nodes))
        counterparts = np.arange(len(run.nodes or ()), dtype=np.int64) % count
        matched_by = "expected"
    elif run.nodes is not None:
        counterparts, matched_by, note = match_nodes(baseline.nodes, run.nodes)
        if note:
            notes.append(note)
    if (
        run.gpus_per_node is not None
        and baseline.gpus_per_node is not None
        and run.gpus_per_node != baseline.gpus_per_node
    ):
        notes.append(
            f"{run.gpus_per_node} GPUs per node against the baseline's {baseline.gpus_per_node}: "
            "the node figures compare nodes of different size"
        )
    return BaselineFit(None, tuple(notes), counterparts, matched_by)


def _refused(why: str) -> BaselineFit:
    return BaselineFit(why, (), np.zeros(0, np.int64), "none")


def _bench_label(key: tuple[str, bool]) -> str:
    model, interactive = key
    return f"{model}{' (Interactive)' if interactive else ''}"


def match_nodes(reference: tuple[str, ...], nodes: tuple[str, ...]) -> tuple[IntArray, MatchedBy, str]:
    """For each of ``nodes`` the index of its counterpart in ``reference`` (-1: none), how they were
    matched, and a note when that is not simply by name.

    By name when the two share node names (a node only one of them has is unmatched); by rank (the i-th
    against the i-th) when they share none: another cluster, or the simulator's node01... names.
    """
    index = {name: j for j, name in enumerate(reference)}
    by_name = np.array([index.get(name, -1) for name in nodes], np.int64)
    if (by_name >= 0).any() or not reference or not nodes:
        note = ""
        if len(nodes) != len(reference):
            note = (
                f"{_nodes(len(nodes))} against the baseline's {len(reference)}: "
                "the aggregate compares the racks as they are"
            )
        missing = int((by_name < 0).sum())
        if missing:
            note = (note + "; " if note else "") + f"{_nodes(missing)} not in the baseline"
        return by_name, "name", note
    rank = np.arange(len(nodes), dtype=np.int64)
    rank[rank >= len(reference)] = -1
    note = "node names differ from the baseline's: nodes matched by rank"
    if len(nodes) != len(reference):
        note = (
            f"{_nodes(len(nodes))} against the baseline's {len(reference)}: nodes matched by rank, "
            "the aggregate compares the racks as they are"
        )
    return rank, "rank", note


def _nodes(count: int) -> str:
    return f"{count} node{'s' if count != 1 else ''}"
