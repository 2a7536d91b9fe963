"""When the server scraped each node's counters, so a node's rate is formed over the span its samples
cover, not the span between two rounds.

An instant query at a grid instant answers each series' last sample at or before it: on a loaded machine
the server's scrapes come late or are missed, and the last sample of one round can be 0.2 s old while the
next round's is 1.9 s old. Stamped with the rounds' times (2 s apart) the two readings held 0.3 s or 3.7 s
of growth, and a rack's drill-down nodes summed to half or twice its figure on the board (which the
exporter's own windowed rates make). ``timestamp()`` of the raw counter is the sample's own scrape time:
each node's counters are stamped with it, in one :class:`ProgressBatch` per scrape time (one scrape
serves a whole rack, so a round makes a batch or two).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping

import numpy as np

from tokenwatch.base.events import Event, ProgressBatch
from tokenwatch.inputs.prometheus.api import Sample
from tokenwatch.inputs.prometheus.presets import first_present
from tokenwatch.sources.metric_catalogue import PRESETS

# The node reader's field whose answer is each node's generated-token counter's scrape time (Unix s).
SCRAPED_AT = "tokens_scraped_at"


def scrape_time_query(progress_preset: str) -> str | None:
    """PromQL template (``{node}`` still to fill) of each node's token counter's scrape time: the same
    families, picked the same way, as the ``tokens`` query sums; None for a preset without one."""
    server = PRESETS[progress_preset].server if progress_preset in PRESETS else None
    if server is None or not server.tokens:
        return None
    return first_present("max by ({node})", [f"timestamp({family})" for family in server.tokens])


def scrape_times(
    samples: Iterable[Sample], node_of: Callable[[str | None], int | None], label: str
) -> dict[int, float]:
    """Node index -> its counters' scrape time (Unix s) from the answer to :func:`scrape_time_query`;
    labels that name no node of the run, and times that are no times, left out."""
    out: dict[int, float] = {}
    for labels, stamp in samples:
        i = node_of(labels.get(label))
        if i is not None and math.isfinite(stamp) and stamp > 0:
            out[i] = max(stamp, out.get(i, stamp))
    return out


def at_scrape_times(
    events: list[Event], times: Mapping[int, float], run_time: Callable[[float], float]
) -> list[Event]:
    """``events`` with each :class:`ProgressBatch` split by its nodes' scrape times (``times``: node index
    -> Unix s; ``run_time`` turns one into the run's time): one batch per time, earliest first. A node
    with no scrape time keeps the batch's own time."""
    if not times:
        return events
    # One conversion per scrape time (a rack's nodes share one), not per node: 18,000 in a fleet's pass.
    converted = {stamp: run_time(stamp) for stamp in set(times.values())}
    run_times = {i: converted[stamp] for i, stamp in times.items()}
    out: list[Event] = []
    for event in events:
        if not isinstance(event, ProgressBatch):
            out.append(event)
            continue
        stamps = np.array([run_times.get(i, event.t) for i in event.node_index.tolist()])
        for t in np.unique(stamps).tolist():
            rows = np.flatnonzero(stamps == t)
            prompt = event.prompt_tokens_done
            out.append(
                ProgressBatch(
                    t,
                    event.node_index[rows],
                    event.samples_done[rows],
                    event.tokens_done[rows],
                    None if prompt is None else prompt[rows],
                    filled=event.filled,
                )
            )
    return out
