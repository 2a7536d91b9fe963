"""Every server's metric names: trtllm-serve's unprefixed families and Dynamo's prefixed
ones in the ``trtllm`` preset, vLLM V1 and V0 names, and a preset that recognises nothing saying so once.

Scrapes come from real files where they exist (tests/data/sources/prometheus: a real vLLM V1 /metrics
page; the real dcgm-exporter fixture). Where none exists they are written here from the exporters' own
definitions:
* trtllm-serve: ``tensorrt_llm/metrics/collector.py``
  (NVIDIA/TensorRT-LLM@89fd9b74ab7ae753b4c6b3db25a400dca7ea54a0, ``MetricsCollector``:
  ``request_success_total`` with ``finished_reason``, histograms
  ``e2e_request_latency_seconds``, ``time_to_first_token_seconds``, ``time_per_output_token_seconds``,
  ``request_queue_time_seconds``, no prefix, labels ``model_name``/``engine_type``);
* Dynamo: its documentation's example exposition, ``fern/pages/backends/trtllm/prometheus.md``
  (wxsms/dynamo@7ca6a562f4d5b5926b1d1299425e90033cb725c9, a fork of ai-dynamo/dynamo: prefix ``trtllm_``)
  and the earlier ``trtllm:`` prefix of ``docs/backends/trtllm/prometheus.md``
  (fy2462/dynamo@22646b9ccad0544ceb3ff55e0f1ae6b04c6fb650);
* vLLM V0: ``vllm/engine/metrics.py`` (vllm-project/vllm@00c33e81b526a179a6afb86512d1e8198965ee2f:
  ``vllm:request_success_total``, ``vllm:time_per_output_token_seconds``, ``vllm:gpu_cache_usage_perc``).
Expected figures are computed here from the scrapes' own numbers.
"""

from __future__ import annotations

import math
import re

import pytest

from tokenwatch.base.events import EngineQueue, LatencyBatch, Notice, Progress
from tokenwatch.sources.prometheus_metrics import MetricsScrapeParser

from .conftest import DATA

PROM = DATA / "prometheus"
LABELS = 'model_name="Qwen/Qwen3-0.6B",engine_type="trtllm"'
TTFT_BOUNDS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0)  # collector.py's first


def trtllm_scrape(prefix: str, stop: int, length: int, ttft_under_half: int) -> str:
    """A TensorRT-LLM MetricsCollector page: ``ttft_under_half`` first tokens, all in (0.25, 0.5]."""
    lines = [
        f"# TYPE {prefix}request_success_total counter",
        f'{prefix}request_success_total{{{LABELS},finished_reason="stop"}} {stop}.0',
        f'{prefix}request_success_total{{{LABELS},finished_reason="length"}} {length}.0',
        f"# TYPE {prefix}time_to_first_token_seconds histogram",
    ]
    for bound in TTFT_BOUNDS:
        count = ttft_under_half if bound >= 0.5 else 0
        lines.append(f'{prefix}time_to_first_token_seconds_bucket{{le="{bound}",{LABELS}}} {count}.0')
    lines.append(f'{prefix}time_to_first_token_seconds_bucket{{le="+Inf",{LABELS}}} {ttft_under_half}.0')
    lines.append(f"{prefix}time_to_first_token_seconds_count{{{LABELS}}} {ttft_under_half}.0")
    lines.append(f"{prefix}time_to_first_token_seconds_sum{{{LABELS}}} {ttft_under_half * 0.3}")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("prefix", ["", "trtllm_", "trtllm:"], ids=["trtllm-serve", "dynamo", "dynamo-early"])
def test_trtllm_preset_reads_trtllm_serve_and_dynamo_names(prefix: str) -> None:
    parser = MetricsScrapeParser("trtllm", "n")
    assert parser.parse(trtllm_scrape(prefix, 150, 5, 40), 1.0) == [Progress(1.0, "n", 0, None, None)]
    events = parser.parse(trtllm_scrape(prefix, 162, 6, 53), 2.0)  # 13 more finished, 13 more first tokens
    assert [e for e in events if isinstance(e, Progress)] == [Progress(2.0, "n", 13, None, None)]
    (ttft,) = [e for e in events if isinstance(e, LatencyBatch)]
    assert ttft.metric == "ttft"
    assert ttft.values_s.tolist() == pytest.approx([math.sqrt(0.25 * 0.5)])
    assert ttft.counts is not None
    assert ttft.counts.tolist() == [13]
    assert not [e for e in events if isinstance(e, Notice)]


def test_dynamo_s_documented_example_page_reads_its_figures() -> None:
    """The exposition text Dynamo's documentation shows (wxsms/dynamo@7ca6a562, cited above)."""
    doc = 'model_name="Qwen/Qwen3-0.6B",engine_type="trtllm"'
    page = (
        "# TYPE trtllm_request_success_total counter\n"
        f'trtllm_request_success_total{{{doc},finished_reason="stop"}} 150.0\n'
        f'trtllm_request_success_total{{{doc},finished_reason="length"}} 5.0\n'
        "# TYPE trtllm_e2e_request_latency_seconds histogram\n"
        f'trtllm_e2e_request_latency_seconds_bucket{{le="0.5",{doc}}} 25.0\n'
        f"trtllm_e2e_request_latency_seconds_count{{{doc}}} 150.0\n"
        f"trtllm_e2e_request_latency_seconds_sum{{{doc}}} 45.2\n"
    )
    events = MetricsScrapeParser("trtllm", "n", baseline=False).parse(page, 1.0)
    assert events[0] == Progress(1.0, "n", 150 + 5, None, None)
    (e2e,) = [e for e in events if isinstance(e, LatencyBatch)]
    assert (e2e.metric, e2e.values_s.tolist()) == ("e2e", [0.25])  # 25 in the first bucket (0, 0.5]
    assert e2e.counts is not None
    assert e2e.counts.tolist() == [25]


