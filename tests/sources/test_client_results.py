"""Client-side benchmark outputs read from the real programs' own files (tests/data/peers/README.md):
AIPerf's export, per-interval export and live /metrics, vllm bench serve's result JSON, SGLang
bench_serving's JSONL and a GenAI-Perf export. Each figure is checked against the file read independently
(the json module, a regex), and where the file does not state a figure it is unknown, never 0."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import RunCli
from tokenwatch.base.events import Notice, Progress
from tokenwatch.sources.client_results import looks_like_client_result, read_client_results
from tokenwatch.sources.prometheus_metrics import MetricsScrapeParser

PEERS = Path(__file__).resolve().parent.parent / "data" / "peers"
AIPERF = PEERS / "aiperf" / "profile_export_aiperf.json"
SLICES = PEERS / "aiperf" / "profile_export_aiperf_timeslices.json"
CLIENT_TOKENS = PEERS / "aiperf-client-tokens" / "profile_export_aiperf.json"
VLLM = PEERS / "vllm-bench-serve" / "vllm-bench-serve.json"
SGLANG = PEERS / "sglang-bench-serving" / "sglang-bench-serving.jsonl"
GENAI_PERF = PEERS / "genai-perf" / "profile_export_genai_perf.json"
ENGINE_GROWTH = 9600  # vllm:generation_tokens_total grew by this much over each of these runs (README)


def load(path: Path) -> dict[str, Any]:
    return dict(json.loads(path.read_text()))


def test_aiperf_export_reads_its_own_figures() -> None:
    raw = load(AIPERF)
    (result,), warnings = read_client_results(AIPERF)
    assert warnings == []
    assert result.tool == "AIPerf 0.13.0"
    assert result.output_tokens_per_s == raw["output_token_throughput"]["avg"]
    assert result.requests_per_s == raw["request_throughput"]["avg"]
    assert result.duration_s == raw["benchmark_duration"]["avg"]
    assert result.requests == raw["completed_request_count"]["avg"] == 300
    assert result.output_tokens == result.server_output_tokens == ENGINE_GROWTH
    assert result.failed == 0  # an empty error_summary: no failed request
    assert result.latency_ms["ttft"]["p99"] == raw["time_to_first_token"]["p99"]
    assert result.latency_ms["e2e"]["p50"] == raw["request_latency"]["p50"]
    assert result.latency_ms["tpot"]["mean"] == raw["inter_token_latency"]["avg"]
    # The server's count over AIPerf's window against AIPerf's own rate: the same tokens, within 1 %.
    assert result.server_tokens_per_s == pytest.approx(result.output_tokens_per_s, rel=0.01)
    assert result.notes == ()


def test_aiperf_per_interval_export_adds_up_to_the_run() -> None:
    slices = load(SLICES)["timeslices"]
    summary = load(AIPERF)
    (result,), warnings = read_client_results(SLICES)
    assert warnings == []
    assert len(result.intervals) == len(slices) == 4
    window = (slices[-1]["end_ns"] - slices[0]["start_ns"]) / 1e9
    assert result.duration_s == pytest.approx(window)
    assert result.intervals[1].start_s == pytest.approx((slices[1]["start_ns"] - slices[0]["start_ns"]) / 1e9)
    for interval, raw in zip(result.intervals, slices, strict=True):
        assert interval.output_tokens == raw["total_output_tokens"]["avg"]
        assert interval.output_tokens_per_s == raw["output_token_throughput"]["avg"]
    # The slices' sums are the whole export's totals, and their rate AIPerf's own within 1 %.
    assert result.output_tokens == summary["total_output_tokens"]["avg"]
    assert result.requests == summary["request_count"]["avg"]
    assert result.output_tokens_per_s == pytest.approx(summary["output_token_throughput"]["avg"], rel=0.01)


def test_aiperf_counting_with_its_own_tokenizer_is_said() -> None:
    raw = load(CLIENT_TOKENS)
    (result,), _ = read_client_results(CLIENT_TOKENS)
    assert result.output_tokens == raw["total_output_tokens"]["avg"] == 18537
    assert result.server_output_tokens == raw["total_usage_completion_tokens"]["avg"] == 12800
    (note,) = result.notes
    assert "18,537" in note
    assert "12,800" in note
    assert "+44.8 %" in note


def test_vllm_bench_serve_result() -> None:
    raw = load(VLLM)
    (result,), warnings = read_client_results(VLLM)
    assert warnings == []
    assert result.tool == "vllm bench serve"
    assert result.output_tokens == raw["total_output_tokens"] == ENGINE_GROWTH
    assert result.output_tokens_per_s == raw["output_throughput"]
    assert result.output_tokens_per_s == pytest.approx(raw["total_output_tokens"] / raw["duration"], rel=1e-9)
    assert (result.requests, result.failed) == (raw["completed"], raw["failed"])
    assert result.latency_ms["e2e"] == {
        "mean": raw["mean_e2el_ms"],
        "p50": raw["p50_e2el_ms"],
        "p90": raw["p90_e2el_ms"],
        "p99": raw["p99_e2el_ms"],
    }
    assert result.latency_ms["tpot"]["p99"] == raw["p99_tpot_ms"]
    assert result.latency_ms["itl"]["p50"] == raw["median_itl_ms"]


def test_sglang_bench_serving_jsonl() -> None:
    raw = json.loads(SGLANG.read_text().splitlines()[0])  # Python's json reads its Infinity request rate
    (result,), warnings = read_client_results(SGLANG)
    assert warnings == []
    assert result.tool == "SGLang bench_serving"
    assert result.output_tokens == raw["total_output_tokens"] == ENGINE_GROWTH
    assert result.output_tokens_per_s == raw["output_throughput"]
    assert result.concurrency == raw["concurrency"]
    assert result.latency_ms["e2e"]["p99"] == raw["p99_e2e_latency_ms"]
    assert result.latency_ms["ttft"]["p50"] == raw["median_ttft_ms"]
    assert math.isnan(result.failed)  # SGLang does not state failed requests: unknown, not 0
    (note,) = result.notes
    assert f"{raw['total_output_tokens_retokenized']:,}" in note


def test_genai_perf_export_states_rates_only() -> None:
    raw = load(GENAI_PERF)
    (result,), warnings = read_client_results(GENAI_PERF)
    assert warnings == []
    assert result.tool == "GenAI-Perf"
    assert result.output_tokens_per_s == raw["output_token_throughput"]["avg"]
    assert result.latency_ms["ttft"]["p99"] == raw["time_to_first_token"]["p99"]
    assert result.latency_ms["tpot"]["p50"] == raw["inter_token_latency"]["p50"]
    for unknown in (result.duration_s, result.output_tokens, result.requests, result.failed):
        assert math.isnan(unknown)  # not stated by GenAI-Perf: unknown, never a guessed 0


def test_client_results_are_told_from_recordings() -> None:
    for path in (AIPERF, SLICES, CLIENT_TOKENS, VLLM, SGLANG, GENAI_PERF):
        assert looks_like_client_result(path), path
    samples = Path(__file__).resolve().parents[2] / "sample_runs"
    assert not any(looks_like_client_result(p) for p in samples.glob("*.jsonl.zst"))


def _gauge(text: str, name: str) -> float:
    (value,) = re.findall(rf"^{re.escape(name)}\{{[^}}]*\}} (\S+)$", text, re.M)
    return float(value)


@pytest.mark.parametrize("scrape", ["metrics-mid-run.txt", "metrics-end.txt"])
def test_aiperf_live_metrics_preset(scrape: str) -> None:
    """AIPerf's /metrics states the run's totals so far: its first reading counts in full (its count starts
    with its run), output tokens are the server's usage count, samples its completed requests."""
    text = (PEERS / "aiperf" / scrape).read_text()
    events = MetricsScrapeParser("aiperf", node="client", node_index=0).parse(text, 5.0)
    (progress,) = [e for e in events if isinstance(e, Progress)]
    assert progress.tokens_done == _gauge(text, "aiperf_total_usage_completion_tokens_avg_tokens")
    assert progress.samples_done == _gauge(text, "aiperf_completed_request_count_avg_requests")
    assert progress.prompt_tokens_done == _gauge(text, "aiperf_total_usage_prompt_tokens_avg_tokens")
    assert [e for e in events if not isinstance(e, Progress)] == []


