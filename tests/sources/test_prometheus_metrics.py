"""Prometheus scrapes: real vLLM /metrics dumps and dcgm-exporter output, then scrape-to-scrape deltas."""

from __future__ import annotations

import functools
import math
import re

import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tokenwatch.base.events import (
    GPU_METRICS,
    EngineQueue,
    GpuBatch,
    IntArray,
    LatencyBatch,
    Notice,
    Progress,
    RunStarted,
)
from tokenwatch.core import RackCore
from tokenwatch.sources.prometheus_metrics import MetricsScrapeParser

from .conftest import DATA

PROM = DATA / "prometheus"
BLOOM = (PROM / "IBM-vllm_pr-18_bloom-560m.excerpt.prom").read_text()


def _buckets(text: str, family: str) -> list[tuple[float, float]]:
    """(le, cumulative count) pairs read with a plain regex, to check the parser against."""
    pattern = re.compile(rf'^{re.escape(family)}_bucket\{{le="([^"]+)"[^}}]*\}} (\S+)$', re.M)
    return [(float(le), float(v)) for le, v in pattern.findall(text)]


def _counts(batch: LatencyBatch) -> IntArray:
    """The weights of a histogram delta (the parser always sends them)."""
    assert batch.counts is not None
    return batch.counts


def _middle(lower: float, upper: float) -> float:
    """The bucket rule spelled out: geometric middle, half the bound for the first bucket."""
    return math.sqrt(lower * upper) if lower > 0 else upper / 2


@pytest.mark.parametrize("name", ["vllm_metrics.txt", "tinyllama_metrics.txt"])
def test_real_idle_vllm_dumps(name: str) -> None:
    parser = MetricsScrapeParser("vllm", "node00")
    events = parser.parse((PROM / name).read_text(), 5.0)
    # An idle server: zero work, no latencies, an empty queue (its gauges read 0.0 on lines 39-45).
    assert events == [Progress(5.0, "node00", 0, 0, 0), EngineQueue(5.0, "node00", 0.0, 0.0, 0.0)]
    assert parser.gauges == {"node00": {"running": 0.0, "waiting": 0.0, "kv_cache_usage": 0.0}}


def test_real_busy_vllm_excerpt() -> None:
    parser = MetricsScrapeParser("vllm", "node00", baseline=False)  # counted in full: parsing alone
    events = parser.parse(BLOOM, 1.0)
    progress = [e for e in events if isinstance(e, Progress)]
    assert progress == [Progress(1.0, "node00", None, 218152, 1196)]
    (ttft,) = [e for e in events if isinstance(e, LatencyBatch)]
    assert ttft.metric == "ttft"
    cumulative = _buckets(BLOOM, "vllm:time_to_first_token_seconds")
    bounds = [0.0] + [le for le, _ in cumulative]
    per_bucket = np.diff([0.0] + [c for _, c in cumulative])
    expected = [(_middle(bounds[i], bounds[i + 1]), int(n)) for i, n in enumerate(per_bucket) if n > 0]
    assert list(zip(ttft.values_s.tolist(), _counts(ttft).tolist(), strict=True)) == pytest.approx(expected)
    assert int(_counts(ttft).sum()) == 213


def _bump(text: str, generation: float, bucket_extra: dict[str, int]) -> str:
    text = text.replace("218152.0", f"{generation:.1f}")
    for le, extra in bucket_extra.items():
        pattern = re.compile(
            rf'(vllm:time_to_first_token_seconds_bucket\{{le="{re.escape(le)}"[^}}]*\}}) (\S+)'
        )
        text = pattern.sub(functools.partial(_add_to_value, extra=extra), text)
    return text


def _add_to_value(match: re.Match[str], extra: int) -> str:
    return f"{match.group(1)} {float(match.group(2)) + extra}"


