"""One owner per counter among a node's sources: a vLLM log and its /metrics both count generated tokens,
each on its own scale, and the node must count the tokens once.

The core is the judge of what reaches it: every case feeds the events the owners pass on into a real
RackCore and reads the node's tokens back, against the count worked out by hand."""

from __future__ import annotations

from pathlib import Path

import pytest
from live_support import VLLM_STEP, LiveRun, MetricsServer

from tokenwatch.base.events import Event, Progress, RunStarted
from tokenwatch.core import RackCore
from tokenwatch.inputs.config import load_watch_config
from tokenwatch.inputs.live.counter_owners import CounterOwners
from tokenwatch.inputs.watch import build_collector

LOG, METRICS = "log /var/log/vllm.log", "metrics http://127.0.0.1:8000/metrics"


def core_tokens(events: list[Event]) -> int:
    core = RackCore()
    core.ingest(RunStarted(0.0, "r", "Offline", ("n1",), 1, None, None, "live", 0.0))
    for event in events:
        core.ingest(event)
    snap = core.snapshot()
    return int(snap.nodes.tokens_done[snap.nodes.index("n1")])


def tokens(t: float, n: int, samples: int | None = None) -> Progress:
    return Progress(t, "n1", samples, n)


def feed(owners: CounterOwners, steps: list[tuple[str, Progress]]) -> list[Event]:
    out: list[Event] = []
    for source, event in steps:
        out += owners.take(source, [event])
    return out


def test_the_first_source_in_the_config_counts_and_the_other_is_left_out() -> None:
    """/metrics listed first: its counter is the node's; the log's integrated count (a little lower, on
    its own scale) never reaches the core. Before the fix each log line read as a restart and added."""
    owners = CounterOwners([METRICS, LOG])
    steps = [
        (METRICS, tokens(1, 0)),
        (METRICS, tokens(2, 300)),
        (LOG, tokens(2.5, 250)),
        (METRICS, tokens(3, 640)),
        (LOG, tokens(12.5, 600)),  # the engine is idle now: the log's last word
        (METRICS, tokens(13, 640)),
        (LOG, tokens(22.5, 600)),
        (METRICS, tokens(23, 640)),
    ]
    out = feed(owners, steps)
    assert all(isinstance(e, Progress) and e.tokens_done in (0, 300, 640) for e in out)
    assert core_tokens(out) == 640
    assert core_tokens([e for _, e in steps]) > 640  # what the core counted with both writing


def test_an_earlier_source_that_speaks_later_takes_over_from_the_count_so_far() -> None:
    owners = CounterOwners([METRICS, LOG])
    steps = [
        (LOG, tokens(10, 100)),
        (LOG, tokens(20, 250)),
        (METRICS, tokens(21, 0)),  # its first reading is its baseline
        (LOG, tokens(30, 400)),  # left out from now on
        (METRICS, tokens(31, 170)),
    ]
    out = feed(owners, steps)
    assert [e.tokens_done for e in out if isinstance(e, Progress)] == [100, 250, 250, 420]
    assert core_tokens(out) == 250 + 170


def test_a_later_source_never_takes_a_counter_over() -> None:
    owners = CounterOwners([LOG, METRICS])
    out = feed(owners, [(LOG, tokens(1, 10)), (METRICS, tokens(2, 500)), (LOG, tokens(3, 30))])
    assert [e.tokens_done for e in out if isinstance(e, Progress)] == [10, 30]


def test_the_owner_restarting_after_a_takeover_counts_on_from_where_it_was() -> None:
    """The owner's counter goes back (the server restarted): the core keeps what it had and adds the new
    count; the takeover's base is not added a second time."""
    owners = CounterOwners([METRICS, LOG])
    steps = [
        (LOG, tokens(1, 100)),
        (METRICS, tokens(2, 1000)),  # takes over at 100 (its 1000 are from before the watch)
        (METRICS, tokens(3, 1050)),  # 150
        (METRICS, tokens(4, 20)),  # restarted: 20 more
        (METRICS, tokens(5, 60)),  # 60 more in all since the restart
    ]
    assert core_tokens(feed(owners, steps)) == 150 + 60


