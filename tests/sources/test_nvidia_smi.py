"""nvidia-smi --query-gpu CSV: real captures (H100, H200, an 8-GPU node, a -lms stream) and bad rows."""

from __future__ import annotations

import csv
import io
import itertools
import math
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenwatch.base.events import GPU_METRICS, Event, GpuBatch, Notice
from tokenwatch.sources.nvidia_smi import (
    DEFAULT_QUERY_FIELDS,
    NvidiaSmiParser,
    decode_reasons,
    fields_from_header,
    parse_reason_mask,
    query_command,
)

from .conftest import DATA, feed_in_chunks

SMI = DATA / "nvidia-smi"
CAPTURE = "linux-x86_64__nvidia-{gpu}__590.48.01.{state}.query-gpu.excerpt-L{lines}.csv"

# Values read off the capture rows by eye (power.draw, power.limit, clocks.current.sm,
# clocks.current.memory, memory.used, memory.total, utilization.memory, utilization.gpu,
# temperature.gpu, clocks_event_reasons.active).
CAPTURES = {
    ("h100-80gb-hbm3", "idle", "1740-L1741"): (69.85, 700.0, 345, 2619, 0, 81559, 0, 0, 41, 0x1),
    ("h100-80gb-hbm3", "load", "2104-L2105"): (631.95, 700.0, 1980, 2619, 19818, 81559, 11, 100, 59, 0x0),
    ("h200", "idle", "1740-L1741"): (77.71, 700.0, 345, 3201, 0, 143771, 0, 0, 28, 0x1),
    ("h200", "load", "2104-L2105"): (627.40, 700.0, 1980, 3201, 32362, 143771, 7, 100, 52, 0x0),
}
ATTRIBUTES = (
    "power_w",
    "power_limit_w",
    "sm_clock_mhz",
    "mem_clock_mhz",
    "hbm_used_mib",
    "hbm_total_mib",
    "hbm_busy_pct",
    "util_pct",
    "temp_c",
)


def rows_of(events: Sequence[Event]) -> list[SimpleNamespace]:
    """Every GPU row of the batches in ``events``, in order, with the metrics by name."""
    rows = []
    for e in events:
        if isinstance(e, GpuBatch):
            for i in range(len(e.gpu)):
                metrics = dict(zip(GPU_METRICS, e.values[i].tolist(), strict=True))
                rows.append(
                    SimpleNamespace(
                        t=e.t,
                        node_index=int(e.node_index[i]),
                        gpu=int(e.gpu[i]),
                        throttle_reasons=int(e.throttle_reasons[i]),
                        **metrics,
                    )
                )
    return rows


@pytest.mark.parametrize("capture", sorted(CAPTURES))
def test_real_full_query_captures(capture: tuple[str, str, str]) -> None:
    gpu, state, lines = capture
    text = (SMI / CAPTURE.format(gpu=gpu, state=state, lines=lines)).read_bytes()
    header = text.split(b"\n", 1)[0].decode()
    fields = fields_from_header(header)
    assert len(fields) == 212
    assert "clocks_event_reasons.active" in fields
    parser = NvidiaSmiParser("node07", fields, node_index=6)
    events = parser.feed(text, 12.5)
    assert len(events) == 1  # the header row is recognised and skipped
    assert isinstance(events[0], GpuBatch)
    (sample,) = rows_of(events)
    assert (sample.t, sample.node_index, sample.gpu) == (12.5, 6, 0)
    expected = CAPTURES[capture]
    assert tuple(getattr(sample, a) for a in ATTRIBUTES) == pytest.approx(expected[:9])
    assert sample.throttle_reasons == expected[9]
    assert decode_reasons(f"0x{sample.throttle_reasons:016X}") == (["gpu_idle"] if state == "idle" else [])


def test_eight_gpu_time_series_with_author_header() -> None:
    text = (SMI / "xypp3-8gpu-timeseries.csv").read_bytes()
    fields = fields_from_header(text.split(b"\n", 1)[0].decode())
    parser = NvidiaSmiParser("h100node", fields, gpu_field="gpu")  # its "index" column is always 0
    events = rows_of(feed_in_chunks(lambda chunk: parser.feed(chunk, 1.0), text, 17) + parser.close(1.0))
    rows = list(csv.DictReader(io.StringIO(text.decode()), skipinitialspace=True))
    assert [e.gpu for e in events] == [int(r["gpu"]) for r in rows]
    assert [e.power_w for e in events] == [float(r["power.draw"]) for r in rows]
    assert [e.temp_c for e in events] == [float(r["temperature.gpu"]) for r in rows]
    assert {e.hbm_total_mib for e in events} == {81559.0}
    assert all(math.isnan(e.sm_clock_mhz) for e in events)  # not queried: missing, not zero