def _bump(text: str, family: str, by: float, labels: str = "") -> str:
    """Add ``by`` to the first sample of ``family`` whose labels contain ``labels``."""
    pattern = re.compile(rf"^({re.escape(family)}\{{[^}}]*{re.escape(labels)}[^}}]*\}}) (\S+)$", re.M)
    match = pattern.search(text)
    assert match is not None, family
    return text.replace(match.group(0), f"{match.group(1)} {float(match.group(2)) + by}", 1)


def test_vllm_v1_names_on_a_real_v1_page() -> None:
    """vLLM V1's own page (idle), then busier: generation tokens, request_success_total by finish reason,
    inter-token latency (the deprecated time_per_output_token family removed, as vLLM 0.11 did) and
    kv_cache_usage_perc."""
    idle = (PROM / "vllm_metrics.txt").read_text()
    v1 = (
        "\n".join(line for line in idle.splitlines() if "vllm:time_per_output_token_seconds" not in line)
        + "\n"
    )
    parser = MetricsScrapeParser("vllm", "n")
    # Zero work and an empty queue (its running / waiting / KV-cache gauges read 0.0).
    assert parser.parse(v1, 1.0) == [Progress(1.0, "n", 0, 0, 0), EngineQueue(1.0, "n", 0.0, 0.0, 0.0)]
    busy = _bump(v1, "vllm:generation_tokens_total", 4200)
    busy = _bump(busy, "vllm:request_success_total", 7, 'finished_reason="stop"')
    busy = _bump(busy, "vllm:request_success_total", 2, 'finished_reason="length"')
    bounds = [
        float(b) for b in re.findall(r'vllm:inter_token_latency_seconds_bucket\{[^}]*le="([^"+]+)"', v1)
    ]
    assert 0.05 in bounds
    for bound in [b for b in bounds if b >= 0.05]:  # 3000 gaps between tokens landed in (0.025, 0.05]
        busy = _bump(busy, "vllm:inter_token_latency_seconds_bucket", 3000, f'le="{bound}"')
    busy = _bump(busy, "vllm:inter_token_latency_seconds_bucket", 3000, 'le="+Inf"')
    busy = _bump(busy, "vllm:kv_cache_usage_perc", 0.42)
    events = parser.parse(busy, 2.0)
    assert [e for e in events if isinstance(e, Progress)] == [Progress(2.0, "n", 9, 4200, 0)]
    (tpot,) = [e for e in events if isinstance(e, LatencyBatch)]
    below = max(b for b in bounds if b < 0.05)
    assert tpot.metric == "tpot"
    assert tpot.values_s.tolist() == pytest.approx([math.sqrt(below * 0.05)])
    assert parser.gauges["n"]["kv_cache_usage"] == pytest.approx(0.42)


def test_vllm_v0_names() -> None:
    def page(tokens: int, stop: int, tpot_in_first: int, cache: float) -> str:
        return (
            "# TYPE vllm:generation_tokens_total counter\n"
            f'vllm:generation_tokens_total{{model_name="m"}} {tokens}.0\n'
            "# TYPE vllm:request_success_total counter\n"
            f'vllm:request_success_total{{finished_reason="stop",model_name="m"}} {stop}.0\n'
            "# TYPE vllm:time_per_output_token_seconds histogram\n"
            f'vllm:time_per_output_token_seconds_bucket{{le="0.01",model_name="m"}} {tpot_in_first}.0\n'
            f'vllm:time_per_output_token_seconds_bucket{{le="+Inf",model_name="m"}} {tpot_in_first}.0\n'
            "# TYPE vllm:gpu_cache_usage_perc gauge\n"
            f'vllm:gpu_cache_usage_perc{{model_name="m"}} {cache}\n'
        )

    parser = MetricsScrapeParser("vllm", "n")
    parser.parse(page(1000, 10, 500, 0.1), 1.0)
    events = parser.parse(page(1900, 13, 800, 0.3), 2.0)
    assert [e for e in events if isinstance(e, Progress)] == [Progress(2.0, "n", 3, 900, None)]
    (tpot,) = [e for e in events if isinstance(e, LatencyBatch)]
    assert (tpot.metric, tpot.values_s.tolist()) == ("tpot", [0.005])
    assert tpot.counts is not None
    assert tpot.counts.tolist() == [300]
    assert parser.gauges["n"]["kv_cache_usage"] == pytest.approx(0.3)


def test_a_preset_that_recognises_nothing_says_so_once_naming_what_it_saw() -> None:
    dcgm = (PROM / "datadog-dcgm-t4-a10g.txt").read_text()  # a real dcgm-exporter page, read as vLLM
    parser = MetricsScrapeParser("vllm", "n")
    events = parser.parse(dcgm, 1.0)
    (notice,) = [e for e in events if isinstance(e, Notice)]
    assert "vllm preset recognises none of this scrape's metrics" in notice.message
    assert "DCGM_FI_DEV_" in notice.message
    assert not [e for e in events if isinstance(e, Progress | LatencyBatch)]
    assert not [e for e in parser.parse(dcgm, 2.0) if isinstance(e, Notice)]  # once, not every scrape
    quiet = MetricsScrapeParser("vllm", "n")  # an idle but recognised vLLM page is no news
    assert not [e for e in quiet.parse((PROM / "vllm_metrics.txt").read_text(), 1.0) if isinstance(e, Notice)]
