"""The ``dynamo`` and ``tgi`` presets on pages their real programs served (tests/data/peers/README.md):
a Hugging Face TGI router's ``/metrics`` (Datadog's TGI integration fixture) and an NVIDIA Dynamo
frontend's (AIPerf's developers' capture). Every figure is checked against the page's own numbers,
read here with a regular expression rather than the product's parser.

Both pages are read as counting from the run's start (``baseline=False``), so one page carries
figures; attached to a running server, a first page is the baseline and counts nothing.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

from tokenwatch.base.events import EngineQueue, Event, LatencyBatch, Notice, Progress
from tokenwatch.sources.prometheus_metrics import MetricsScrapeParser

PEERS = Path(__file__).resolve().parent.parent / "data" / "peers"
TGI = (PEERS / "tgi" / "datadog-payload.excerpt.prom").read_text()
DYNAMO = (PEERS / "dynamo" / "aiperf-frontend.excerpt.prom").read_text()
PAGES = {"tgi": TGI, "dynamo": DYNAMO}
_SAMPLE = re.compile(r"^([a-zA-Z_:][\w:]*)(?:\{([^}]*)\})? (\S+)$", re.MULTILINE)


def value(page: str, name: str) -> float:
    """The sum of the page's samples called ``name`` (labels ignored)."""
    found = [float(v) for n, _, v in _SAMPLE.findall(page) if n == name]
    assert found, name
    return sum(found)


def buckets(page: str, family: str) -> tuple[list[float], list[int]]:
    """The family's bucket bounds and per-bucket counts (the differences of the cumulative ones)."""
    pairs = [
        (float(re.search(r'le="([^"]+)"', labels).group(1)), float(v))  # type: ignore[union-attr]
        for n, labels, v in _SAMPLE.findall(page)
        if n == family + "_bucket"
    ]
    pairs.sort()
    cumulative = [c for _, c in pairs]
    return [b for b, _ in pairs], [
        round(c - p) for c, p in zip(cumulative, [0.0, *cumulative[:-1]], strict=True)
    ]


def expected_batch(page: str, family: str) -> list[tuple[float, int]]:
    """Each non-empty bucket as (latency, count): the geometric middle of (lower, upper], half the
    bound of a first bucket (0, upper], the last finite bound for (last, +Inf]."""
    bounds, counts = buckets(page, family)
    out = []
    for k, (upper, count) in enumerate(zip(bounds, counts, strict=True)):
        lower = bounds[k - 1] if k else 0.0
        if count:
            read = lower if math.isinf(upper) else math.sqrt(lower * upper) if lower > 0 else upper / 2
            out.append((read, count))
    return out


def read(preset: str, page: str, *, baseline: bool | None = None) -> list[Event]:
    return MetricsScrapeParser(preset, preset, baseline=baseline).parse(page, 1.0)


def batches(events: list[Event]) -> dict[str, list[tuple[float, int]]]:
    out: dict[str, list[tuple[float, int]]] = {}
    for e in events:
        if isinstance(e, LatencyBatch):
            assert e.counts is not None
            out[e.metric] = [(float(v), int(c)) for v, c in zip(e.values_s, e.counts, strict=True)]
    return out


def test_tgi_real_page_tokens_requests_latency_and_queue() -> None:
    events = read("tgi", TGI, baseline=False)
    assert not [e.message for e in events if isinstance(e, Notice)]
    (progress,) = [e for e in events if isinstance(e, Progress)]
    assert progress == Progress(
        1.0,
        "tgi",
        round(value(TGI, "tgi_request_success")),  # 109; tgi_request_count's 111 counts 2 refused
        round(value(TGI, "tgi_request_generated_tokens_sum")),  # 3,423
        round(value(TGI, "tgi_request_input_length_sum")),  # 662
    )
    assert progress.samples_done != value(TGI, "tgi_request_count")
    got = batches(events)
    assert set(got) == {"tpot", "e2e"}  # TGI has no time-to-first-token family: TTFT stays unknown
    assert got["tpot"] == pytest.approx(expected_batch(TGI, "tgi_request_mean_time_per_token_duration"))
    assert got["e2e"] == pytest.approx(expected_batch(TGI, "tgi_request_duration"))
    assert sum(c for _, c in got["e2e"]) == value(TGI, "tgi_request_duration_count") == 109
    (queue,) = [e for e in events if isinstance(e, EngineQueue)]
    assert (queue.running, queue.waiting) == (
        value(TGI, "tgi_batch_current_size"),
        value(TGI, "tgi_queue_size"),
    )
    assert math.isnan(queue.kv_cache_pct)


def test_dynamo_real_page_reads_what_it_has_and_says_what_it_lacks() -> None:
    """The page holds the input-length and inter-token histograms, the in-flight gauge and a counter
    of successful requests, but neither output-token family: output tokens are unknown, said once."""
    events = read("dynamo", DYNAMO, baseline=False)
    (progress,) = [e for e in events if isinstance(e, Progress)]
    assert progress == Progress(
        1.0,
        "dynamo",
        round(value(DYNAMO, "dynamo_frontend_request_success_count")),  # 170,450
        None,  # unknown, not zero
        round(value(DYNAMO, "dynamo_frontend_input_sequence_tokens_sum")),  # 18,408,629
    )
    (said,) = [e.message for e in events if isinstance(e, Notice)]
    assert said == (
        "metrics:dynamo: no dynamo_frontend_output_tokens_total or dynamo_frontend_output_sequence_tokens_sum"
        " in this scrape: output tokens unknown"
    )
    got = batches(events)
    assert set(got) == {"tpot"}
    assert got["tpot"] == pytest.approx(expected_batch(DYNAMO, "dynamo_frontend_inter_token_latency_seconds"))
    assert sum(c for _, c in got["tpot"]) == value(
        DYNAMO, "dynamo_frontend_inter_token_latency_seconds_count"
    )
    (queue,) = [e for e in events if isinstance(e, EngineQueue)]
    assert queue.running == value(DYNAMO, "dynamo_frontend_inflight_requests")
    assert math.isnan(queue.waiting)  # no queued-requests gauge on the page: unknown