@pytest.mark.parametrize(
    ("first", "expected_samples", "expected_tokens"),
    # the trace first: it takes samples over at /metrics' 3 (its own 2 already counted), then 3 more
    [(METRICS, 7, 640), (LOG, 3 + (5 - 2), 640)],
)
def test_each_counter_has_its_own_owner(first: str, expected_samples: int, expected_tokens: int) -> None:
    """A trace-like source that counts samples only and /metrics that counts both: tokens come from the
    one source that has them, samples from whichever is first in the config."""
    other = LOG if first == METRICS else METRICS
    owners = CounterOwners([first, other])
    metrics_events = [Progress(1, "n1", 3, 300), Progress(2, "n1", 7, 640)]
    trace_events = [Progress(1.5, "n1", 2, None), Progress(2.5, "n1", 5, None)]
    out = owners.take(METRICS, metrics_events[:1]) + owners.take(LOG, trace_events[:1])
    out += owners.take(METRICS, metrics_events[1:]) + owners.take(LOG, trace_events[1:])
    progress = [e for e in out if isinstance(e, Progress)]
    assert max(e.samples_done or 0 for e in progress) == expected_samples
    assert max(e.tokens_done or 0 for e in progress) == expected_tokens


def test_other_events_pass_and_a_progress_left_with_nothing_is_dropped() -> None:
    from tokenwatch.base.events import Notice

    owners = CounterOwners([METRICS, LOG])
    owners.take(METRICS, [tokens(1, 5)])
    notice = Notice(2, "info", "hello", "n1")
    assert owners.take(LOG, [notice, tokens(2, 9)]) == [notice]


def stats_line(second: int, tokens_per_s: float) -> str:
    """vLLM V1's periodic stats line, as the real server writes it (tests/data/engine/vllm-server.log)."""
    return (
        f"(APIServer pid=4242) INFO 11-27 08:20:{second:02d} [loggers.py:335] Engine 000: Avg prompt "
        f"throughput: 0.0 tokens/s, Avg generation throughput: {tokens_per_s} tokens/s, Running: 0 reqs, "
        "Waiting: 0 reqs, CPU KV cache usage: 0.0%, Prefix cache hit rate: 0.0%\n"
    )


async def test_a_watch_of_a_vllm_log_and_its_metrics_counts_the_tokens_once(tmp_path: Path) -> None:
    """The engine tests' config in local mode, with a stand-in server whose counter grows VLLM_STEP a
    scrape and a log whose lines state their own (different) throughput: the node's tokens are the
    counter's alone. Before, each log line read as a counter restart and its count was added on top."""
    server = MetricsServer()
    log = tmp_path / "vllm.log"
    log.touch()
    try:
        cfg = tmp_path / "local.yaml"
        cfg.write_text(
            "run: {name: one-box}\ngpu: {source: none}\nprogress:\n"
            f"  - {{kind: prometheus, url: 'http://127.0.0.1:{server.port}/{{name}}/vllm', "
            "preset: vllm, interval: 200ms}\n"
            f"  - {{kind: log, path: '{log}', preset: vllm}}\n"
        )
        config = load_watch_config(cfg)
        run = LiveRun(config, build_collector(config))
        node = run.collector.targets[0].name
        path = f"/{node}/vllm"

        def counted() -> int:
            snap = run.snapshot()
            return int(snap.nodes.tokens_done[snap.nodes.index(node)]) if run.core.started else -1

        async with run:
            for k, second in enumerate((0, 10, 20, 30)):
                hits = server.hits[path]
                with open(log, "a") as fh:
                    fh.write(stats_line(second, 700.0 + k))
                await run.wait_for("two more scrapes", lambda h=hits: server.hits[path] >= h + 2)
            tokens = counted()
            scrapes = server.hits[path]
        log_tokens = [e.tokens_done for e in run.events if isinstance(e, Progress) and e.tokens_done]
        assert tokens > 0
        assert tokens % VLLM_STEP == 0  # the counter's steps alone: no 10 s x 700 tok/s from the log
        assert tokens <= (scrapes - 1) * VLLM_STEP  # the first scrape is the baseline
        assert all(n % VLLM_STEP == 0 for n in log_tokens)
    finally:
        server.close()
