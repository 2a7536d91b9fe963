"""A node whose engine reports its queue is idle only once the engine has been empty, and its counters
still, for longer than its idle hold: one empty reading between two requests (a loaded CPU engine whose
clients were starved for a few seconds) is not an idle server, and a node whose LoadGen run is in
progress is not idle for an empty queue at all. After the work stops for good, the node is idle."""

from __future__ import annotations

from tokenwatch.base.events import EngineQueue, Event, LoadGenDetail, Progress, RunStarted
from tokenwatch.core import RackCore
from tokenwatch.core.config import CoreConfig

NODE = "vm"
HOLD_S = CoreConfig().engine_idle_after_s


def engine_core(events: list[Event]) -> RackCore:
    core = RackCore()
    core.ingest(RunStarted(0.0, "idle", "Server", (NODE,), 1, None, None, "live", 0.0))
    for event in events:
        core.ingest(event)
    return core


def state_at(core: RackCore, t: float) -> str:
    return core.snapshot(t).nodes.state[0]


def busy_then_empty(busy_until: float, empty_until: float) -> list[Event]:
    """One reading a second: the engine works (tokens grow, requests running) until ``busy_until``, then
    reads empty with its counters still until ``empty_until``."""
    events: list[Event] = []
    tokens = 0
    for t in range(1, int(empty_until) + 1):
        busy = t <= busy_until
        tokens += 320 if busy else 0
        events.append(Progress(float(t), NODE, samples_done=tokens // 32, tokens_done=tokens))
        events.append(EngineQueue(float(t), NODE, running=4.0 if busy else 0.0, waiting=0.0))
    return events


def test_an_engine_empty_for_less_than_its_hold_is_up() -> None:
    """Empty and still for longer than the staleness limit (5 s), shorter than the hold: still up."""
    empty_s = HOLD_S - 3.0
    assert empty_s > CoreConfig().stale_after_s
    core = engine_core(busy_then_empty(30.0, 30.0 + empty_s))
    assert state_at(core, 30.0 + empty_s) == "up"


def test_an_engine_empty_for_longer_than_its_hold_is_idle() -> None:
    core = engine_core(busy_then_empty(30.0, 30.0 + HOLD_S + 3.0))
    assert state_at(core, 30.0 + HOLD_S + 3.0) == "idle"


def test_a_request_running_within_the_hold_keeps_it_up() -> None:
    """Counters still since t = 30, but one reading in the hold said a request was running (it was in
    its prefill): the engine has not been empty for the hold."""
    end = 30.0 + HOLD_S + 3.0
    events = busy_then_empty(30.0, end)
    events.insert(-10, EngineQueue(end - 5.5, NODE, running=1.0, waiting=0.0))
    events.sort(key=lambda e: e.t)
    core = engine_core(events)
    assert state_at(core, end) == "up"
    assert state_at(engine_core(busy_then_empty(30.0, end + HOLD_S)), end + HOLD_S) == "idle"


def test_a_node_whose_loadgen_run_is_in_progress_is_not_idle_for_an_empty_queue() -> None:
    """Its query plan came and its result has not: an empty engine is a run gone quiet, not an idle
    server. Once its LoadGen has written the result, the empty engine is idle."""
    plan = {"generated_query_count": 100, "generated_query_duration": 60_000_000_000}
    end = 30.0 + HOLD_S + 10.0
    events: list[Event] = [LoadGenDetail(0.5, NODE, plan), *busy_then_empty(30.0, end)]
    core = engine_core(events)
    assert state_at(core, end) == "up"
    result = {**plan, "result_validity": "VALID", "result_completed_tokens_per_second": 320.0}
    core.ingest(LoadGenDetail(end + 1.0, NODE, result))
    assert state_at(core, end + 1.0) in ("idle", "finished")
