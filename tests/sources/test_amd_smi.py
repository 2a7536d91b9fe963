"""``amd-smi metric --json``, on a real capture (an RX 6600, tests/data/amd-smi/README.md) and the other
shapes amd-smi printed made from it: each figure against the capture's own numbers read by hand, unknown
where the GPU reports nothing, bad input a warning naming the source and line."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenwatch.base import throttle
from tokenwatch.base.events import GPU_METRICS, GpuBatch, Notice
from tokenwatch.sources.amd_smi import AmdSmiParser, loop_argv, parse_capture

CAPTURE = Path(__file__).resolve().parent.parent / "data" / "amd-smi" / "rx6600-metric.json"
TEXT = CAPTURE.read_text()

# The capture's figures, read off the file by eye (the units amd-smi printed beside them).
EXPECTED = {
    "power_w": 6.0,  # power.socket_power 6 W
    "sm_clock_mhz": 800.0,  # clock.gfx_0.clk (gfx_1..7 N/A)
    "mem_clock_mhz": 541.0,  # clock.mem_0.clk
    "hbm_used_mib": 202.0,  # mem_usage.used_vram 202 MB
    "hbm_total_mib": 8176.0,  # mem_usage.total_vram 8176 MB
    "hbm_busy_pct": 0.0,  # usage.umc_activity 0 %
    "util_pct": 1.0,  # usage.gfx_activity 1 %
    "temp_c": 37.0,  # temperature.hotspot 37 C (edge 36)
    "hbm_temp_c": 32.0,  # temperature.mem 32 C
}


def bare_numbers(node: Any) -> Any:
    """ROCm 6.0's JSON: every {"value", "unit"} object as its bare value."""
    if isinstance(node, dict):
        if set(node) == {"value", "unit"}:
            return node["value"]
        return {k: bare_numbers(v) for k, v in node.items()}
    if isinstance(node, list):
        return [bare_numbers(v) for v in node]
    return node


SHAPES = {
    "list of value+unit (ROCm 6.1-6.3)": TEXT,
    "gpu_data envelope (ROCm 6.4, 7.x)": json.dumps({"gpu_data": json.loads(TEXT)}, indent=4),
    "bare numbers (ROCm 6.0)": json.dumps(bare_numbers(json.loads(TEXT)), indent=4),
    "compact, one line": json.dumps(json.loads(TEXT)),
}


def batches(events: list[Any]) -> list[GpuBatch]:
    return [e for e in events if isinstance(e, GpuBatch)]


def warnings(events: list[Any]) -> list[str]:
    return [e.message for e in events if isinstance(e, Notice)]


@pytest.mark.parametrize("shape", SHAPES)
def test_every_shape_reads_the_capture_figures(shape: str) -> None:
    events = parse_capture(SHAPES[shape], node="mi-node", t=3.0)
    (batch,) = batches(events)
    assert batch.t == 3.0
    assert batch.gpu.tolist() == [0]
    row = dict(zip(GPU_METRICS, batch.values[0], strict=True))
    for metric, value in EXPECTED.items():
        assert row[metric] == value, metric
    # No power limit in `metric`, and a 0.0 J counter on a GPU drawing 6 W is no counter: unknown.
    assert math.isnan(row["power_limit_w"])
    assert math.isnan(row["energy_j"])
    assert batch.throttle_reasons.tolist() == [0]  # UNTHROTTLED, no violation group
    assert warnings(events) == [
        "amd-smi: GPU 0 of mi-node reports no energy counter: shown as unknown (energy from integrated power)"
    ]


def test_a_newer_gpu_data_document_under_load() -> None:
    """The gpu_data envelope of a newer amd-smi, as a loaded Radeon printed it: THROTTLED with every
    violation N/A names no reason; the figures are the capture's."""
    events = parse_capture((CAPTURE.parent / "radeon-gpu-data-gpu0.json").read_text(), node="rx")
    (batch,) = batches(events)
    row = dict(zip(GPU_METRICS, batch.values[0], strict=True))
    assert (row["power_w"], row["sm_clock_mhz"], row["mem_clock_mhz"]) == (12.3, 2774.0, 1258.0)
    assert (row["util_pct"], row["hbm_busy_pct"], row["temp_c"], row["hbm_temp_c"]) == (
        91.0,
        66.0,
        63.0,
        70.0,
    )
    assert (row["hbm_used_mib"], row["hbm_total_mib"]) == (20450.0, 30576.0)
    assert batch.throttle_reasons.tolist() == [0]
    assert warnings(events) == [
        "amd-smi: GPU 0 of rx reports no energy counter: shown as unknown (energy from integrated power)"
    ]


def test_documents_in_a_stream_are_reads_at_the_time_they_complete() -> None:
    document = TEXT.encode()
    parser = AmdSmiParser("n", node_index=4)
    first = parser.feed(document[:1000], 1.0)
    assert batches(first) == []  # half a document waits
    second = parser.feed(document[1000:] + document + b"WARNING: User is missing the render group\n", 2.0)
    third = parser.feed(document, 3.0) + parser.close(3.5)
    times = [b.t for b in batches(second + third)]
    assert times == [2.0, 2.0, 3.0]
    assert all(b.node_index.tolist() == [4] for b in batches(second + third))
    said = warnings(second + third)
    assert any("line " in m and "not amd-smi JSON" in m and "render group" in m for m in said)
    assert parser.documents == 3


def _with(path: tuple[str, ...], value: Any) -> str:
    document = json.loads(TEXT)
    node = document[0]
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return json.dumps(document, indent=4)