def test_aiperf_live_metrics_end_where_the_export_does() -> None:
    parser = MetricsScrapeParser("aiperf", node="client", node_index=0)
    parser.parse((PEERS / "aiperf" / "metrics-mid-run.txt").read_text(), 5.0)
    events = parser.parse((PEERS / "aiperf" / "metrics-end.txt").read_text(), 10.0)
    (progress,) = [e for e in events if isinstance(e, Progress)]
    export = load(AIPERF)
    assert progress.tokens_done == export["total_usage_completion_tokens"]["avg"] == ENGINE_GROWTH
    assert progress.samples_done == export["completed_request_count"]["avg"]


def test_summarize_prints_client_results(run_cli: RunCli) -> None:
    done = run_cli("summarize", str(AIPERF), str(VLLM), str(SGLANG), str(GENAI_PERF))
    assert done.returncode == 0, done.stderr
    rows = {line[:20].strip(): line for line in done.stdout.splitlines()}
    assert "481.3" in rows["output tokens/s"]
    assert "778.2" in rows["output tokens/s"]
    assert "44,190.6" in rows["output tokens/s"]
    assert rows["duration (s)"].split()[-1] == "—"  # GenAI-Perf states no duration
    as_json = run_cli("summarize", str(AIPERF), str(GENAI_PERF), "--json")
    out = json.loads(as_json.stdout)
    assert out["server"] is None
    aiperf, genai = out["clients"]
    assert aiperf["output_tokens_per_s"] == round(load(AIPERF)["output_token_throughput"]["avg"], 6)
    assert genai["output_tokens"] is None
    assert genai["duration_s"] is None


