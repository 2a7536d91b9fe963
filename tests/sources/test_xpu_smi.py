"""``xpu-smi dump`` on real captures (Max 1550 on Aurora, Flex 170, A770, xpumcli's raw-data file; provenance
in tests/data/xpu-smi/README.md): each figure against the rows read by hand, N/A and blank cells unknown,
bad input a warning naming the source and line."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenwatch.base.events import GPU_METRICS, GpuBatch, Notice
from tokenwatch.sources.xpu_smi import DUMP_METRICS, XpuSmiParser, dump_command

DATA = Path(__file__).resolve().parent.parent / "data" / "xpu-smi"
COLUMN = {metric: i for i, metric in enumerate(GPU_METRICS)}


def read(name: str, node: str = "n", chunk: int | None = None) -> list[Any]:
    data = (DATA / name).read_bytes()
    parser = XpuSmiParser(node, node_index=2)
    events: list[Any] = []
    if chunk is None:
        events += parser.feed(data, 1.0)
    else:
        for start in range(0, len(data), chunk):
            events += parser.feed(data[start : start + chunk], 1.0 + start)
    return events + parser.close(99.0)


def batches(events: list[Any]) -> list[GpuBatch]:
    return [e for e in events if isinstance(e, GpuBatch)]


def warnings(events: list[Any]) -> list[str]:
    return [e.message for e in events if isinstance(e, Notice)]


def test_aurora_max1550_rounds_and_figures() -> None:
    events = read("max1550-aurora-6gpu.csv", node="x1000c0s0b0n0")
    first, second, third = batches(events)
    assert first.gpu.tolist() == [0, 1, 2, 3, 4, 5] == second.gpu.tolist()
    assert third.gpu.tolist() == [0]  # the capture ends after device 0 of the third round
    assert first.node_index.tolist() == [2] * 6
    # Row "08:08:16.817,    3,  N/A, 293.19, 1600.00, 37.50, 32.50,  N/A"
    row = first.values[3]
    assert row[COLUMN["power_w"]] == 293.19
    assert row[COLUMN["sm_clock_mhz"]] == 1600.0
    assert row[COLUMN["temp_c"]] == 37.5
    assert row[COLUMN["hbm_temp_c"]] == 32.5
    assert math.isnan(row[COLUMN["util_pct"]])  # N/A
    assert third.values[0, COLUMN["power_w"]] == 409.54
    # Memory utilization (5) is the share of memory used, not how busy it is: not read as busy.
    assert np.isnan(second.values[:, COLUMN["hbm_busy_pct"]]).all()
    assert float(np.nansum(first.values[:, COLUMN["power_w"]])) == pytest.approx(
        281.13 + 286.48 + 281.28 + 293.19 + 292.32 + 284.67
    )
    assert warnings(events) == [
        "xpu-smi: the 6 GPUs of x1000c0s0b0n0 report no utilization: shown as unknown"
    ]


def test_blank_cells_are_unknown_not_zero() -> None:
    events = read("flex170-blank-cells.csv")
    rows = batches(events)
    assert len(rows) == 6  # one device: every row is its own round
    assert [b.values[0, COLUMN["power_w"]] for b in rows] == [43.72, 43.74, 43.72, 43.72, 43.72, 43.70]
    assert all(math.isnan(b.values[0, COLUMN["util_pct"]]) for b in rows)
    assert all(math.isnan(b.values[0, COLUMN["temp_c"]]) for b in rows)  # the blank last cell
    assert warnings(events) == ["xpu-smi: GPU 0 of n reports no utilization, temperature: shown as unknown"]


def test_memory_used_in_mib() -> None:
    (batch,) = batches(read("a770-4gpu-memory.csv"))
    assert batch.values[:, COLUMN["hbm_used_mib"]].tolist() == [17.52, 17.52, 49.21, 17.52]


@pytest.mark.parametrize(
    "name", ["xpumcli-rawdata-tile.csv", "xpumcli-on-demand-blank.csv", "user-guide-sample.csv"]
)
def test_older_forms_read_by_their_header(name: str) -> None:
    rows = batches(read(name))
    assert len(rows) in (4, 5)
    power = [b.values[0, COLUMN["power_w"]] for b in rows]
    expected = {
        "xpumcli-rawdata-tile.csv": [11.0] * 4,
        "xpumcli-on-demand-blank.csv": [44.60, 44.60, 44.61, 44.62],
        "user-guide-sample.csv": [14.61, 14.59, 14.61, 14.61, 14.61],
    }[name]
    assert power == expected


def test_a_round_cut_by_a_chunk_is_two_reads_and_no_row_is_lost() -> None:
    events = read("max1550-aurora-6gpu.csv", chunk=97)
    rows = sum(len(b.gpu) for b in batches(events))
    assert rows == 13
    assert all(len(set(b.gpu.tolist())) == len(b.gpu) for b in batches(events))


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("08:08:19.817,    0,  N/A, 281.13", "line 15: expected 8 fields, got 4"),
        ("08:08:19.817,   x0,  N/A, 281.13, 1600.00, 35.50, 31.50,  N/A", "line 15: bad device id 'x0'"),
        (
            "08:08:19.817,    0,  N/A, inf, 1600.00, 35.50, 31.50,  N/A",
            "line 15: device 0 power_w: inf is out",
        ),
        (
            "08:08:19.817,    0,  N/A, 28o.1, 1600.00, 35.50, 31.50,  N/A",
            "device 0 power_w: '28o.1' is not a",
        ),
        (
            "08:08:19.817,    0,  250, 281.1, 1600.00, 35.50, 31.50,  N/A",
            "device 0 util_pct: 250 is out of range",
        ),
    ],
)
def test_a_bad_row_or_cell_is_a_warning_naming_the_line(line: str, said: str) -> None:
    data = (DATA / "max1550-aurora-6gpu.csv").read_bytes() + line.encode() + b"\n"
    parser = XpuSmiParser("n")
    events = parser.feed(data, 1.0) + parser.close(2.0)
    assert any(m.startswith("xpu-smi: ") and said in m for m in warnings(events)), warnings(events)


def test_rows_before_any_header_are_said_once() -> None:
    parser = XpuSmiParser("n")
    events = parser.feed(b"08:08:16.817,    0,  N/A, 281.13\n" * 3, 1.0)
    assert batches(events) == []
    assert warnings(events) == [
        "xpu-smi: line 1: a row before any header, skipped: '08:08:16.817,    0,  N/A, 281.13'"
    ]


def test_the_command_asks_for_the_metrics_it_reads() -> None:
    assert dump_command(0.25) == ["xpu-smi", "dump", "-d", "-1", "-m", "0,1,2,3,4,17,18", "-i", "1"]
    assert dump_command(5)[-1] == "5"
    assert DUMP_METRICS == (0, 1, 2, 3, 4, 17, 18)


@settings(max_examples=60, deadline=None)
@given(junk=st.binary(max_size=300), cut=st.integers(0, 600))
def test_junk_and_cuts_never_raise(junk: bytes, cut: int) -> None:
    data = (DATA / "max1550-aurora-6gpu.csv").read_bytes()
    parser = XpuSmiParser("n")
    events = parser.feed(data[:cut] + junk + b"\n" + data, 1.0) + parser.close(2.0)
    assert all(isinstance(e, GpuBatch | Notice) for e in events)
    assert batches(events)
