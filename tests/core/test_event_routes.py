"""The router hands each data event to the handlers that own its part of the state, and nothing else."""

from __future__ import annotations

import typing
from dataclasses import dataclass

import numpy as np

from tokenwatch.base.events import RACK_FIGURES, LatencyBatch, RackFiguresBatch, RunStarted
from tokenwatch.core import CoreConfig, RackCore
from tokenwatch.core._ingest import ROUTES, DataEvent

NODES = ("node01", "node02", "node03")


def started_core() -> RackCore:
    core = RackCore(CoreConfig(ttft_sla_s=1.0))
    core.ingest(RunStarted(0.0, "routes", "Server", NODES, 2, 600.0, None, "sim", 0.0))
    return core


def skip_warnings(core: RackCore) -> list[str]:
    return [a.message for a in core.alerts_since(0) if a.message.startswith("skipped event")]


def test_every_data_event_type_has_a_route() -> None:
    assert set(ROUTES) == set(typing.get_args(DataEvent))
    assert all(ROUTES[kind] for kind in ROUTES)


def test_a_latency_batch_reaches_the_node_histograms_and_the_verdict_counts() -> None:
    core = started_core()
    values = np.array([0.1, 0.5, 0.999, 1.0, 1.2, 3.0])
    core.ingest(LatencyBatch(1.0, "node02", "ttft", values))
    state = core.state
    counts = state.verdict.counts["ttft"]
    # Counted independently: LoadGen's rule is latency > limit, strictly.
    assert counts.exact_judged.tolist() == [0, len(values), 0]
    assert counts.exact_over.tolist() == [0, int((values > 1.0).sum()), 0]
    assert [h.total for h in state.latency["ttft"]] == [0, len(values), 0]
    assert state.rack_latency["ttft"].total == len(values)


def test_a_latency_batch_of_an_unknown_node_is_skipped_once_and_counted_nowhere() -> None:
    core = started_core()
    core.ingest(LatencyBatch(1.0, "node99", "ttft", np.array([5.0, 6.0])))
    state = core.state
    assert core.skipped_events == 1  # said by the engine's handler; the verdict's does not say it again
    assert skip_warnings(core) == ["skipped event: unknown node 'node99'"]
    assert state.verdict.counts["ttft"].exact_judged.sum() == 0
    assert state.rack_latency["ttft"].total == 0


def test_rack_figures_make_the_fleet_part_at_the_first_batch() -> None:
    core = started_core()
    assert core.state.fleet_figures is None
    values = np.arange(2 * len(RACK_FIGURES), dtype=float).reshape(2, len(RACK_FIGURES))
    down = np.array([False, True])
    core.ingest(RackFiguresBatch(2.0, ("rackA", "rackB"), values, down, ("node01", ""), ("throttling", "")))
    fleet = core.state.fleet_figures
    assert fleet is not None
    assert fleet.racks == ["rackA", "rackB"]
    assert np.array_equal(fleet.values, values)
    assert fleet.down.tolist() == [False, True]
    assert fleet.worst_node == ["node01", ""]


@dataclass(frozen=True, slots=True)
class UnheardOf:
    """An event type no handler takes (a newer writer's, say)."""

    t: float


def test_an_event_of_a_type_no_handler_takes_is_skipped_with_one_warning() -> None:
    core = started_core()
    for t in (1.0, 2.0):
        core.ingest(UnheardOf(t))  # type: ignore[arg-type]
    assert core.skipped_events == 2
    assert skip_warnings(core) == ["skipped event: an event of a type the core does not take: UnheardOf"]
    assert core.now == 2.0  # the run went on
