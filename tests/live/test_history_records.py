"""An attach's history with each instant's records (the nodes' own counts: a log's rate lines) as one
batch: against an event-by-event reading of the plain merge written here, and read by a real core,
which must end where the plain merge leaves it (counters, restarts, the cadence each node is learnt
from, every tick's series, the snapshot and the alerts)."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from test_history_batches import as_tuple

from tokenwatch.base.events import (
    GPU_METRICS,
    Event,
    GpuBatch,
    LatencyBatch,
    LatencyLimitCounts,
    LoadGenDetail,
    LogLine,
    NodeStatus,
    Notice,
    Progress,
    ProgressBatch,
    RunStarted,
)
from tokenwatch.core import RackCore
from tokenwatch.core.snapshot_json import snapshot_json
from tokenwatch.inputs.live.backlog import Backfill
from tokenwatch.inputs.live.history import RunClock, merged

_BESIDE = (LogLine, Notice, NodeStatus, LatencyBatch, LoadGenDetail, LatencyLimitCounts)
START = 1000.0


def reference(plain: list[Event], nodes: list[str], before: float) -> list[Event]:
    """The plain merge read event by event: per instant (events at one time), the records of the run's
    nodes, each its node's one count there, as one batch after the instant's filled-in points, where
    there are two or more of them, the instant holds nothing but counts and events beside them, and it
    is before ``before``; a row holds the node's counters as its record leaves them. Nothing changes
    where a source sent batches of its own."""
    if any(isinstance(e, ProgressBatch) and not e.filled for e in plain):
        return plain
    last = {name: [0, 0, 0] for name in nodes}
    out: list[Event] = []
    k = 0
    while k < len(plain):
        instant = [e for e in plain[k:] if e.t == plain[k].t]
        k += len(instant)
        counts: dict[str, int] = {}
        for e in instant:
            if isinstance(e, Progress) and e.node in last:
                counts[e.node] = counts.get(e.node, 0) + 1
            elif isinstance(e, ProgressBatch):
                for i in e.node_index.tolist():
                    counts[nodes[i]] = counts.get(nodes[i], 0) + 1
        lone = [
            e
            for e in instant
            if isinstance(e, Progress) and e.node in last and not e.filled and counts[e.node] == 1
        ]
        beside = all(isinstance(e, (Progress, ProgressBatch, *_BESIDE)) for e in instant)
        batch = len(lone) >= 2 and beside and instant[0].t < before
        for e in instant:  # the counters as the core holds them at the instant's end
            if isinstance(e, Progress) and e.node in last:
                for c, value in enumerate((e.samples_done, e.tokens_done, e.prompt_tokens_done)):
                    if value is not None:
                        last[e.node][c] = value
            elif isinstance(e, ProgressBatch):
                for row, i in enumerate(e.node_index.tolist()):
                    assert e.prompt_tokens_done is not None
                    last[nodes[i]] = [
                        int(e.samples_done[row]),
                        int(e.tokens_done[row]),
                        int(e.prompt_tokens_done[row]),
                    ]
        if not batch:
            out += instant
            continue
        rows = [nodes.index(e.node) for e in lone if isinstance(e, Progress)]
        values = np.array([last[nodes[i]] for i in rows])
        records = ProgressBatch(instant[0].t, np.array(rows), values[:, 0], values[:, 1], values[:, 2])
        filled = [e for e in instant if isinstance(e, ProgressBatch)]
        rest = [e for e in instant if not isinstance(e, ProgressBatch) and not any(e is r for r in lone)]
        out += [*filled, records, *rest]
    return out


def random_history(rng: random.Random, names: list[str], gpu_readings: bool) -> list[Backfill]:
    """Logs of nodes writing records on whole seconds (several at one instant, counters that restart or
    go unreported), with the points between them filled in, lines, notices, node states; GPU readings
    at some instants when asked."""
    backfills = []
    for name in names:
        events: list[Event] = []
        t, tokens, samples = START + rng.choice([0.0, 1.0]), 0, 0
        for k in range(rng.randint(3, 25)):
            gap = rng.choice([1.0, 2.0, 3.0, 5.0])
            for step in range(1, int(gap)):  # the seconds between two records, filled in
                if rng.random() < 0.7:
                    events.append(Progress(t + step, name, samples, tokens + 10 * step, None, filled=True))
            t += gap
            tokens = 0 if rng.random() < 0.08 else tokens + rng.randint(0, 500)  # a restart now and then
            samples += rng.randint(0, 3)
            reported = rng.choice([(None, tokens, None), (samples, tokens, None), (samples, tokens, 7 * k)])
            events.append(Progress(t, name, *reported))
            draw = rng.random()
            if draw < 0.2:
                events.append(LogLine(t + rng.choice([0.0, 0.4]), name, f"line {k}"))
            elif draw < 0.25:
                events.append(NodeStatus(t, name, "up", "reading"))
            elif draw < 0.3:
                events.append(Notice(t, "warning", f"notice {k}", name))
            elif draw < 0.4 and gpu_readings:
                values = np.full((1, len(GPU_METRICS)), 100.0 + k)
                events.append(
                    GpuBatch(t, np.array([names.index(name)]), np.array([0]), values, np.zeros(1, np.uint64))
                )
        backfills.append(Backfill(f"log of {name}", placed=events))
    return backfills


def core_after(events: list[Event], names: list[str], attach: float) -> RackCore:
    core = RackCore()
    meta = {"attached_at_s": attach}
    core.ingest(RunStarted(0.0, "attach", "Offline", tuple(names), 1, None, None, "live", START, meta))
    for event in events:
        core.ingest(event)
    core.advance(attach + 2.0)
    return core


def same_core(a: RackCore, b: RackCore) -> None:
    sa, sb = a.state, b.state
    for field in ("raw_counters", "counter_offsets", "tokens", "samples", "prompt_tokens", "t_first"):
        np.testing.assert_array_equal(getattr(sa, field), getattr(sb, field), err_msg=field)
    for field in ("counters_at_first", "t_read", "t_last_change", "last_seen"):
        np.testing.assert_array_equal(getattr(sa, field), getattr(sb, field), err_msg=field)
    for field in ("gaps", "next_slot", "typical_s", "stale_limit_s"):
        np.testing.assert_array_equal(getattr(sa.cadence, field), getattr(sb.cadence, field), err_msg=field)
    ha, hb = a.history(), b.history()
    np.testing.assert_array_equal(ha.times, hb.times)
    for field in ("node_tokens_done", "node_tokens_per_s", "node_power_w", "node_state"):
        np.testing.assert_array_equal(getattr(ha, field), getattr(hb, field), err_msg=field)
    as_json = [json.dumps(snapshot_json(core.snapshot()), sort_keys=True) for core in (a, b)]
    assert as_json[0] == as_json[1]
    assert [(x.t, x.node, x.kind, x.message) for x in a.alerts_since(0)] == [
        (x.t, x.node, x.kind, x.message) for x in b.alerts_since(0)
    ]


@pytest.mark.parametrize("seed", range(30))
def test_records_batched_as_the_plain_merge_read_event_by_event(seed: int) -> None:
    rng = random.Random(seed)
    names = [f"node{i}" for i in range(rng.randint(1, 5))]
    backfills = random_history(rng, names, gpu_readings=seed % 3 == 0)
    attach = rng.choice([20.0, 40.0, 80.0])
    clock = RunClock(START, attach, "log")
    plain = merged(backfills, clock, names)
    before = attach - rng.choice([0.0, 5.0])
    got = merged(backfills, clock, names, before)
    assert [as_tuple(e) for e in got] == [as_tuple(e) for e in reference(plain, names, before)]
    same_core(core_after(plain, names, attach), core_after(got, names, attach))


def test_a_rack_of_logs_is_a_batch_an_instant() -> None:
    """Eight nodes writing a line every 10 s, on the same seconds, for 10 minutes: 480 records, 60
    batches, the core where the records one by one leave it."""
    names = [f"node{i}" for i in range(8)]
    backfills = [
        Backfill(
            name,
            placed=[Progress(START + 10.0 * k, name, None, 1000 * k * (i + 1)) for k in range(1, 61)],
        )
        for i, name in enumerate(names)
    ]
    clock = RunClock(START, 601.0, "log")
    plain = merged(backfills, clock, names)
    got = merged(backfills, clock, names, 601.0)
    assert len(plain) == 480
    assert all(isinstance(e, Progress) for e in plain)
    assert len(got) == 60
    assert all(isinstance(e, ProgressBatch) and not e.filled for e in got)
    last = got[-1]
    assert isinstance(last, ProgressBatch)
    assert last.tokens_done.tolist() == [60_000 * (i + 1) for i in range(8)]
    same_core(core_after(plain, names, 601.0), core_after(got, names, 601.0))