def test_the_first_scrape_of_a_busy_server_is_a_baseline() -> None:
    """Attaching to a server that has run for hours: its lifetime counters are not this run's work."""
    parser = MetricsScrapeParser("vllm", "node00")
    events = parser.parse(BLOOM, 1.0)
    # 218,152 lifetime tokens, none of them ours; the excerpt has no finished-request counter: unknown, said.
    assert [e for e in events if isinstance(e, Progress)] == [Progress(1.0, "node00", None, 0, 0)]
    (said,) = [e.message for e in events if isinstance(e, Notice)]
    assert said == "metrics:vllm: no vllm:request_success_total in this scrape: finished requests unknown"


def test_deltas_between_scrapes_and_counter_resets() -> None:
    parser = MetricsScrapeParser("vllm", "node00")
    parser.parse(BLOOM, 1.0)  # the baseline: 218,152 tokens, 213 first tokens
    # 30 more first tokens land in (0.02, 0.04]: every cumulative bucket from 0.04 up grows by 30.
    second = _bump(BLOOM, 220000.0, {"0.04": 30, "0.06": 30, "0.08": 30})
    events = parser.parse(second, 2.0)
    (ttft,) = [e for e in events if isinstance(e, LatencyBatch)]
    assert ttft.values_s.tolist() == pytest.approx([math.sqrt(0.02 * 0.04)])
    assert _counts(ttft).tolist() == [30]
    assert [e.tokens_done for e in events if isinstance(e, Progress)] == [220000 - 218152]
    # The server restarts: counters fall to small values; nothing is lost or counted twice.
    restarted = _bump(BLOOM, 500.0, {})
    events = parser.parse(restarted, 3.0)
    assert [e.tokens_done for e in events if isinstance(e, Progress)] == [220000 - 218152 + 500]
    (ttft,) = [e for e in events if isinstance(e, LatencyBatch)]
    assert int(_counts(ttft).sum()) == 213  # a reset histogram counts from zero again: all new
    # Same scrape again: no new observations, progress holds.
    events = parser.parse(restarted, 4.0)
    assert not [e for e in events if isinstance(e, LatencyBatch)]
    assert [e.tokens_done for e in events if isinstance(e, Progress)] == [220000 - 218152 + 500]


def test_attaching_to_a_long_running_server_shows_its_rate_not_its_lifetime() -> None:
    """The issue's case: a server making 86.5 tok/s, scraped every 5 s from when we attach. The core's
    10-s rate must be 86.5, not the lifetime counters spread over the first seconds."""
    core = RackCore()
    core.ingest(RunStarted(0.0, "t", "Server", ("node00",), 1, None, None, "live", 0.0))
    parser = MetricsScrapeParser("vllm", "node00")
    rate = 86.5
    for k in range(7):
        t = 1.0 + 5.0 * k
        for event in parser.parse(_bump(BLOOM, 218152.0 + rate * 5.0 * k, {}), t):
            core.ingest(event)
        shown = core.snapshot().aggregate.tokens_per_s
        if k >= 1:
            assert shown <= rate * 1.01  # never a spike (without the baseline: 36,430 tok/s at k=1)
        if k >= 2:  # the 10-s window lies wholly after the first scrape
            assert shown == pytest.approx(rate, rel=0.01)
    assert int(core.state.tokens[0]) == round(rate * 5.0 * 6)


def test_histogram_deltas_merge_into_the_core() -> None:
    core = RackCore()
    core.ingest(RunStarted(0.0, "t", "Server", ("node00",), 1, None, None, "live", 0.0))
    parser = MetricsScrapeParser("vllm", "node00", baseline=False)
    for event in parser.parse(BLOOM, 1.0) + parser.parse(_bump(BLOOM, 220000.0, {"0.08": 5}), 2.0):
        core.ingest(event)
    hist = core.state.rack_latency["ttft"]
    assert hist.total == 218
    p50, p99 = hist.quantiles([0.5, 0.99])
    assert p50 == pytest.approx(math.sqrt(0.01 * 0.02), rel=0.02)  # 112 of 218 sit in (0.01, 0.02]
    assert p99 == pytest.approx(math.sqrt(0.06 * 0.08), rel=0.02)
    assert int(core.state.tokens[0]) == 220000