def test_lms_stream_with_units_and_no_index() -> None:
    text = (SMI / "pranavdani-lms50-units.csv").read_bytes()
    fields = fields_from_header(text.split(b"\n", 1)[0].decode())
    assert fields == ["timestamp", "power.draw"]
    parser = NvidiaSmiParser("laptop", fields, gpu_field=None)
    events = rows_of(feed_in_chunks(lambda chunk: parser.feed(chunk, 0.0), text, 5) + parser.close(0.0))
    expected = [
        float(line.split(",")[1].split()[0]) for line in text.decode().splitlines()[1:] if line.strip()
    ]
    assert [e.power_w for e in events] == expected
    assert min(expected) > 20
    assert max(expected) < 24


def test_default_query_stream_partial_lines_and_missing_values() -> None:
    rows = [
        b"0, 1398.20, 1400.00, 1965, 3996, 189471, 196608, 87, 100, 61, 0x0000000000000004\n",
        b"1, [N/A], [Not Supported], 1965, 3996, [Unknown Error], 196608, 86, 100, 60, [N/A]\n",
        b"2, 612.5, 1400, 1410, 3996, 102, 196608, 3, 40, 55, 0x0000000000000060\n",
    ]
    parser = NvidiaSmiParser("node01")
    stream = b"".join(rows)
    events = rows_of(feed_in_chunks(lambda chunk: parser.feed(chunk, 3.0), stream[:-10], 7))
    assert [e.gpu for e in events] == [0, 1]  # the third row is not complete yet
    events += rows_of(parser.feed(stream[-10:], 4.0))
    assert [(e.gpu, e.t) for e in events] == [(0, 3.0), (1, 3.0), (2, 4.0)]
    first, second, third = events
    assert (first.power_w, first.power_limit_w, first.hbm_used_mib, first.hbm_busy_pct) == (
        1398.2,
        1400,
        189471,
        87,
    )
    assert first.throttle_reasons == 0x4  # sw_power_cap
    assert math.isnan(second.power_w)
    assert math.isnan(second.power_limit_w)
    assert math.isnan(second.hbm_used_mib)
    assert second.throttle_reasons == 0
    assert second.sm_clock_mhz == 1965
    assert decode_reasons("0x0000000000000060") == ["sw_thermal_slowdown", "hw_thermal_slowdown"]
    assert third.throttle_reasons == 0x60


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        (b"No devices were found\n", "expected 11 fields, got 1"),
        (b"0, 1, 2\n", "expected 11 fields, got 3"),
        (b"x, 1398, 1400, 1965, 3996, 1, 2, 3, 4, 5, 0x0\n", "bad GPU index 'x'"),
        (b"0, 1e999, 1400, 1965, 3996, 1, 2, 3, 4, 5, 0x0\n", "is not a finite number"),
        (b"0, -5, 1400, 1965, 3996, 1, 2, 3, 4, 5, 0x0\n", "power.draw = -5 out of range"),
        (b"0, 5, 1400, 1965, 3996, 1, 2, 300, 4, 5, 0x0\n", "utilization.memory = 300 out of range"),
        (b"0, 5, 1400, 1965, 3996, 1, 2, 3, 4, 5, 0x1FFFFFFFFFFFFFFFFF\n", "out of range"),
        (b"0, 5, 1400, 1965, 3996, 1, 2, 3, 4, 5, zz\n", "invalid literal"),
        (b"\xff\xfe\x00garbage\n", "expected 11 fields"),
    ],
)
def test_bad_rows_become_one_notice_each(line: bytes, problem: str) -> None:
    parser = NvidiaSmiParser("node02")
    good = b"3, 5, 1400, 1965, 3996, 1, 2, 3, 4, 5, 0x0\n"
    events = parser.feed(good + line + good, 9.0)
    # The notice comes as its line is met; each GPU-3 row is a round of its own (GPU 3 comes again).
    assert [type(e) for e in events] == [Notice, GpuBatch, GpuBatch]
    assert [(r.gpu, r.t) for r in rows_of(events)] == [(3, 9.0), (3, 9.0)]
    notice = events[0]
    assert isinstance(notice, Notice)
    assert notice.level == "warning"
    assert notice.node == "node02"
    assert notice.source == "nvidia-smi"
    assert "line 2:" in notice.message
    assert problem in notice.message