@pytest.mark.parametrize("preset", ["tgi", "dynamo"])
def test_attached_to_the_running_server_the_first_page_is_the_baseline(preset: str) -> None:
    events = read(preset, PAGES[preset])
    (progress,) = [e for e in events if isinstance(e, Progress)]
    known = (progress.samples_done, progress.tokens_done, progress.prompt_tokens_done)
    assert all(v in (0, None) for v in known)
    assert not [e for e in events if isinstance(e, LatencyBatch)]


# --------------------------------------------------------------------------- bad input on the real pages
COUNTER = {"tgi": "tgi_request_generated_tokens_sum", "dynamo": "dynamo_frontend_input_sequence_tokens_sum"}
WHAT = {"tgi": "tokens_done", "dynamo": "prompt_tokens_done"}


def _replace_value(page: str, name: str, new: str) -> str:
    return re.sub(rf"^({re.escape(name)}(?:\{{[^}}]*\}})?) \S+$", rf"\1 {new}", page, flags=re.MULTILINE)


@pytest.mark.parametrize("preset", ["tgi", "dynamo"])
def test_a_garbage_line_costs_that_line_named_with_its_source(preset: str) -> None:
    lines = PAGES[preset].splitlines()
    lines.insert(3, "}{ not a sample at all")
    events = read(preset, "\n".join(lines) + "\n", baseline=False)
    said = [e.message for e in events if isinstance(e, Notice)]
    assert said[0] == f"metrics:{preset}: line 4: not a metric line, skipped: '}}{{ not a sample at all'"
    clean = read(preset, PAGES[preset], baseline=False)
    assert [e for e in events if isinstance(e, Progress)] == [e for e in clean if isinstance(e, Progress)]


@pytest.mark.parametrize("preset", ["tgi", "dynamo"])
@pytest.mark.parametrize("bad", ["NaN", "+Inf", "-5"])
def test_a_counter_that_is_not_a_count_is_unknown_and_said(preset: str, bad: str) -> None:
    name = COUNTER[preset]
    events = read(preset, _replace_value(PAGES[preset], name, bad), baseline=False)
    (progress,) = [e for e in events if isinstance(e, Progress)]
    assert getattr(progress, WHAT[preset]) is None  # never a guessed zero
    said = [e.message for e in events if isinstance(e, Notice)]
    assert f"metrics:{preset}: {name}: {float(bad)!r} is not a count, skipped" in said
    # The next page that reads a number counts it.
    later = MetricsScrapeParser(preset, preset, baseline=False)
    later.parse(_replace_value(PAGES[preset], name, bad), 1.0)
    (progress,) = [e for e in later.parse(PAGES[preset], 2.0) if isinstance(e, Progress)]
    assert getattr(progress, WHAT[preset]) == round(value(PAGES[preset], name))


def test_a_gauge_that_is_not_a_number_is_unknown_and_said() -> None:
    events = read("tgi", _replace_value(TGI, "tgi_queue_size", "NaN"), baseline=False)
    (queue,) = [e for e in events if isinstance(e, EngineQueue)]
    assert math.isnan(queue.waiting)
    assert queue.running == 0.0
    said = [e.message for e in events if isinstance(e, Notice)]
    assert said == ["metrics:tgi: tgi_queue_size: a value that is not a number, skipped"]


def test_a_missing_family_is_unknown_and_said_once() -> None:
    without = (
        "\n".join(line for line in TGI.splitlines() if "tgi_request_generated_tokens" not in line) + "\n"
    )
    parser = MetricsScrapeParser("tgi", "tgi", baseline=False)
    events = parser.parse(without, 1.0)
    (progress,) = [e for e in events if isinstance(e, Progress)]
    assert progress.tokens_done is None
    assert progress.samples_done == 109
    said = [e.message for e in events if isinstance(e, Notice)]
    assert said == ["metrics:tgi: no tgi_request_generated_tokens_sum in this scrape: output tokens unknown"]
    assert not [e for e in parser.parse(without, 2.0) if isinstance(e, Notice)]  # once, not every scrape


def test_histograms_of_the_real_pages_are_whole_and_rising() -> None:
    """The transcriptions hold together: cumulative buckets never fall, +Inf equals _count."""
    for page, families in (
        (
            TGI,
            (
                "tgi_request_duration",
                "tgi_request_mean_time_per_token_duration",
                "tgi_request_generated_tokens",
            ),
        ),
        (DYNAMO, ("dynamo_frontend_input_sequence_tokens", "dynamo_frontend_inter_token_latency_seconds")),
    ):
        for family in families:
            bounds, counts = buckets(page, family)
            assert min(counts) >= 0, family
            assert math.isinf(bounds[-1])
            assert sum(counts) == value(page, family + "_count"), family
            assert np.all(np.diff(bounds) > 0), family