def test_series_are_summed_and_reset_one_by_one() -> None:
    def scrape(a: float, b: float) -> str:
        return (
            "# TYPE vllm:generation_tokens_total counter\n"
            f'vllm:generation_tokens_total{{engine="0",model_name="m"}} {a}\n'
            f'vllm:generation_tokens_total{{engine="1",model_name="m"}} {b}\n'
            "# TYPE vllm:request_success_total counter\n"
            f'vllm:request_success_total{{engine="0",finished_reason="stop"}} {a / 100}\n'
            f'vllm:request_success_total{{engine="0",finished_reason="length"}} {b / 100}\n'
        )

    parser = MetricsScrapeParser("vllm", "n", baseline=False)
    first = next(e for e in parser.parse(scrape(1000, 2000), 1.0) if isinstance(e, Progress))
    assert isinstance(first, Progress)
    assert (first.samples_done, first.tokens_done) == (30, 3000)
    second = parser.parse(scrape(1500, 100), 2.0)[0]  # engine 1 restarted
    assert isinstance(second, Progress)
    assert (second.samples_done, second.tokens_done) == (36, 1500 + 2000 + 100)


def test_node_label_and_unknown_nodes() -> None:
    text = BLOOM.replace(
        'model_name="bigscience/bloom-560m"', 'instance="gpu-node-3",model_name="bigscience"'
    )
    parser = MetricsScrapeParser("vllm", node_label="instance", nodes=("gpu-node-1", "gpu-node-2"))
    events = parser.parse(text, 1.0)
    (notice,) = events
    assert isinstance(notice, Notice)
    assert "gpu-node-3" in notice.message
    assert parser.parse(text, 2.0) == []  # reported once
    parser = MetricsScrapeParser("vllm", node_label="instance")
    assert {e.node for e in parser.parse(text, 1.0) if isinstance(e, Progress | LatencyBatch)} == {
        "gpu-node-3"
    }


def test_bad_lines_cost_one_line_not_the_scrape() -> None:
    lines = BLOOM.splitlines()
    lines.insert(4, 'vllm:prompt_tokens_total{model_name="x} 12')
    lines.insert(9, "\x00\x01 binary junk")
    parser = MetricsScrapeParser("vllm", "n", baseline=False)
    events = parser.parse("\n".join(lines), 1.0)
    notices = [e.message for e in events if isinstance(e, Notice)]
    assert len(notices) == 3
    assert "line 5:" in notices[0]
    assert "line 10:" in notices[1]
    assert "no vllm:request_success_total in this scrape" in notices[2]  # the excerpt has none
    assert [e for e in events if isinstance(e, Progress)] == [Progress(1.0, "n", None, 218152, 1196)]
    assert sum(int(_counts(e).sum()) for e in events if isinstance(e, LatencyBatch)) == 213


