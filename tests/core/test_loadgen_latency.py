"""A one-node run's latency percentiles are LoadGen's exact figures once its LoadGen has written them,
on the latency panel and in the summary alike, as in the verdict's rules; before that, and on a rack of
several nodes (no LoadGen states a rack-wide percentile), they are estimates from buckets, marked so.
A real engine's TTFT p99 read 158.0 ms from vLLM's coarse /metrics buckets where LoadGen wrote 200.5."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tokenwatch.base.events import LatencyBatch, RunStarted
from tokenwatch.core import RackCore
from tokenwatch.sources.loadgen_detail import DetailLogParser

DETAIL = Path(__file__).parent.parent / "data" / "device-h200" / "loadgen-Server" / "mlperf_log_detail.txt"


def loadgen_wrote() -> dict[str, float]:
    """The file's own result records, read apart from tokenwatch's parser."""
    out = {}
    for line in DETAIL.read_text().splitlines():
        record = json.loads(line.split(":::MLLOG", 1)[1])
        if record["key"].startswith("result_") and isinstance(record["value"], int | float):
            out[record["key"]] = float(record["value"])
    return out


def watched(nodes: tuple[str, ...]) -> RackCore:
    core = RackCore()
    core.ingest(RunStarted(0.0, "r", "Server", nodes, 1, None, None, "live", 0.0))
    rng = np.random.default_rng(0)
    for node in nodes:  # the server's own histograms: a spread of estimates around 3 s
        for metric in ("ttft", "tpot", "e2e"):
            core.ingest(
                LatencyBatch(1.0, node, metric, rng.lognormal(0.5 if metric != "tpot" else -4, 0.4, 500))
            )
    parser = DetailLogParser(nodes[0])
    for event in parser.feed_backlog(DETAIL.read_bytes()) + parser.end_backlog()[0]:
        core.ingest(event)
    return core


def test_a_one_node_run_shows_loadgens_own_percentiles_everywhere() -> None:
    wrote = loadgen_wrote()
    core = watched(("node01",))
    snap = core.snapshot()
    ttft, tpot, e2e = (snap.latency[m] for m in ("ttft", "tpot", "e2e"))
    assert ttft.exact
    assert tpot.exact
    assert e2e.exact
    assert ttft.p99 == pytest.approx(wrote["result_first_token_99.00_percentile_latency_ns"] / 1e9)
    assert ttft.p50 == pytest.approx(wrote["result_first_token_50.00_percentile_latency_ns"] / 1e9)
    assert ttft.mean == pytest.approx(wrote["result_first_token_mean_latency_ns"] / 1e9)
    assert tpot.p99 == pytest.approx(wrote["result_time_per_output_token_99.00_percentile_ns"] / 1e9)
    assert tpot.max == pytest.approx(wrote["result_time_to_output_token_max"] / 1e9)
    assert e2e.p90 == pytest.approx(wrote["result_90.00_percentile_latency_ns"] / 1e9)
    summary = core.summary()
    assert not summary.latency_estimated
    assert summary.latency_ms["ttft"]["p99"] == pytest.approx(ttft.p99 * 1000)
    # The verdict's rule reads the same figure.
    assert snap.verdict is not None
    rules = {r.name: r for r in snap.verdict.forecast.rules}
    assert rules["ttft_p99"].projected == pytest.approx(ttft.p99, rel=1e-6)


def test_a_rack_of_several_nodes_keeps_estimates_marked_as_such() -> None:
    wrote = loadgen_wrote()
    core = watched(("node01", "node02"))
    snap = core.snapshot()
    assert not snap.latency["ttft"].exact
    assert snap.latency["ttft"].p99 != pytest.approx(
        wrote["result_first_token_99.00_percentile_latency_ns"] / 1e9
    )
    assert core.summary().latency_estimated
