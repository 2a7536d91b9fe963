"""A round's node counters split by their scrape times: each node's counters at its own sample's time."""

from __future__ import annotations

import numpy as np

from tokenwatch.base.events import Notice, ProgressBatch
from tokenwatch.inputs.prometheus.scrape_times import at_scrape_times, scrape_time_query, scrape_times

NODES = ("rack01/node01", "rack01/node02", "rack02/node01", "rack02/node02", "rack03/node01")


def node_of(name: str | None) -> int | None:
    return NODES.index(name) if name in NODES else None


def test_each_node_is_read_at_its_scrape_time_one_batch_per_time() -> None:
    answer = [
        ({"n": "rack01/node01"}, 1000.25),
        ({"n": "rack01/node02"}, 1000.25),
        ({"n": "rack02/node01"}, 998.5),
        ({"n": "rack02/node02"}, 998.5),
        ({"n": "elsewhere/node09"}, 999.0),  # no node of the run: left out
        ({"n": "rack03/node01"}, float("nan")),  # no time: the round's
    ]
    times = scrape_times(answer, node_of, "n")
    assert times == {0: 1000.25, 1: 1000.25, 2: 998.5, 3: 998.5}
    index = np.arange(5)
    batch = ProgressBatch(7.0, index, index * 10, index * 100, index * 3)
    notice = Notice(7.0, "info", "kept", source="test")
    converted: list[float] = []

    def run_time(stamp: float) -> float:
        converted.append(stamp)
        return stamp - 995.0

    out = at_scrape_times([notice, batch], times, run_time)
    assert out[0] is notice
    batches = [e for e in out[1:] if isinstance(e, ProgressBatch)]
    assert [b.t for b in batches] == [3.5, 5.25, 7.0]  # earliest first; the unstamped node at the round's
    assert [b.node_index.tolist() for b in batches] == [[2, 3], [0, 1], [4]]
    for b in batches:  # every node's counters travel with it
        assert b.tokens_done.tolist() == [100 * i for i in b.node_index.tolist()]
        assert b.samples_done.tolist() == [10 * i for i in b.node_index.tolist()]
        assert b.prompt_tokens_done is not None
        assert b.prompt_tokens_done.tolist() == [3 * i for i in b.node_index.tolist()]
    assert sorted(converted) == [998.5, 1000.25]  # one conversion per scrape time


def test_no_scrape_times_leaves_the_round_as_it_was() -> None:
    index = np.arange(2)
    batch = ProgressBatch(7.0, index, index, index)
    assert at_scrape_times([batch], {}, lambda s: s) == [batch]


def test_the_query_reads_the_token_counters_own_samples() -> None:
    promql = scrape_time_query("tokenwatch")
    assert promql == "max by ({node}) (timestamp(tokenwatch_node_generated_tokens_total))"
    assert scrape_time_query("no-such-preset") is None