def test_huge_line_is_cut_and_reported_once() -> None:
    parser = NvidiaSmiParser("n")
    events = parser.feed(b"0," + b"9" * 200_000, 1.0)
    events += parser.feed(b"9" * 200_000 + b"\n0, 5, 1400, 1965, 3996, 1, 2, 3, 4, 5, 0x0\n", 2.0)
    assert [type(e) for e in events] == [Notice, GpuBatch]
    assert isinstance(events[0], Notice)
    assert "longer than" in events[0].message
    assert parser._lines.pending_bytes == 0


def test_query_command() -> None:
    assert query_command() == [
        "nvidia-smi",
        "--query-gpu=" + ",".join(DEFAULT_QUERY_FIELDS),
        "--format=csv,noheader,nounits",
    ]
    assert query_command(("index", "power.draw"), interval_ms=500)[-2:] == ["-lms", "500"]
    with pytest.raises(ValueError, match="bad query field"):
        query_command(("index", "power.draw,x"))
    with pytest.raises(ValueError, match="positive"):
        query_command(interval_ms=0)
    with pytest.raises(ValueError, match="must include 'index'"):
        NvidiaSmiParser("n", ("power.draw",))


def test_default_fields_are_names_nvidia_smi_documents() -> None:
    # A real driver (590.48) answered a query holding every field we ask for (or its long name).
    capture = (SMI / CAPTURE.format(gpu="h100-80gb-hbm3", state="load", lines="2104-L2105")).read_text()
    header = fields_from_header(capture.splitlines()[0])
    aliases = {"clocks.sm": "clocks.current.sm", "clocks.mem": "clocks.current.memory"}
    for field in DEFAULT_QUERY_FIELDS:
        assert aliases.get(field, field) in header


def test_reason_mask_parsing() -> None:
    assert parse_reason_mask("0x0000000000000084") == 0x84
    assert parse_reason_mask("12") == 12
    assert decode_reasons("[N/A]") == []
    assert decode_reasons("0x0000000000010000") == ["0x10000"]  # unknown bits are shown, not dropped


@settings(max_examples=200, deadline=None)
@given(
    numbers=st.lists(st.floats(min_value=0, max_value=5000, allow_nan=False), min_size=9, max_size=9),
    mask=st.integers(min_value=0, max_value=2**64 - 1),
    gpu=st.integers(min_value=0, max_value=63),
)
def test_fast_path_reads_plain_rows_exactly_as_the_careful_path(
    numbers: list[float], mask: int, gpu: int
) -> None:
    parser = NvidiaSmiParser("n")
    cells = [str(gpu), *(repr(x) for x in numbers), f"0x{mask:016x}"]
    fast = parser._plain_row([f" {cell} " for cell in cells])  # as split from ", "-joined rows
    try:
        careful = parser._careful_row(cells)
    except ValueError:  # out of range: the fast path must leave the verdict to the careful one
        assert fast is None
    else:
        assert fast == careful


# ---------------------------------------------------------------- what one batch holds (a "read")
XYPP3 = SMI / "xypp3-8gpu-timeseries.csv"  # 8 GPUs, 5 whole rounds, then a round cut after GPU 2
LMS50 = SMI / "pranavdani-lms50-units.csv"  # one GPU, no index column, units in the cells


def csv_rows(path: Path) -> list[tuple[str, int, float, float, float, float]]:
    """The capture read independently, one line at a time with the csv module: (timestamp, gpu,
    power W, HBM used MiB, HBM total MiB, temperature C); NaN where the capture has no such column."""
    rows = []
    for row in csv.DictReader(io.StringIO(path.read_text()), skipinitialspace=True):
        cells = {name.split(" [")[0]: value for name, value in row.items()}

        def number(name: str, cells: dict[str, str] = cells) -> float:
            return float(cells[name].split()[0]) if name in cells else math.nan

        gpu = int(cells.get("gpu", 0))
        rows.append(
            (
                cells["timestamp"],
                gpu,
                number("power.draw"),
                number("memory.used"),
                number("memory.total"),
                number("temperature.gpu"),
            )
        )
    return rows


