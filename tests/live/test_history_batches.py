"""The merged history's batches (tokenwatch/inputs/live/history_batches.py) against a plain event-by-event
reading written here: random histories of several sources and nodes, with filled-in points, records,
counters some points do not report, unknown nodes, other events and times past the attach."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from tokenwatch.base.events import Event, LogLine, Notice, Progress, ProgressBatch
from tokenwatch.inputs.live.backlog import Backfill, retime
from tokenwatch.inputs.live.history import RunClock, merged
from tokenwatch.sources.filled_span import expanded


def reference(backfills: list[Backfill], clock: RunClock, nodes: list[str]) -> list[Event]:
    """Event by event: stable by run time (counts on whole seconds, nothing after the attach); each second,
    a batch of the nodes' first filled-in points holding each node's last reported counts at the end of
    the second, then the second's other events."""
    placed: list[tuple[float, Event]] = []
    for done in backfills:
        for event in expanded(done.placed):
            if event.t < clock.start_wall:
                continue
            t = event.t - clock.start_wall
            if isinstance(event, Progress | ProgressBatch):
                t = float(round(t))
            placed.append((min(t, clock.attach_s), event))
    placed.sort(key=lambda pair: pair[0])
    out: list[Event] = []
    last = {name: [0, 0, 0] for name in nodes}
    seconds = sorted({t for t, _ in placed})
    for second in seconds:
        events = [e for t, e in placed if t == second]
        rows: list[str] = []
        others: list[Event] = []
        for e in events:
            if isinstance(e, Progress) and e.node in last:
                for k, value in enumerate((e.samples_done, e.tokens_done, e.prompt_tokens_done)):
                    if value is not None:
                        last[e.node][k] = value
                if e.filled and e.node not in rows:
                    rows.append(e.node)
                    continue
            others.append(retime(e, second))
        if rows:
            index = [nodes.index(name) for name in rows]
            out.append(
                ProgressBatch(
                    second,
                    np.array(index),
                    np.array([last[name][0] for name in rows]),
                    np.array([last[name][1] for name in rows]),
                    np.array([last[name][2] for name in rows]),
                    filled=True,
                )
            )
        out += others
    return out


def as_tuple(event: Event) -> tuple[object, ...]:
    if isinstance(event, ProgressBatch):
        arrays = (event.node_index, event.samples_done, event.tokens_done, event.prompt_tokens_done)
        return ("batch", event.t, event.filled, *(None if a is None else tuple(a.tolist()) for a in arrays))
    return (type(event).__name__, repr(event))


def random_history(rng: random.Random, names: list[str]) -> list[Backfill]:
    backfills = []
    for source in range(rng.randint(1, 3)):
        events: list[Event] = []
        t = 1000.0 + rng.random() * 5
        for k in range(rng.randint(0, 60)):
            t += rng.choice([0.0, 0.3, 0.5, 1.0, 1.5, 2.0])
            node = rng.choice([*names, "elsewhere"])
            draw = rng.random()
            if draw < 0.65:
                samples, tokens, prompt = (rng.choice([None, k, 10 * k]) for _ in range(3))
                events.append(Progress(t, node, samples, tokens, prompt, filled=rng.random() < 0.6))
            elif draw < 0.75:
                events.append(ProgressBatch(t, np.array([0]), np.array([k]), np.array([k])))
            elif draw < 0.9:
                events.append(LogLine(t, node, f"line {k}"))
            else:
                events.append(Notice(t, "warning", f"notice {k}", node))
        backfills.append(Backfill(f"source{source}", placed=events))
    return backfills


@pytest.mark.parametrize("seed", range(40))
def test_the_batched_history_is_the_event_by_event_one(seed: int) -> None:
    rng = random.Random(seed)
    names = [f"node{i}" for i in range(rng.randint(1, 4))]
    backfills = random_history(rng, names)
    clock = RunClock(1000.0 + rng.random() * 3, rng.choice([5.0, 20.0, 60.0]), "log")
    got = merged(backfills, clock, names)
    assert [as_tuple(e) for e in got] == [as_tuple(e) for e in reference(backfills, clock, names)]
    # without the run's nodes: every event of its own, in the same order
    plain = merged(backfills, clock)
    assert all(not math.isnan(e.t) and e.t <= clock.attach_s for e in plain)
    assert [e.t for e in plain] == sorted(e.t for e in plain)
