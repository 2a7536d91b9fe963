"""The parsers on a real engine's own output, without the engine: vLLM 0.32.0's ``/metrics`` and server log
and LoadGen's files of the runs the engine tests drive (tests/data/engine/README.md says how they were
made). Each figure is checked against the file read independently (a plain regex, the json module)."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import RunCli
from tokenwatch.base.events import LatencyBatch, Notice, Progress
from tokenwatch.sources.harness_log import LogProgressParser
from tokenwatch.sources.prometheus_metrics import MetricsScrapeParser

ENGINE = Path(__file__).resolve().parent.parent / "data" / "engine"
METRICS = ENGINE / "vllm-metrics.txt"
LOG = ENGINE / "vllm-server.log"
TOKENS_PER_ANSWER = 32  # the SUT's max_tokens with ignore_eos


def series_sum(text: str, name: str) -> float:
    """The sum of every sample of ``name`` (all label sets), read with a regex."""
    values = re.findall(rf"^{re.escape(name)}(?:\{{[^}}]*\}})? (\S+)$", text, re.M)
    assert values, name
    return sum(float(v) for v in values)


def test_the_vllm_preset_reads_the_engines_counters_and_histograms() -> None:
    text = METRICS.read_text()
    events = MetricsScrapeParser("vllm", node="n", node_index=0, baseline=False).parse(text, 0.0)
    progress = [e for e in events if isinstance(e, Progress)]
    assert len(progress) == 1
    generated = series_sum(text, "vllm:generation_tokens_total")
    finished = series_sum(text, "vllm:request_success_total")
    assert progress[0].tokens_done == generated
    assert progress[0].samples_done == finished
    assert progress[0].prompt_tokens_done == series_sum(text, "vllm:prompt_tokens_total")
    assert generated == finished * TOKENS_PER_ANSWER  # every answer was full length: the data is whole
    counts = {
        e.metric: int(e.counts.sum()) for e in events if isinstance(e, LatencyBatch) and e.counts is not None
    }
    assert counts["ttft"] == series_sum(text, "vllm:time_to_first_token_seconds_count")
    assert counts["e2e"] == series_sum(text, "vllm:e2e_request_latency_seconds_count")
    assert counts["tpot"] == series_sum(text, "vllm:inter_token_latency_seconds_count")
    assert counts["tpot"] == finished * (TOKENS_PER_ANSWER - 1)  # one gap between each two tokens


_STATS = re.compile(
    r"(\d\d):(\d\d):(\d\d) \[loggers\.py:\d+\] Engine 000: Avg prompt throughput: ([0-9.]+) tokens/s, "
    r"Avg generation throughput: ([0-9.]+) tokens/s"
)
CADENCE_S = 10.0  # vLLM's VLLM_LOG_STATS_INTERVAL default: every gap in this log but one idle minute


def test_the_vllm_log_preset_integrates_the_real_stats_lines() -> None:
    """Each line's rates over the time since the previous line (an idle gap credited one cadence, as
    the preset says), the first line starting the clock: the parser's count is that integral, and it is
    within 3 % of the engine's own counter over the same session (the first interval and the idle
    minute's line are what a log cannot tell)."""
    data = LOG.read_bytes()
    events = LogProgressParser.preset("vllm", "n").feed(data, 0.0)
    assert not [e for e in events if isinstance(e, Notice) and e.level == "warning"]
    rows = [
        (int(h) * 3600 + int(m) * 60 + int(s), float(prompt), float(generated))
        for h, m, s, prompt, generated in _STATS.findall(data.decode())
    ]
    assert len(rows) == data.count(b"Avg generation throughput")
    gaps = [min(b[0] - a[0], CADENCE_S) for a, b in itertools.pairwise(rows)]
    generated = sum(gap * row[2] for gap, row in zip(gaps, rows[1:], strict=True))
    prompt = sum(gap * row[1] for gap, row in zip(gaps, rows[1:], strict=True))
    last = [e for e in events if isinstance(e, Progress)][-1]
    assert last.tokens_done == pytest.approx(generated, abs=1)
    assert last.prompt_tokens_done == pytest.approx(prompt, abs=1)
    engine = series_sum(METRICS.read_text(), "vllm:generation_tokens_total")
    assert last.tokens_done == pytest.approx(engine, rel=0.03)


def detail(folder: Path) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for line in (folder / "mlperf_log_detail.txt").read_text().splitlines():
        record = json.loads(line.removeprefix(":::MLLOG "))
        values[record["key"]] = record["value"]
    return values


@pytest.mark.parametrize(
    ("folder", "figure_key"),
    [
        ("loadgen-offline", "result_tokens_per_second"),
        ("loadgen-server", "result_completed_tokens_per_second"),
    ],
)
def test_summarize_of_the_engines_loadgen_folders_gives_loadgens_figures(
    folder: str, figure_key: str, run_cli: RunCli
) -> None:
    values = detail(ENGINE / folder)
    result = run_cli("summarize", str(ENGINE / folder), "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["aggregate"]["tokens_per_s"] == values[figure_key]
    assert data["verdict"]["valid"] is (values["result_validity"] == "VALID")
    assert data["verdict"]["judged_by"] == "LoadGen"
    if folder == "loadgen-server":
        checks = {c["name"]: c["value"] for c in data["verdict"]["checks"]}
        assert checks["ttft_p99"] == pytest.approx(
            values["result_first_token_99.00_percentile_latency_ns"] / 1e9, abs=1e-6
        )
        assert checks["tpot_p99"] == pytest.approx(
            values["result_time_per_output_token_99.00_percentile_ns"] / 1e9, abs=1e-6
        )
