"""``nvidia-smi dmon`` text on real captures (H100 and H200 with MIG, L40S, RTX 2080 SUPER, idle and under
load; tests/data/sources/nvidia-smi/dmon, provenance in tests/data/sources/README.md): each figure against
the rows read by hand, ``-`` unknown, bad input a warning naming the source and line."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenwatch.base import throttle
from tokenwatch.base.events import GPU_METRICS, GpuBatch, Notice
from tokenwatch.sources.nvidia_smi_dmon import NvidiaSmiDmonParser, dmon_command

from .conftest import DATA

DMON = DATA / "nvidia-smi" / "dmon"
COLUMN = {metric: i for i, metric in enumerate(GPU_METRICS)}
H100_LOAD = (DMON / "nvidia-h100-mig__590.48.01.load.dmon.L2360-L2366.txt").read_bytes()


def read(data: bytes, node: str = "n") -> list[Any]:
    parser = NvidiaSmiDmonParser(node, node_index=1)
    return parser.feed(data, 1.0) + parser.close(2.0)


def batches(events: list[Any]) -> list[GpuBatch]:
    return [e for e in events if isinstance(e, GpuBatch)]


def warnings(events: list[Any]) -> list[str]:
    return [e.message for e in events if isinstance(e, Notice)]


def test_h100_mig_under_load() -> None:
    events = read(H100_LOAD, node="h100")
    rows = batches(events)
    assert len(rows) == 5  # one GPU: each row its own read
    assert [b.values[0, COLUMN["power_w"]] for b in rows] == [438, 440, 437, 439, 439]
    assert [b.values[0, COLUMN["hbm_temp_c"]] for b in rows] == [61, 60, 60, 60, 62]
    first = rows[0].values[0]
    assert (first[COLUMN["temp_c"]], first[COLUMN["mem_clock_mhz"]], first[COLUMN["sm_clock_mhz"]]) == (
        55,
        2619,
        1980,
    )
    assert math.isnan(first[COLUMN["util_pct"]])  # "-" under MIG
    assert math.isnan(first[COLUMN["hbm_busy_pct"]])
    assert rows[0].node_index.tolist() == [1]
    assert warnings(events) == [
        "nvidia-smi dmon: GPU 0 of h100 reports no utilization, memory busy: shown as unknown"
    ]


@pytest.mark.parametrize("capture", sorted(p.name for p in DMON.glob("*.txt")))
def test_every_capture_reads_every_row(capture: str) -> None:
    data = (DMON / capture).read_bytes()
    rows = [line.split() for line in data.decode().splitlines() if not line.startswith("#")]
    events = read(data)
    read_power = [b.values[0, COLUMN["power_w"]] for b in batches(events)]
    assert read_power == [float(r[1]) for r in rows]
    assert not [m for m in warnings(events) if "line" in m]


def test_l40s_utilization_read_where_reported() -> None:
    (first, *_) = batches(read((DMON / "nvidia-l40s__595.80.load.dmon.L2107-L2113.txt").read_bytes()))
    row = first.values[0]
    assert (row[COLUMN["util_pct"]], row[COLUMN["hbm_busy_pct"]], row[COLUMN["sm_clock_mhz"]]) == (
        10,
        2,
        2520,
    )
    assert math.isnan(row[COLUMN["hbm_temp_c"]])  # mtemp "-" on an L40S


def test_several_gpus_date_time_columns_violations_and_a_repeated_header() -> None:
    text = (
        "#Date       Time        gpu    pwr  gtemp     sm    mem   mclk   pclk  pviol  tviol     fb\n"
        "#YYYYMMDD   HH:MM:SS    Idx      W      C      %      %    MHz    MHz      %   bool     MB\n"
        "20260101   10:00:00      0    690     61     98     80   2619   1755     12      0  71000\n"
        "20260101   10:00:00      1    650     60     97     79   2619   1980      0      0  70990\n"
        "#Date       Time        gpu    pwr  gtemp     sm    mem   mclk   pclk  pviol  tviol     fb\n"
        "20260101   10:00:01      0    688     61     98     80   2619   1755      9      1  71000\n"
    )
    events = read(text.encode())
    first, second = batches(events)
    assert first.gpu.tolist() == [0, 1]
    assert first.values[:, COLUMN["power_w"]].tolist() == [690, 650]
    assert first.values[:, COLUMN["hbm_used_mib"]].tolist() == [71000, 70990]
    assert first.throttle_reasons.tolist() == [throttle.SW_POWER_CAP, 0]
    assert second.throttle_reasons.tolist() == [throttle.SW_POWER_CAP | throttle.SW_THERMAL_SLOWDOWN]


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("    0    438     55", "line 8: expected 12 fields, got 3"),
        (
            "    x    438     55     61      -      -      -      -      -      -   2619   1980",
            "bad GPU index 'x'",
        ),
        (
            "    0    43k     55     61      -      -      -      -      -      -   2619   1980",
            "power_w: '43k' is not",
        ),
        (
            "    0    438    555     61      -      -      -      -      -      -   2619   1980",
            "temp_c: 555 is out",
        ),
    ],
)
def test_a_bad_row_is_a_warning_naming_the_line(line: str, said: str) -> None:
    events = read(H100_LOAD + line.encode() + b"\n")
    assert any(m.startswith("nvidia-smi dmon: ") and said in m for m in warnings(events)), warnings(events)


def test_rows_before_a_header_are_said_once() -> None:
    events = read(b"    0     70     42     48      -\n" * 4)
    assert batches(events) == []
    assert len(warnings(events)) == 1


def test_the_command() -> None:
    assert dmon_command(0.2) == ["nvidia-smi", "dmon", "-s", "pucm", "-d", "1"]
    assert dmon_command(5)[-1] == "5"


@settings(max_examples=50, deadline=None)
@given(junk=st.binary(max_size=200), cut=st.integers(0, len(H100_LOAD)))
def test_junk_and_cuts_never_raise(junk: bytes, cut: int) -> None:
    events = read(H100_LOAD[:cut] + junk + b"\n" + H100_LOAD)
    assert all(isinstance(e, GpuBatch | Notice) for e in events)
    assert np.isfinite(batches(events)[-1].values[0, COLUMN["power_w"]])
