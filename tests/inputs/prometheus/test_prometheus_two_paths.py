"""One histogram, two ways in: a scraped /metrics page and a Prometheus query answer must give the same
latency batches (the scrape path used to read bucket midpoints, the query path geometric ones)."""

from __future__ import annotations

import math

import numpy as np
import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenwatch.base.events import LatencyBatch
from tokenwatch.inputs.prometheus.answers import parse_response
from tokenwatch.inputs.prometheus.query import PrometheusQueryCollector
from tokenwatch.sources.prometheus_metrics import MetricsScrapeParser

# vLLM's TTFT bounds (log-spaced), +Inf last
BOUNDS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, math.inf)


def _le(bound: float) -> str:
    return "+Inf" if math.isinf(bound) else repr(bound)


def _exposition(cumulative: list[int]) -> str:
    lines = ["# TYPE vllm:time_to_first_token_seconds histogram"]
    for bound, count in zip(BOUNDS, cumulative, strict=True):
        lines.append(f'vllm:time_to_first_token_seconds_bucket{{le="{_le(bound)}",model_name="m"}} {count}.0')
    lines.append(f'vllm:time_to_first_token_seconds_count{{model_name="m"}} {cumulative[-1]}.0')
    return "\n".join(lines) + "\n"


def _api_answer(cumulative: list[int], t: float) -> bytes:
    """The answer to ``sum by (node, le) (vllm:time_to_first_token_seconds_bucket)``, as sent."""
    result = [
        {"metric": {"node": "node00", "le": _le(b)}, "value": [t, str(float(c))]}
        for b, c in zip(BOUNDS, cumulative, strict=True)
    ]
    return orjson.dumps({"status": "success", "data": {"resultType": "vector", "result": result}})


def _both_paths(reads: list[list[int]]) -> list[tuple[LatencyBatch | None, LatencyBatch | None]]:
    scrape = MetricsScrapeParser("vllm", "node00")
    query = PrometheusQueryCollector(
        url="http://127.0.0.1:1", nodes=("node00",), gpus_per_node=1, gpu=False, now=lambda: 0.0
    )
    out = []
    for k, cumulative in enumerate(reads):
        t = float(k + 1)
        scraped = [e for e in scrape.parse(_exposition(cumulative), t) if isinstance(e, LatencyBatch)]
        answers = query.latency_events(t, {"ttft": parse_response(_api_answer(cumulative, t))})
        queried = [e for e in answers if isinstance(e, LatencyBatch)]
        assert len(queried) == len(answers) <= 1
        assert len(scraped) <= 1
        out.append((scraped[0] if scraped else None, queried[0] if queried else None))
    return out


def _expected(before: list[int], now: list[int]) -> list[tuple[float, int]]:
    """The rule, computed here on its own: new observations per bucket, each at the geometric middle
    of its bounds (half the bound for the first bucket, the last finite bound for +Inf)."""
    out = []
    for k, bound in enumerate(BOUNDS):
        new = (now[k] - (now[k - 1] if k else 0)) - (before[k] - (before[k - 1] if k else 0))
        if new <= 0:
            continue
        lower = BOUNDS[k - 1] if k else 0.0
        value = lower if math.isinf(bound) else (math.sqrt(lower * bound) if lower else bound / 2)
        out.append((value, new))
    return out


def _pairs(batch: LatencyBatch | None) -> list[tuple[float, int]]:
    if batch is None:
        return []
    assert batch.counts is not None
    return list(zip(batch.values_s.tolist(), batch.counts.tolist(), strict=True))


def test_the_same_histogram_reads_the_same_both_ways() -> None:
    first = [0, 0, 0, 112, 211, 211, 213, 213, 220, 230, 231, 231, 232, 232, 233]
    second = [0, 1, 1, 150, 260, 262, 270, 270, 290, 300, 301, 301, 303, 303, 310]
    third = [1, 2, 2, 190, 300, 302, 310, 310, 330, 340, 341, 341, 343, 343, 350]
    results = _both_paths([first, second, third])
    assert results[0] == (None, None)  # both ways, the first reading is the baseline: nothing new yet
    results = results[1:]
    for (scraped, queried), (before, now) in zip(results, [(first, second), (second, third)], strict=True):
        assert scraped is not None
        assert queried is not None
        assert (scraped.t, scraped.node, scraped.metric) == (queried.t, queried.node, queried.metric)
        assert np.array_equal(scraped.values_s, queried.values_s)
        assert scraped.counts is not None
        assert queried.counts is not None
        assert np.array_equal(scraped.counts, queried.counts)
        for array in (scraped.values_s, scraped.counts, queried.values_s, queried.counts):
            assert not array.flags.writeable  # event arrays are read-only once built
        expected = _expected(before, now)
        assert [c for _, c in _pairs(scraped)] == [c for _, c in expected]
        np.testing.assert_allclose([v for v, _ in _pairs(scraped)], [v for v, _ in expected], rtol=1e-12)
    # (0.1, 0.25] held 7, then 20: 13 new, read at sqrt(0.1 * 0.25) = 0.158 s (the old scrape rule: 0.175 s).
    named = [c for v, c in _pairs(results[0][0]) if math.isclose(v, math.sqrt(0.1 * 0.25))]
    assert named == [13]


@given(
    st.lists(
        st.lists(st.integers(0, 10_000), min_size=len(BOUNDS), max_size=len(BOUNDS)), min_size=1, max_size=4
    )
)
@settings(max_examples=150, deadline=None)
def test_any_reads_agree_both_ways(per_bucket_reads: list[list[int]]) -> None:
    # Each read: per-bucket counts made cumulative (a restart happens whenever a bucket shrinks).
    reads = [np.cumsum(r).tolist() for r in per_bucket_reads]
    for scraped, queried in _both_paths(reads):
        assert _pairs(scraped) == _pairs(queried)