@pytest.mark.parametrize(
    ("path", "value", "metric", "said"),
    [
        (
            ("power", "socket_power"),
            {"value": "NaN", "unit": "W"},
            "power_w",
            "power.socket_power: nan is not a finite number",
        ),
        (("power", "socket_power"), {"value": 1e300, "unit": "W"}, "power_w", "out of range"),
        (("power", "socket_power"), {"value": 6, "unit": "horsepower"}, "power_w", "unknown unit"),
        (("power", "socket_power"), True, "power_w", "True is not a number"),
        (("usage", "gfx_activity"), {"value": 140, "unit": "%"}, "util_pct", "out of range"),
        (("mem_usage", "used_vram"), ["202"], "hbm_used_mib", "a list where a number belongs"),
    ],
)
def test_an_unreadable_figure_is_unknown_and_named(
    path: tuple[str, ...], value: Any, metric: str, said: str
) -> None:
    events = parse_capture(_with(path, value), node="n")
    (batch,) = batches(events)
    row = dict(zip(GPU_METRICS, batch.values[0], strict=True))
    assert math.isnan(row[metric])
    assert row["temp_c"] == 37.0  # the rest of the GPU still read
    assert any(said in m and m.startswith("amd-smi: line 1: GPU 0") for m in warnings(events)), warnings(
        events
    )


def test_json_nan_literals_are_unknown_not_numbers() -> None:
    text = TEXT.replace('"value": 6,', '"value": NaN,', 1)
    assert text != TEXT
    events = parse_capture(text)
    assert math.isnan(batches(events)[0].values[0, GPU_METRICS.index("power_w")])
    assert any("not a finite number" in m for m in warnings(events))


def test_a_document_cut_short_is_a_warning_and_the_next_one_reads() -> None:
    cut = TEXT[: len(TEXT) // 2]
    parser = AmdSmiParser("n")
    events = parser.feed((cut + "\n" + TEXT).encode(), 1.0) + parser.close(1.0)
    assert len(batches(events)) == 1
    assert any("JSON document cut short" in m and "lines 1-" in m for m in warnings(events))
    # and cut at the end of the stream
    events = parse_capture(cut)
    assert batches(events) == []
    assert any("cut short" in m for m in warnings(events))


@pytest.mark.parametrize(
    ("document", "said"),
    [
        ('{"gpu_info": []}', "not an amd-smi metric document (an object without gpu_data)"),
        ('[{"usage": {}}]', "GPU entry 0 has no GPU index"),
        ('[{"gpu": "0"}]', "GPU entry 0 has no GPU index"),
        ('[{"gpu": 0}, {"gpu": 0}]', "GPU 0 twice in one document"),
        ("[\n  1,\n  2 3\n]", "not valid JSON"),
    ],
)
def test_shapes_no_amd_smi_printed_are_warnings(document: str, said: str) -> None:
    events = parse_capture(document)
    assert any(said in m for m in warnings(events)), warnings(events)


def test_a_gpu_reporting_nothing_is_all_unknown_and_said_once() -> None:
    document = '[{"gpu": 0, "usage": "N/A", "power": "N/A"}, {"gpu": 1, "power": {"socket_power": "N/A"}}]'
    parser = AmdSmiParser("cpx-node")
    events = parser.feed((document + "\n").encode() * 5, 1.0) + parser.close(2.0)
    assert len(batches(events)) == 5
    assert all(np.isnan(b.values).all() for b in batches(events))
    (said,) = warnings(events)
    assert said.startswith("amd-smi: the 2 GPUs of cpx-node report no power, GPU clock,")


def test_violations_set_the_throttle_reasons_the_cause_hints_read() -> None:
    document = json.loads(TEXT)
    entry = copy.deepcopy(document[0])
    entry["gpu"] = 1
    entry["power"]["throttle_status"] = "THROTTLED"
    entry["throttle"] = {
        "ppt_violation_status": True,
        "socket_thermal_violation_status": False,
        "prochot_violation_status": "N/A",
        "hbm_thermal_violation_status": True,
    }
    events = parse_capture(json.dumps([document[0], entry]))
    (batch,) = batches(events)
    assert batch.throttle_reasons.tolist() == [0, throttle.SW_POWER_CAP | throttle.SW_THERMAL_SLOWDOWN]


def test_partitions_and_xcd_clocks_average() -> None:
    document = json.loads(TEXT)
    clocks = document[0]["clock"]
    clocks["gfx_1"]["clk"] = {"value": 900, "unit": "MHz"}
    clocks["gfx_2"]["clk"] = {"value": 1.0, "unit": "GHz"}
    (batch,) = batches(parse_capture(json.dumps(document)))
    assert batch.values[0, GPU_METRICS.index("sm_clock_mhz")] == pytest.approx((800 + 900 + 1000) / 3)


def test_the_loop_ends_with_the_tools_own_status() -> None:
    argv = loop_argv(2.0)
    assert argv[:2] == ["sh", "-c"]
    assert "amd-smi metric --json || exit $?" in argv[2]
    assert argv[-1] == "2"
    assert loop_argv(0.0)[-1] == "0.1"


@settings(max_examples=60, deadline=None)
@given(cut=st.integers(0, len(TEXT)), junk=st.binary(max_size=300), chunk=st.integers(1, 5000))
def test_any_cut_junk_and_chunking_never_raise_and_the_whole_document_still_reads(
    cut: int, junk: bytes, chunk: int
) -> None:
    stream = TEXT.encode()[:cut] + junk + b"\n" + TEXT.encode()
    parser = AmdSmiParser("n")
    events = []
    for start in range(0, len(stream), chunk):
        events += parser.feed(stream[start : start + chunk], 1.0)
    events += parser.close(2.0)
    assert all(isinstance(e, GpuBatch | Notice) for e in events)
    read = batches(events)
    assert read, "the whole document after the junk must read"
    assert read[-1].values[0, GPU_METRICS.index("power_w")] == 6.0