def parser_for(path: Path) -> NvidiaSmiParser:
    fields = fields_from_header(path.read_text().splitlines()[0])
    return NvidiaSmiParser("node03", fields, gpu_field="gpu" if "gpu" in fields else None, node_index=2)


def as_tuples(rows: list[SimpleNamespace]) -> list[tuple[int, float, float, float, float]]:
    return [(r.gpu, r.power_w, r.hbm_used_mib, r.hbm_total_mib, r.temp_c) for r in rows]


def same(
    a: list[tuple[int, float, float, float, float]], b: list[tuple[int, float, float, float, float]]
) -> bool:
    return np.array_equal(np.array(a, dtype=np.float64), np.array(b, dtype=np.float64), equal_nan=True)


@settings(max_examples=150, deadline=None)
@given(
    capture=st.sampled_from([XYPP3, LMS50]),
    sizes=st.lists(st.integers(min_value=1, max_value=400), min_size=1, max_size=40),
)
def test_a_stream_cut_anywhere_gives_every_row_once_in_line_order(capture: Path, sizes: list[int]) -> None:
    data = capture.read_bytes()
    expected = csv_rows(capture)
    parser = parser_for(capture)
    events: list[Event] = []
    newline_chunk: list[int] = []  # for each line, the chunk its newline came in
    start, k = 0, 0
    for size in itertools.cycle(sizes):
        chunk = data[start : start + size]
        if not chunk:
            break
        newline_chunk += [k] * chunk.count(b"\n")
        events += parser.feed(chunk, float(k))
        start, k = start + size, k + 1
    events += parser.close(float(k))
    batches = [e for e in events if isinstance(e, GpuBatch)]
    assert len(batches) == len(events)  # a clean capture: no notices
    rows = rows_of(batches)
    assert same(as_tuples(rows), [r[1:] for r in expected])
    assert all(math.isnan(r.sm_clock_mhz) for r in rows)  # not queried: missing, not zero
    # Each row carries the time of the chunk that completed its line (the header is line 0).
    assert [r.t for r in rows] == [float(c) for c in newline_chunk[1:]]
    assert {r.node_index for r in rows} == {2}
    for batch in batches:
        assert len(set(batch.gpu.tolist())) == len(batch.gpu)  # no batch names a GPU twice


def test_a_whole_stream_in_one_chunk_gives_one_batch_per_sampling_round() -> None:
    expected = csv_rows(XYPP3)
    rounds = [[row[1] for row in group] for _, group in itertools.groupby(expected, key=lambda r: r[0])]
    assert len(rounds) == 6
    assert rounds[-1] == [0, 1, 2]  # the capture ends inside a round
    events = parser_for(XYPP3).feed(XYPP3.read_bytes(), 5.0)
    assert all(isinstance(e, GpuBatch) and e.t == 5.0 for e in events)
    assert [e.gpu.tolist() for e in events if isinstance(e, GpuBatch)] == rounds


def test_round_by_round_reads_reuse_their_index_arrays() -> None:
    """One batch per read, and the same (node_index, gpu) arrays each time: the core's one-node fast
    path recognises them by identity."""
    text = XYPP3.read_bytes()
    header, *lines = text.splitlines(keepends=True)
    parser = parser_for(XYPP3)
    assert parser.feed(header, 0.0) == []
    batches = []
    for k in range(5):
        (batch,) = parser.feed(b"".join(lines[8 * k : 8 * k + 8]), float(k))
        assert isinstance(batch, GpuBatch)
        batches.append(batch)
    assert all(b.gpu.tolist() == list(range(8)) for b in batches)
    assert all(b.gpu is batches[0].gpu and b.node_index is batches[0].node_index for b in batches)
    assert [b.t for b in batches] == [0.0, 1.0, 2.0, 3.0, 4.0]


def test_parsed_batches_are_read_only() -> None:
    (batch,) = NvidiaSmiParser("n").feed(b"0, 5, 1400, 1965, 3996, 1, 2, 3, 4, 5, 0x4\n", 1.0)
    assert isinstance(batch, GpuBatch)
    for array in (batch.node_index, batch.gpu, batch.values, batch.throttle_reasons):
        assert not array.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        batch.values[0, 0] = 1.0