def test_sglang_and_trtllm_presets() -> None:
    # Hand-written scrapes in each server's documented metric names (no real dumps were available).
    sglang = (
        'sglang:prompt_tokens_total{model_name="m"} 812.0\n'
        'sglang:generation_tokens_total{model_name="m"} 7557.0\n'
        'sglang:num_requests_total{model_name="m"} 42.0\n'
        'sglang:num_running_reqs{model_name="m"} 3.0\n'
        'sglang:e2e_request_latency_seconds_bucket{le="1.0",model_name="m"} 40.0\n'
        'sglang:e2e_request_latency_seconds_bucket{le="+Inf",model_name="m"} 42.0\n'
    )
    events = MetricsScrapeParser("sglang", "s", baseline=False).parse(sglang, 1.0)
    assert events[0] == Progress(1.0, "s", 42, 7557, 812)
    e2e = events[1]
    assert isinstance(e2e, LatencyBatch)
    assert e2e.metric == "e2e"
    assert e2e.values_s.tolist() == [0.5, 1.0]
    assert _counts(e2e).tolist() == [40, 2]
    trtllm = (
        'trtllm_request_success_total{finished_reason="stop"} 150.0\n'
        'trtllm_request_success_total{finished_reason="length"} 5.0\n'
        'trtllm_time_per_output_token_seconds_bucket{le="0.01"} 0.0\n'
        'trtllm_time_per_output_token_seconds_bucket{le="0.025"} 155.0\n'
    )
    events = MetricsScrapeParser("trtllm", "t", baseline=False).parse(trtllm, 1.0)
    assert events[0] == Progress(1.0, "t", 155, None, None)  # no token counter in trtllm-serve's metrics
    tpot = events[1]
    assert isinstance(tpot, LatencyBatch)
    assert tpot.metric == "tpot"
    assert tpot.values_s.tolist() == pytest.approx([math.sqrt(0.01 * 0.025)])


# dcgm-exporter field -> (GPU_METRICS column, factor to tokenwatch's unit), written out here apart
# from the catalogue, first choice first.
DCGM_MEANING = {
    "power_w": [("DCGM_FI_DEV_POWER_USAGE", 1.0)],
    "power_limit_w": [("DCGM_FI_DEV_POWER_MGMT_LIMIT", 1.0), ("DCGM_FI_DEV_ENFORCED_POWER_LIMIT", 1.0)],
    "sm_clock_mhz": [("DCGM_FI_DEV_SM_CLOCK", 1.0)],
    "mem_clock_mhz": [("DCGM_FI_DEV_MEM_CLOCK", 1.0)],
    "hbm_used_mib": [("DCGM_FI_DEV_FB_USED", 1.0)],
    "hbm_busy_pct": [("DCGM_FI_PROF_DRAM_ACTIVE", 100.0), ("DCGM_FI_DEV_MEM_COPY_UTIL", 1.0)],
    "util_pct": [("DCGM_FI_DEV_GPU_UTIL", 1.0)],
    "temp_c": [("DCGM_FI_DEV_GPU_TEMP", 1.0)],
    # mJ; prometheus_client names a counter family's samples with _total where the file does not
    "energy_j": [
        ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", 0.001),
        ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION_total", 0.001),
    ],
    "hbm_temp_c": [("DCGM_FI_DEV_MEMORY_TEMP", 1.0)],
    "xid": [("DCGM_FI_DEV_XID_ERRORS", 1.0)],
}