def test_summarize_sets_client_results_beside_the_servers(run_cli: RunCli) -> None:
    """A LoadGen result folder of the engine tests' Server run beside the vllm bench serve result: each
    figure as its side states it, the client's rates against the server's in %."""
    folder = Path(__file__).resolve().parent.parent / "data" / "engine" / "loadgen-server"
    done = run_cli("summarize", str(folder), str(VLLM), "--json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    server, (client,) = out["client_side"]["server"], out["client_side"]["clients"]
    assert server["output_tokens_per_s"] == out["aggregate"]["tokens_per_s"]
    assert server["output_tokens"] is None  # a summary states rates, not counts over its window
    expected = (load(VLLM)["output_throughput"] / out["aggregate"]["tokens_per_s"] - 1) * 100
    assert client["vs_server_pct"]["output_tokens_per_s"] == pytest.approx(expected, abs=1e-3)
    text = run_cli("summarize", str(folder), str(VLLM)).stdout
    assert "Client-side benchmarks beside the server's own figures" in text
    assert f"({expected:+.1f} %)" in text


def test_aiperf_metrics_before_its_first_stats_are_no_verdict_on_the_preset() -> None:
    """Until its first stats interval AIPerf serves aiperf_info alone: no progress, and no 'recognises none'
    warning (the next scrape has the totals)."""
    parser = MetricsScrapeParser("aiperf", node="client", node_index=0)
    assert parser.parse((PEERS / "aiperf" / "metrics-before-first-stats.txt").read_text(), 1.0) == []
    events = parser.parse((PEERS / "aiperf" / "metrics-mid-run.txt").read_text(), 2.0)
    assert [type(e).__name__ for e in events] == ["Progress"]
    other = MetricsScrapeParser("vllm", node="client", node_index=0)
    (warning,) = other.parse((PEERS / "aiperf" / "metrics-mid-run.txt").read_text(), 1.0)
    assert isinstance(warning, Notice)
    assert "the vllm preset recognises none of this scrape's metrics: aiperf_" in warning.message


def test_aiperf_metrics_with_garbage_and_non_finite_lines() -> None:
    """A garbage line is a warning naming its line; a NaN total is not read (the last good one stands),
    and said."""
    good = (PEERS / "aiperf" / "metrics-mid-run.txt").read_text()
    parser = MetricsScrapeParser("aiperf", node="client", node_index=0)
    parser.parse(good, 1.0)
    line = re.search(r"^aiperf_total_usage_completion_tokens_avg_tokens\{.*$", good, re.M)
    assert line is not None
    number = good[: line.start()].count("\n") + 2  # the garbage line follows the NaN line
    damaged = good.replace(
        line.group(0),
        'aiperf_total_usage_completion_tokens_avg_tokens{benchmark_id="x"} NaN\nthis is { not a metric',
    )
    events = parser.parse(damaged, 2.0)
    garbage, nan = [e.message for e in events if isinstance(e, Notice)]
    assert f"line {number}: not a metric line" in garbage
    assert nan == (
        "metrics:aiperf: aiperf_total_usage_completion_tokens_avg_tokens: nan is not a count, skipped"
    )
    (progress,) = [e for e in events if isinstance(e, Progress)]
    assert progress.tokens_done == _gauge(good, "aiperf_total_usage_completion_tokens_avg_tokens")


def test_summarize_sets_client_results_beside_a_recording(run_cli: RunCli) -> None:
    """Beside a recording the server's column is the recording's own summary: its aggregate tokens/s and
    its latency percentiles, as `summarize --json` states them."""
    recording = Path(__file__).resolve().parents[2] / "sample_runs" / "gb300-nvl72-server.jsonl.zst"
    done = run_cli("summarize", str(recording), str(SGLANG), "--json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    server = out["client_side"]["server"]
    assert server["output_tokens_per_s"] == out["aggregate"]["tokens_per_s"]
    assert server["duration_s"] == out["duration_s"]
    assert server["ttft_p99"] == out["latency_ms"]["ttft"]["p99"]
    assert server["requests_per_s"] == pytest.approx(sum(n["samples_per_s"] for n in out["nodes"]), rel=1e-6)
    (client,) = out["client_side"]["clients"]
    assert client["tool"] == "SGLang bench_serving"


def test_a_baseline_needs_the_servers_run(run_cli: RunCli) -> None:
    done = run_cli("summarize", str(VLLM), "--baseline", "sim:gb300-nvl72")
    assert done.returncode == 2
    assert "--baseline compares a recording or result folders" in done.stderr


def test_summarize_reads_an_artifact_folder_by_its_exports(run_cli: RunCli, tmp_path: Path) -> None:
    """AIPerf's and GenAI-Perf's artifact folders (no LoadGen summary in them) stand for their summary
    exports; the per-interval export beside AIPerf's is the same run again and is not listed twice."""
    aiperf = tmp_path / "artifacts" / "tiny-llama-openai-completions-concurrency16"
    genai = tmp_path / "artifacts" / "ensemble-triton-tensorrtllm-concurrency100"
    aiperf.mkdir(parents=True)
    genai.mkdir(parents=True)
    (aiperf / "profile_export_aiperf.json").write_bytes(AIPERF.read_bytes())
    (aiperf / "profile_export_aiperf_timeslices.json").write_bytes(SLICES.read_bytes())
    (genai / "profile_export_genai_perf.json").write_bytes(GENAI_PERF.read_bytes())
    done = run_cli("summarize", str(tmp_path / "artifacts"), "--json")
    assert done.returncode == 0, done.stderr
    tools = [c["tool"] for c in json.loads(done.stdout)["clients"]]
    assert tools == ["GenAI-Perf", "AIPerf 0.13.0"]  # sorted by path: ensemble-... before tiny-llama-...
