"""The ``dynamo`` (NVIDIA Dynamo's frontend) and ``tgi`` (Hugging Face TGI) metrics presets against the
projects' own definitions, and on busy pages written from them.

The presets are also read on pages the real programs served (test_dynamo_tgi_real_scrapes.py); those two
pages are idle or cut to a few families, so the scrapes here, written from the projects' own definitions
(tests/data/sources/README.md: Dynamo's ``prometheus_names.rs`` and ``http/service/metrics.rs`` for
families, types and the ``model`` label; TGI's metrics reference and its router's histogram buckets,
``0.0001 * 1.5^k``), cover what they lack: two pages of a server at work, the output-token families.
Every name a preset reads is checked against those files (or the real page that holds it), and the
figures against the scrapes' own numbers.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import pytest

from tokenwatch.base.events import EngineQueue, LatencyBatch, Notice, Progress
from tokenwatch.sources.metric_catalogue import PRESETS
from tokenwatch.sources.prometheus_metrics import MetricsScrapeParser

from .conftest import DATA

PROM = DATA / "prometheus"
TGI_DOC = (PROM / "tgi-metrics-reference.md").read_text()
DYNAMO_NAMES = {
    line.split()[0]: line.split()[1]
    for line in (PROM / "dynamo-frontend-metric-names.txt").read_text().splitlines()
    if line and not line.startswith("#")
}
# The one name a preset reads that Dynamo's source does not define: a real frontend's page holds it
# (tests/data/peers/dynamo), a counter of successful requests, and prometheus_client's "_total" form of it.
DYNAMO_NAMES.update(
    {
        "dynamo_frontend_request_success_count": "counter",
        "dynamo_frontend_request_success_count_total": "counter",
    }
)
TGI_TYPES = {m[0]: m[1].lower() for m in re.findall(r"\| `(tgi_\w+)`\s*\|[^|]*\|\s*(\w+)\s*\|", TGI_DOC)}
TGI_DURATION_BUCKETS = [0.0001 * 1.5**k for k in range(1, 36)]  # router/src/server.rs


def family_of(sample: str, types: dict[str, str]) -> tuple[str, str]:
    """The family a sample name belongs to (``x_sum`` -> ``x``), and its documented type."""
    for suffix in ("", "_sum", "_count", "_bucket", "_total"):
        if suffix and not sample.endswith(suffix):
            continue
        base = sample[: len(sample) - len(suffix)] if suffix else sample
        if base in types:
            return base, types[base]
        if f"{base}_total" in types and suffix == "":
            return f"{base}_total", types[f"{base}_total"]
    raise AssertionError(f"{sample} is in neither project's list")


@pytest.mark.parametrize("name", ["dynamo", "tgi"])
def test_every_name_the_preset_reads_is_the_projects_own(name: str) -> None:
    types = DYNAMO_NAMES if name == "dynamo" else TGI_TYPES
    assert len(types) >= 12
    for sample in PRESETS[name].sample_names:
        family, kind = family_of(sample, types)
        if family in (sample, sample.removesuffix("_total")):  # the sample is the family's own name
            assert kind in ("counter", "gauge"), sample
        elif sample.endswith(("_sum", "_count", "_bucket")):
            assert kind == "histogram", sample
        elif name == "tgi" and sample.startswith("tgi_request_success"):
            assert kind == "counter", sample
        else:
            assert kind in ("counter", "gauge"), sample


def _histogram(name: str, labels: str, bounds: Sequence[float], values: Sequence[float]) -> list[str]:
    counts = [sum(1 for v in values if v <= b) for b in bounds]
    lines = [f"# TYPE {name} histogram"]
    lines += [f'{name}_bucket{{{labels}le="{b:g}"}} {c}' for b, c in zip(bounds, counts, strict=True)]
    lines.append(f'{name}_bucket{{{labels}le="+Inf"}} {len(values)}')
    lines.append(f"{name}_sum{{{labels.rstrip(',')}}} {sum(values)}")
    lines.append(f"{name}_count{{{labels.rstrip(',')}}} {len(values)}")
    return lines


def tgi_scrape(
    generated: list[int], inputs: list[int], per_token_s: list[float], queue: int, batch: int
) -> str:
    """TGI's router page after len(generated) successful requests (the Rust exporter's text form)."""
    lines = ["# TYPE tgi_request_success counter", f"tgi_request_success {len(generated)}"]
    lines += _histogram("tgi_request_generated_tokens", "", [20.48 * (k + 1) for k in range(100)], generated)
    lines += _histogram("tgi_request_input_length", "", [10.24 * (k + 1) for k in range(100)], inputs)
    lines += _histogram("tgi_request_mean_time_per_token_duration", "", TGI_DURATION_BUCKETS, per_token_s)
    lines += _histogram("tgi_request_duration", "", TGI_DURATION_BUCKETS, [p * 50 for p in per_token_s])
    lines += ["# TYPE tgi_queue_size gauge", f"tgi_queue_size {queue}"]
    lines += ["# TYPE tgi_batch_current_size gauge", f"tgi_batch_current_size {batch}"]
    return "\n".join(lines) + "\n"


def test_tgi_tokens_requests_latency_and_queue() -> None:
    parser = MetricsScrapeParser("tgi", "tgi-node")
    first = parser.parse(tgi_scrape([100, 200], [50, 60], [0.02, 0.03], 0, 2), 1.0)
    assert [e for e in first if isinstance(e, Progress)] == [Progress(1.0, "tgi-node", 0, 0, 0)]  # baseline
    generated, inputs, per_token = (
        [100, 200, 150, 410, 64],
        [50, 60, 70, 80, 90],
        [0.02, 0.03, 0.025, 0.04, 0.05],
    )
    events = parser.parse(tgi_scrape(generated, inputs, per_token, 7, 16), 2.0)
    (progress,) = [e for e in events if isinstance(e, Progress)]
    assert progress == Progress(2.0, "tgi-node", 3, 150 + 410 + 64, 70 + 80 + 90)
    latency = {e.metric: e for e in events if isinstance(e, LatencyBatch)}
    assert set(latency) == {"tpot", "e2e"}  # TGI has no time-to-first-token metric: TTFT stays unknown
    assert latency["tpot"].counts is not None
    assert int(np.sum(latency["tpot"].counts)) == 3
    (queue,) = [e for e in events if isinstance(e, EngineQueue)]
    assert (queue.running, queue.waiting) == (16.0, 7.0)
    assert not [e for e in events if isinstance(e, Notice)]


def dynamo_scrape(outputs: list[int], inputs: list[int], ttft_s: list[float], *, with_counter: bool) -> str:
    """A Dynamo frontend page (model label, prometheus crate text) after len(outputs) finished requests."""
    model = 'model="Qwen/Qwen3-0.6B",'
    lines = [
        "# TYPE dynamo_frontend_requests_total counter",
        'dynamo_frontend_requests_total{model="Qwen/Qwen3-0.6B",endpoint="chat_completions",'
        f'request_type="stream",status="success",error_type=""}} {len(outputs)}',
        'dynamo_frontend_requests_total{model="Qwen/Qwen3-0.6B",endpoint="chat_completions",'
        'request_type="stream",status="error",error_type="internal"} 4',
        "# TYPE dynamo_frontend_inflight_requests gauge",
        'dynamo_frontend_inflight_requests{model="Qwen/Qwen3-0.6B"} 12',
        "# TYPE dynamo_frontend_queued_requests gauge",
        'dynamo_frontend_queued_requests{model="Qwen/Qwen3-0.6B"} 3',
    ]
    if with_counter:
        lines += ["# TYPE dynamo_frontend_output_tokens_total counter"]
        lines += [f'dynamo_frontend_output_tokens_total{{model="Qwen/Qwen3-0.6B"}} {sum(outputs) + 37}']
    osl_bounds = [50.0 * (32000 / 50) ** (k / 9) for k in range(10)]
    isl_bounds = [50.0 * (128000 / 50) ** (k / 11) for k in range(12)]
    ttft_bounds = [0.001 * (480 / 0.001) ** (k / 17) for k in range(18)]
    lines += _histogram("dynamo_frontend_output_sequence_tokens", model, osl_bounds, outputs)
    lines += _histogram("dynamo_frontend_input_sequence_tokens", model, isl_bounds, inputs)
    lines += _histogram("dynamo_frontend_time_to_first_token_seconds", model, ttft_bounds, ttft_s)
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("with_counter", [True, False], ids=["output_tokens_total", "older, histogram sum"])
def test_dynamo_frontend_tokens_finished_requests_and_ttft(with_counter: bool) -> None:
    parser = MetricsScrapeParser("dynamo", "frontend")
    parser.parse(dynamo_scrape([300], [1000], [0.2], with_counter=with_counter), 1.0)
    outputs, inputs, ttft = [300, 500, 700], [1000, 2000, 3000], [0.2, 0.35, 0.5]
    events = parser.parse(dynamo_scrape(outputs, inputs, ttft, with_counter=with_counter), 2.0)
    (progress,) = [e for e in events if isinstance(e, Progress)]
    # Tokens from either family grow by the two new requests' 1,200; errors are not finished samples.
    assert progress == Progress(2.0, "frontend", 2, 1200, 5000)
    (first_token,) = [e for e in events if isinstance(e, LatencyBatch) and e.metric == "ttft"]
    assert first_token.counts is not None
    assert int(np.sum(first_token.counts)) == 2
    (queue,) = [e for e in events if isinstance(e, EngineQueue)]
    assert (queue.running, queue.waiting) == (12.0, 3.0)


def test_another_servers_page_says_the_preset_recognises_none_of_it() -> None:
    page = (PROM / "vllm_metrics.txt").read_text()
    for name in ("dynamo", "tgi"):
        events = MetricsScrapeParser(name, "n").parse(page, 1.0)
        (said,) = [e.message for e in events if isinstance(e, Notice)]
        assert f"the {name} preset recognises none of this scrape's metrics" in said
