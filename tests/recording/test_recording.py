"""Recordings: exact round trips, and damage that is skipped with a warning instead of failing."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokenwatch.base.events import (
    GPU_METRICS,
    OPTIONAL_GPU_METRICS,
    EngineQueue,
    Event,
    GpuBatch,
    GpuSample,
    Heartbeat,
    LatencyBatch,
    LogLine,
    NodeStatus,
    Notice,
    Progress,
    ProgressBatch,
    RunEnded,
    RunStarted,
)
from tokenwatch.recording import (
    RecordingError,
    RecordingFormatError,
    RecordingReader,
    RecordingWriter,
    read_events,
)
from tokenwatch.recording.codec import CodecError, dumps, loads

START = RunStarted(0.0, "r", "Server", ("a", "b"), 2, 60.0, None, "live", 1.7e9, {"k": [1, "x"]})
EVERY_KIND: list[Event] = [
    START,
    GpuSample(0.5, "a", 1, power_w=700.25, sm_clock_mhz=1980.0, throttle_reasons=2**64 - 1),
    GpuBatch(
        1.0,
        np.array([0, 0, 1]),
        np.array([0, 1, 0]),
        np.arange(3 * len(GPU_METRICS), dtype=float).reshape(3, -1),
        np.array([0, 4, 8], np.uint64),
    ),
    Progress(1.5, "b", None, 10, 99),
    ProgressBatch(2.0, np.array([0, 1]), np.array([1, 2]), np.array([300, 400]), np.array([5, 6])),
    LatencyBatch(2.5, "a", "ttft", np.array([0.1, 0.2])),
    LatencyBatch(2.5, "b", "e2e", np.array([3.5]), np.array([7])),
    NodeStatus(3.0, "b", "down", "connection refused: 'x' \"y\""),
    LogLine(3.5, "a", "Avg generation throughput: 1.0 tokens/s ✓"),
    EngineQueue(3.7, "a", 12.0, 3.0, 81.5),
    EngineQueue(3.8, "b", waiting=7.0),
    GpuSample(3.9, "b", 0, power_w=600.0, energy_j=1.5e7, xid=79.0, nvlink_errors=4.0, hbm_temp_c=71.0),
    Notice(4.0, "warning", "skipped line 3", "a", "log"),
    Heartbeat(4.5),
    RunEnded(5.0, "completed"),
]


def write(path: Path, events: list[Event]) -> Path:
    with RecordingWriter(path) as writer:
        for event in events:
            writer.write(event)
    return path


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.zst"])
def test_every_event_kind_round_trips_exactly(tmp_path: Path, suffix: str) -> None:
    path = write(tmp_path / f"rec{suffix}", EVERY_KIND)
    events, warnings = read_events(path)
    assert warnings == []
    assert [dumps(e) for e in events] == [dumps(e) for e in EVERY_KIND]
    assert isinstance(events[1], GpuSample)
    assert math.isnan(events[1].temp_c)
    assert events[1].throttle_reasons == 2**64 - 1


def test_missing_values_stay_missing_in_batches(tmp_path: Path) -> None:
    values = np.full((2, len(GPU_METRICS)), np.nan)
    values[0, 0] = 1.5
    batch = GpuBatch(1.0, np.array([0, 1]), np.array([0, 0]), values, np.zeros(2, np.uint64))
    events, _ = read_events(write(tmp_path / "r.jsonl", [START, batch]))
    back = events[1]
    assert isinstance(back, GpuBatch)
    assert np.array_equal(back.values, values, equal_nan=True)


def test_columns_a_source_does_not_have_are_not_written() -> None:
    """The energy counter, HBM temperature, XID and NVLink columns are written only where a batch has a
    value: a batch without them has the bytes it had before they existed, and reads them as missing."""
    values = np.full((2, len(GPU_METRICS)), np.nan)
    values[:, 0] = [600.0, 610.0]
    batch = GpuBatch(1.0, np.array([0, 1]), np.array([0, 0]), values, np.zeros(2, np.uint64))
    line = dumps(batch)
    assert all(f'"{m}"'.encode() not in line for m in OPTIONAL_GPU_METRICS)
    assert b'"temp_c":[null,null]' in line  # an old column is written, missing or not
    values = values.copy()  # the batch made its array read-only
    values[1, GPU_METRICS.index("energy_j")] = 123.5
    with_energy = dumps(GpuBatch(1.0, np.array([0, 1]), np.array([0, 0]), values, np.zeros(2, np.uint64)))
    assert b'"energy_j":[null,123.5]' in with_energy
    sample = dumps(GpuSample(0.5, "a", 1, power_w=700.0))
    assert all(f'"{m}"'.encode() not in sample for m in OPTIONAL_GPU_METRICS)
    back = loads(sample)
    assert isinstance(back, GpuSample)
    assert math.isnan(back.energy_j)


def test_a_recording_made_before_the_new_columns_reads_them_as_missing() -> None:
    """A recording made before the energy counter existed (the start of the old Server sample run, see
    tests/data/recording/README.md): its GPU batches read, and every value of the new columns is missing
    (so energy comes from integrated power)."""
    reader = RecordingReader(
        Path(__file__).parents[1] / "data" / "recording" / "pre-energy-columns.jsonl.zst"
    )
    batches = []
    for event in reader.events():
        if isinstance(event, GpuBatch):
            batches.append(event)
        if len(batches) == 5:
            break
    assert len(batches) == 5
    for batch in batches:
        assert np.isfinite(batch.values[:, GPU_METRICS.index("power_w")]).all()
        for m in OPTIONAL_GPU_METRICS:
            assert np.isnan(batch.values[:, GPU_METRICS.index(m)]).all()


def test_a_torn_last_line_is_skipped_with_a_warning(tmp_path: Path) -> None:
    path = write(tmp_path / "r.jsonl", EVERY_KIND)
    data = path.read_bytes()
    path.write_bytes(data[:-10])  # the writer was killed in the middle of its last line
    events, warnings = read_events(path)
    assert len(events) == len(EVERY_KIND) - 1
    assert len(warnings) == 1
    assert "torn last line" in warnings[0]
    assert f"{path}:{len(EVERY_KIND) + 1}" in warnings[0]


def test_garbage_lines_are_skipped_and_named(tmp_path: Path) -> None:
    path = write(tmp_path / "r.jsonl", EVERY_KIND)
    lines = path.read_bytes().split(b"\n")
    lines[3:3] = [
        b"\xff\xfe not json",
        b'{"k":"gpu","t":1}',
        b'{"k":"progress","t":-1,"node":"a","tokens":1}',
        b"[1,2,3]",
        b'{"k":"teleport","t":1}',
        b"",
    ]
    path.write_bytes(b"\n".join(lines))
    events, warnings = read_events(path)
    assert [dumps(e) for e in events] == [dumps(e) for e in EVERY_KIND]
    assert len(warnings) == 5
    assert all(w.startswith(f"{path}:") and "skipped" in w for w in warnings)
    assert f"{path}:4: skipped: not JSON" in warnings[0]


def test_cut_off_zst_keeps_every_complete_block(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl.zst"
    writer = RecordingWriter(path)
    for i in range(200):
        writer.write(Heartbeat(float(i)))
        if i % 50 == 49:
            writer.flush()
    writer.flush()  # flushed but never closed, as after kill -9
    events, warnings = read_events(path)
    assert [e.t for e in events] == [float(i) for i in range(200)]
    assert warnings
    assert "cut off" in warnings[-1]
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 5])
    events, warnings = read_events(path)
    assert [e.t for e in events] == [float(i) for i in range(150)]


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"", "empty"),
        (b'{"k":"heartbeat","t":1}\n', "not a tokenwatch recording"),
        (b"\x00\x01garbage", "not a tokenwatch recording"),
        (b'{"tokenwatch_recording": 99}\n', "newer than this tokenwatch reads"),
    ],
)
def test_files_that_are_not_recordings_are_one_line_errors(
    tmp_path: Path, content: bytes, problem: str
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(content)
    with pytest.raises(RecordingFormatError, match=problem) as info:
        read_events(path)
    assert "\n" not in str(info.value)


def test_missing_file_and_directory_are_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(RecordingFormatError, match="no such file"):
        read_events(tmp_path / "nope.jsonl")
    with pytest.raises(RecordingFormatError, match="is a directory"):
        read_events(tmp_path)


def test_writer_never_overwrites_a_recording(tmp_path: Path) -> None:
    path = write(tmp_path / "r.jsonl", [START])
    with pytest.raises(RecordingError, match="already exists"):
        RecordingWriter(path)
    with pytest.raises(RecordingError, match="cannot create"):
        RecordingWriter(tmp_path / "no" / "such" / "dir.jsonl")


@pytest.mark.parametrize(
    "line",
    [
        b'{"k":"gpu_batch","t":1,"node_index":[0,1],"gpu":[0],"m":{},"throttle_reasons":[0,0]}',
        b'{"k":"gpu_batch","t":1,"node_index":[0],"gpu":[0],"m":{"power_w":["hot"]},"throttle_reasons":[0]}',
        b'{"k":"progress","t":1,"node":"a","tokens":-5}',
        b'{"k":"progress","t":"soon","node":"a","tokens":5}',
        b'{"k":"progress","t":1e400,"node":"a","tokens":5}',
        b'{"k":"latency","t":1,"node":"a","metric":"ttfb","values_s":[1]}',
        b'{"k":"status","t":1,"node":"a","state":"sleepy"}',
        b'{"k":"gpu","t":1,"node":"a","gpu":0,"throttle_reasons":1180591620717411303424}',
        b'{"k":"run_started","t":0,"name":"x","scenario":"Offline","nodes":["a","a"],"gpus_per_node":1,'
        b'"source":"sim","wall_epoch":0}',
    ],
)
def test_malformed_records_raise_codec_errors(line: bytes) -> None:
    with pytest.raises(CodecError):
        loads(line)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(junk=st.lists(st.binary(max_size=300), max_size=8), cut=st.integers(min_value=0, max_value=400))
def test_random_damage_never_raises_and_keeps_every_intact_line(
    tmp_path: Path, junk: list[bytes], cut: int
) -> None:
    path = tmp_path / "fuzz.jsonl"
    path.unlink(missing_ok=True)
    write(path, EVERY_KIND)
    header, *body = path.read_bytes().split(b"\n")[:-1]
    prefix = header + b"\n" + b"".join(j.replace(b"\n", b" ") + b"\n" for j in junk)
    full = prefix + b"".join(line + b"\n" for line in body)
    damaged = full[: max(len(prefix), len(full) - cut)]
    path.write_bytes(damaged)
    events, _ = read_events(path)  # must not raise
    # Junk has lines of its own and the cut only shortens the end: every body line still whole is read,
    # in order, after whatever the junk produced; a last line cut just before its newline may be read too.
    ends = np.cumsum([len(line) + 1 for line in body]) + len(prefix)
    whole = int((ends <= len(damaged)).sum())
    got = [dumps(e) for e in events]
    want = [dumps(e) for e in EVERY_KIND[:whole]]
    assert got[len(got) - len(want) :] == want or got[len(got) - len(want) - 1 : -1] == want


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=2000))
def test_arbitrary_bytes_give_events_or_a_format_error(data: bytes) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "any.jsonl"
        path.write_bytes(b'{"tokenwatch_recording": 1}\n' + data)
        events, warnings = read_events(path)
        assert isinstance(events, list)
        assert isinstance(warnings, list)


def test_reading_only_some_gpu_columns_gives_those_columns_exactly(tmp_path: Path) -> None:
    path = write(tmp_path / "r.jsonl", EVERY_KIND)
    full, _ = read_events(path)
    reader = RecordingReader(path, gpu_metrics=("power_w",))
    partial = list(reader.events())
    assert reader.warnings == []
    assert [type(e) for e in partial] == [type(e) for e in full]
    for a, b in zip(full, partial, strict=True):
        if isinstance(a, GpuBatch):
            assert isinstance(b, GpuBatch)
            power = GPU_METRICS.index("power_w")
            assert np.array_equal(b.values[:, power], a.values[:, power])
            assert np.isnan(np.delete(b.values, power, axis=1)).all()
            assert np.array_equal(b.node_index, a.node_index)
            assert not b.throttle_reasons.any()
        else:
            assert dumps(a) == dumps(b)


@pytest.mark.parametrize(
    "line",
    [
        b'{"k":"gpu_batch","t":1,"node_index":[0],"gpu":[0],"m":{"power_w":[1.5]},"throttle_reasons":[0]',
        b'{"k":"gpu_batch","t":1,"node_index":[0],"gpu":[0],"m":{"power_w":[1.5,]},"throttle_reasons":[0]}',
        b'{"k":"gpu_batch","t":"x","node_index":[0],"gpu":[0],"m":{"power_w":[1.5]},"throttle_reasons":[0]}',
        b'{"k":"gpu_batch","t":1,"node_index":[0,1],"gpu":[0],"m":{"power_w":[1.5]},"throttle_reasons":[0]}',
    ],
)
def test_partial_reads_reject_what_a_full_read_rejects(line: bytes) -> None:
    with pytest.raises(CodecError):
        loads(line)
    with pytest.raises(CodecError):
        loads(line, ("power_w",))
