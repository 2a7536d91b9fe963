"""The one catalogue of Prometheus metric names: what it offers each path, and tokenwatch's own names."""

from __future__ import annotations

import pytest

from tokenwatch.base.events import GPU_METRICS
from tokenwatch.frontends.metrics.families import GPU_FAMILIES, PREFIX
from tokenwatch.sources.metric_catalogue import (
    GPU_PRESET_NAMES,
    PRESETS,
    QUERY_PROGRESS_PRESET_NAMES,
    SCRAPE_PROGRESS_PRESET_NAMES,
    GpuRead,
    preset,
)


def test_what_each_path_offers() -> None:
    assert set(PRESETS) == {"vllm", "sglang", "trtllm", "dynamo", "tgi", "aiperf", "dcgm", "tokenwatch"}
    assert SCRAPE_PROGRESS_PRESET_NAMES == (
        "vllm",
        "sglang",
        "trtllm",
        "dynamo",
        "tgi",
        "aiperf",
    )  # node-local
    assert GPU_PRESET_NAMES == ("dcgm", "tokenwatch")
    # those with token counters (Dynamo's and TGI's include histogram sums, which only grow)
    assert QUERY_PROGRESS_PRESET_NAMES == ("vllm", "sglang", "dynamo", "tgi", "tokenwatch")
    for entry in PRESETS.values():
        assert set(entry.gpu) <= set(GPU_METRICS)
    with pytest.raises(ValueError, match=r"unknown metrics preset 'x' \(known: aiperf, dcgm, dynamo, sglang"):
        preset("x")


def test_tokenwatch_preset_reads_what_the_exporter_serves() -> None:
    """Each GPU family tokenwatch serves (in base units) reads back as the core's column."""
    reads = PRESETS["tokenwatch"].gpu
    assert set(reads) == {column for _, _, column, _ in GPU_FAMILIES}
    for name, _, column, scale in GPU_FAMILIES:
        (read,) = reads[column]
        assert read.families == (f"{PREFIX}_{name}",)
        value = 1234.5
        assert read.read({f"{PREFIX}_{name}": value * scale}) == pytest.approx(value, rel=1e-12)


def test_a_read_and_its_promql() -> None:
    total = GpuRead(("used", "free"), ("reserved",))
    assert total.read({"used": 1.0, "free": 2.0}) == 3.0
    assert total.read({"used": 1.0, "free": 2.0, "reserved": 4.0}) == 7.0
    assert total.read({"used": 1.0}) is None
    assert total.promql() == "(used + free + (reserved or used * 0))"
    busy = GpuRead(("ratio",), times=100.0)
    assert busy.read({"ratio": 0.25}) == 25.0
    assert busy.promql() == "ratio * 100"
    clock = GpuRead(("hertz",), per=1e6)
    assert clock.read({"hertz": 1.98e9}) == 1980.0
    assert clock.promql() == "hertz / 1000000"