def _dcgm_expected(text: str, hosts: tuple[str, ...]) -> dict[tuple[int, int], dict[str, float]]:
    """(node index, gpu) -> column -> value, read with prometheus_client's parser and the table above."""
    read = {name for choices in DCGM_MEANING.values() for name, _ in choices} | {
        "DCGM_FI_DEV_FB_TOTAL",
        "DCGM_FI_DEV_FB_FREE",
        "DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
        "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS",
    }
    fields: dict[tuple[int, int], dict[str, float]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            host, gpu = s.labels.get("Hostname"), s.labels.get("gpu", "")
            if host in hosts and gpu.isdigit() and s.name in read:
                fields.setdefault((hosts.index(host), int(gpu)), {})[s.name] = s.value
    out: dict[tuple[int, int], dict[str, float]] = {}
    for key, got in fields.items():
        row = {}
        for column, choices in DCGM_MEANING.items():
            for name, factor in choices:
                if name in got:
                    row[column] = got[name] * factor
                    break
        if "DCGM_FI_DEV_FB_TOTAL" in got:
            row["hbm_total_mib"] = got["DCGM_FI_DEV_FB_TOTAL"]
        elif "DCGM_FI_DEV_FB_USED" in got and "DCGM_FI_DEV_FB_FREE" in got:
            row["hbm_total_mib"] = got["DCGM_FI_DEV_FB_USED"] + got["DCGM_FI_DEV_FB_FREE"]
        reasons = got.get("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", got.get("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"))
        row["throttle_reasons"] = reasons or 0.0
        out[key] = row
    return out


def _batch_rows(batch: GpuBatch) -> dict[tuple[int, int], dict[str, float]]:
    rows = {}
    for r, key in enumerate(zip(batch.node_index.tolist(), batch.gpu.tolist(), strict=True)):
        row = {c: float(v) for c, v in zip(GPU_METRICS, batch.values[r], strict=True) if not math.isnan(v)}
        row["throttle_reasons"] = float(batch.throttle_reasons[r])
        rows[key] = row
    return rows


def test_real_dcgm_exporter_scrapes() -> None:
    text = (PROM / "datadog-dcgm-t4-a10g.txt").read_text()
    hosts = ("424773df46e0", "551bdf382151", "ip-11111")
    parser = MetricsScrapeParser("dcgm", node_label="Hostname", nodes=hosts)
    events = parser.parse(text, 7.0)
    notices = [e for e in events if isinstance(e, Notice)]
    (batch,) = [e for e in events if isinstance(e, GpuBatch)]  # one batch per scrape, every node's GPUs
    assert batch.t == 7.0
    rows = _batch_rows(batch)
    assert rows == _dcgm_expected(text, hosts)
    # The figures the per-GPU samples had before (and a few by hand from the file):
    t4 = rows[(0, 0)]
    assert (t4["sm_clock_mhz"], t4["mem_clock_mhz"], t4["temp_c"], t4["power_w"]) == (300, 405, 25, 8.969)
    assert (t4["hbm_used_mib"], t4["hbm_total_mib"], t4["util_pct"]) == (0, 15109, 0)  # total = used + free
    other = rows[(1, 0)]
    assert (other["power_limit_w"], other["hbm_total_mib"], other["throttle_reasons"]) == (70.0, 15109.0, 1)
    assert "power_w" not in other
    assert rows[(2, 0)]["hbm_busy_pct"] == pytest.approx(0.0003)  # DRAM_ACTIVE 0.000003 of the time, in %
    for array in (batch.node_index, batch.gpu, batch.values, batch.throttle_reasons):
        assert not array.flags.writeable
    # The fixture's label-less dummy values cannot be placed on a node: one notice says so, once.
    assert len(notices) == 1
    assert "series without the 'Hostname' label skipped" in notices[0].message
    assert not [e for e in parser.parse(text, 8.0) if isinstance(e, Notice)]


def test_real_dcgm_v100_excerpt() -> None:
    text = (PROM / "NVIDIA-dcgm-exporter_issue-250_V100x4.excerpt.prom").read_text()
    events = MetricsScrapeParser("dcgm", node="r6i3n0", node_index=5).parse(text, 1.0)
    (batch,) = events
    assert isinstance(batch, GpuBatch)
    rows = _batch_rows(batch)
    expected = _dcgm_expected(text, ("r6i3n0",))
    assert rows == {(5, gpu): row for (_, gpu), row in expected.items()}  # the node's index as given
    assert sorted(gpu for _, gpu in rows) == [0, 2, 3]  # GPU 1 has only fields tokenwatch does not read
    assert rows[(5, 2)]["power_limit_w"] == 300.0
    assert rows[(5, 3)]["power_limit_w"] == 300.0
    assert rows[(5, 0)]["util_pct"] == 0.0


def test_constructor_errors() -> None:
    with pytest.raises(ValueError, match="unknown metrics preset 'x'"):
        MetricsScrapeParser("x", "n")
    with pytest.raises(ValueError, match="node_label"):
        MetricsScrapeParser("vllm")
    with pytest.raises(ValueError, match="by index"):
        MetricsScrapeParser("dcgm", node="n")  # a GPU batch needs the node's index
    with pytest.raises(ValueError, match="by index"):
        MetricsScrapeParser("dcgm", node_label="Hostname")


def _labelled(text: str, family: str, mig: bool) -> list[float]:
    """The values of ``family`` in a scrape, with (``mig``) or without a MIG instance label, by regex."""
    pattern = re.compile(rf"^{family}\{{([^}}]*)\}} (\S+)$", re.M)
    return [float(v) for labels, v in pattern.findall(text) if ("GPU_I_ID=" in labels) == mig]


def test_a_mig_gpu_reads_its_own_series_not_its_instances() -> None:
    # NVIDIA's dcgm-exporter docs: an A100 exporting its own series and one 1g.5gb instance's.
    text = (PROM / "dcgm-exporter-a100-mig.excerpt.prom").read_text()
    events = MetricsScrapeParser("dcgm", node="ub20-a100-k8s", node_index=0).parse(text, 1.0)
    (batch,) = events  # no notice: every field read has a whole-GPU series
    assert isinstance(batch, GpuBatch)
    assert batch.gpu.tolist() == [0]
    row = _batch_rows(batch)[(0, 0)]
    (gpu_busy,) = _labelled(text, "DCGM_FI_PROF_DRAM_ACTIVE", mig=False)
    (instance_busy,) = _labelled(text, "DCGM_FI_PROF_DRAM_ACTIVE", mig=True)
    assert row["hbm_busy_pct"] == pytest.approx(gpu_busy * 100)  # 69.08 %, the GPU's own
    assert row["hbm_busy_pct"] != pytest.approx((gpu_busy + instance_busy) / 2 * 100)  # not 74.56 %
    (power,) = _labelled(text, "DCGM_FI_DEV_POWER_USAGE", mig=False)
    assert row["power_w"] == power


def test_a_field_only_mig_instances_report_is_unknown_for_the_gpu() -> None:
    text = (PROM / "dcgm-exporter-a100-mig.excerpt.prom").read_text()
    gpu_line = next(
        line
        for line in text.splitlines()
        if line.startswith("DCGM_FI_PROF_DRAM_ACTIVE") and "GPU_I_ID" not in line
    )
    parser = MetricsScrapeParser("dcgm", node="ub20-a100-k8s", node_index=0)
    events = parser.parse(text.replace(gpu_line + "\n", ""), 1.0)
    notices = [e for e in events if isinstance(e, Notice)]
    (batch,) = [e for e in events if isinstance(e, GpuBatch)]
    assert "hbm_busy_pct" not in _batch_rows(batch)[(0, 0)]  # unknown, not the instance's 80 %
    assert len(notices) == 1
    assert "DCGM_FI_PROF_DRAM_ACTIVE: only per MIG instance" in notices[0].message
    assert not [e for e in parser.parse(text.replace(gpu_line + "\n", ""), 2.0) if isinstance(e, Notice)]


def test_sglang_2024_gauge_names() -> None:
    # SGLang's docs of late 2024: a real server's scrape with the first gauge names (num_requests_*).
    text = (PROM / "sglang-2024-gemma2-9b.excerpt.prom").read_text()
    parser = MetricsScrapeParser("sglang", "s", baseline=False)
    events = parser.parse(text, 1.0)
    (queue,) = [e for e in events if isinstance(e, EngineQueue)]
    running = _labelled(text, "sglang:num_requests_running", mig=False)
    waiting = _labelled(text, "sglang:num_requests_waiting", mig=False)
    (usage,) = _labelled(text, "sglang:token_usage", mig=False)
    assert (queue.running, queue.waiting) == (sum(running), sum(waiting))  # 0.0 and 0.0, not NaN
    assert queue.kv_cache_pct == pytest.approx(usage * 100)
    (progress,) = [e for e in events if isinstance(e, Progress)]
    assert progress.tokens_done == 424549
    assert progress.prompt_tokens_done == 506780
