"""GPU energy counters as differences in .zst recordings: smaller, and every counter back bit for bit."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import orjson
import pytest

from tests.conftest import unzstd
from tokenwatch.base.events import GPU_METRICS, Event, GpuBatch, Heartbeat
from tokenwatch.recording import ReadPoint, RecordingReader, RecordingWriter
from tokenwatch.recording.codec import CodecError, Decoder, dumps
from tokenwatch.recording.gpu_int_columns import CODES_KEY, DIFFERENCE
from tokenwatch.recording.writer import FRAME_BYTES

ENERGY = GPU_METRICS.index("energy_j")
POWER = GPU_METRICS.index("power_w")


def batches(n: int, gpus: int = 72, decimals: int = 3, seed: int = 0) -> list[GpuBatch]:
    """A rack's GPUs once a second: power near 1,400 W, counters from weeks of work, to ``decimals``."""
    rng = np.random.default_rng(seed)
    counters = rng.uniform(1e8, 5e8, gpus).round(decimals)
    out = []
    for t in range(n):
        values = np.full((gpus, len(GPU_METRICS)), np.nan)
        values[:, POWER] = rng.normal(1385, 6, gpus).round(1)
        counters = (counters + values[:, POWER] * rng.uniform(0.999, 1.001, gpus)).round(decimals)
        values[:, ENERGY] = counters
        nodes = np.repeat(np.arange(gpus // 4), 4)
        out.append(
            GpuBatch(float(t), nodes, np.tile(np.arange(4), gpus // 4), values, np.zeros(gpus, np.uint64))
        )
    return out


def energy_code(line: bytes) -> int | None:
    """How a GPU batch line writes its energy (recording.gpu_int_columns): None as floats, below
    DIFFERENCE whole (in millijoules), from DIFFERENCE up as differences from the batch before."""
    code: int | None = orjson.loads(line).get(CODES_KEY, {}).get("energy_j")
    return code


def write(path: Path, events: Sequence[Event]) -> None:
    with RecordingWriter(path) as writer:
        for event in events:
            writer.write(event)


def read_batches(path: Path, **kwargs: object) -> list[GpuBatch]:
    return [e for e in RecordingReader(path, **kwargs).events() if isinstance(e, GpuBatch)]  # type: ignore[arg-type]


def test_every_counter_comes_back_exactly_and_the_file_is_smaller(tmp_path: Path) -> None:
    events = batches(600)
    write(tmp_path / "deltas.jsonl.zst", events)
    write(tmp_path / "whole.jsonl", events)  # plain recordings keep whole values
    back = read_batches(tmp_path / "deltas.jsonl.zst")
    assert len(back) == len(events)
    for want, got in zip(events, back, strict=True):
        assert np.array_equal(want.values, got.values, equal_nan=True)
    lines = unzstd((tmp_path / "deltas.jsonl.zst").read_bytes()).splitlines()
    codes = [energy_code(line) for line in lines[1:]]
    assert sum(code is not None and code >= DIFFERENCE for code in codes) >= 590  # all but each frame's first
    assert CODES_KEY.encode() not in (tmp_path / "whole.jsonl").read_bytes()
    whole_zst = tmp_path / "whole-compressed.zst"
    import zstandard

    whole_zst.write_bytes(zstandard.ZstdCompressor(level=3).compress((tmp_path / "whole.jsonl").read_bytes()))
    assert (tmp_path / "deltas.jsonl.zst").stat().st_size < 0.8 * whole_zst.stat().st_size


def test_a_counter_with_more_than_millijoule_digits_is_written_whole(tmp_path: Path) -> None:
    events = batches(50, gpus=8, decimals=6)
    write(tmp_path / "fine.jsonl.zst", events)
    lines = unzstd((tmp_path / "fine.jsonl.zst").read_bytes()).splitlines()
    assert all(energy_code(line) is None for line in lines[1:])  # floats, as they were read
    for want, got in zip(events, read_batches(tmp_path / "fine.jsonl.zst"), strict=True):
        assert np.array_equal(want.values, got.values, equal_nan=True)


def test_a_reader_starting_at_any_frame_reads_exact_counters(tmp_path: Path) -> None:
    events: list[Event] = []
    for batch in batches(3000):
        events += [batch, Heartbeat(batch.t + 0.5)]
    path = tmp_path / "long.jsonl.zst"
    write(path, events)
    assert path.stat().st_size > 0
    assert len(unzstd(path.read_bytes())) > 3 * FRAME_BYTES
    reader = RecordingReader(path)
    points: list[ReadPoint] = []
    for _ in reader.events():
        if not points or reader.point != points[-1]:
            points.append(reader.point)
    assert len(points) >= 3
    by_t = {b.t: b.values for b in events if isinstance(b, GpuBatch)}
    for point in points[1:]:
        got = read_batches(path, start=point)
        assert got, point
        for batch in got:
            assert np.array_equal(by_t[batch.t], batch.values, equal_nan=True)


def test_a_difference_whose_base_was_lost_is_skipped_not_read_wrong(tmp_path: Path) -> None:
    """Batch 3 counts from batch 2, which this reader never saw: its energy and, since the GPU columns are
    differences too (recording.gpu_int_columns), the whole batch are skipped with a reason, never wrong."""
    path = tmp_path / "lost.jsonl.zst"
    events = batches(5, gpus=8)
    write(path, events)
    lines = [line for line in unzstd(path.read_bytes()).splitlines()[1:] if line]
    decoder = Decoder()
    kept = [decoder.loads(line) for line in lines[:2]]
    with pytest.raises(CodecError, match="not read wrong"):
        decoder.loads(lines[3])  # batch 2 lost to damage
    before = kept[1]
    assert isinstance(before, GpuBatch)
    assert np.array_equal(before.values, events[1].values, equal_nan=True)


def test_a_gpu_without_a_reading_in_one_batch_is_missing_there_and_exact_after(tmp_path: Path) -> None:
    events = batches(6, gpus=4)
    gap = events[3].values.copy()
    gap[1, ENERGY] = math.nan
    events[3] = GpuBatch(3.0, events[3].node_index, events[3].gpu, gap, events[3].throttle_reasons)
    write(tmp_path / "gap.jsonl.zst", events)
    for want, got in zip(events, read_batches(tmp_path / "gap.jsonl.zst"), strict=True):
        assert np.array_equal(want.values, got.values, equal_nan=True)


@pytest.mark.parametrize("wanted", [("power_w",), ("power_w", "energy_j")])
def test_the_fast_column_reader_restores_counters_too(tmp_path: Path, wanted: tuple[str, ...]) -> None:
    events = batches(20, gpus=8)
    write(tmp_path / "fast.jsonl.zst", events)
    for want, got in zip(events, read_batches(tmp_path / "fast.jsonl.zst", gpu_metrics=wanted), strict=True):
        assert np.array_equal(want.values[:, POWER], got.values[:, POWER])
        if "energy_j" in wanted:
            assert np.array_equal(want.values[:, ENERGY], got.values[:, ENERGY])
        else:
            assert np.isnan(got.values[:, ENERGY]).all()
    assert orjson.loads(dumps(events[0]))["k"] == "gpu_batch"


def test_a_fleet_sized_batch_keeps_its_differences_across_eight_batches_a_frame(tmp_path: Path) -> None:
    """A batch of 4,608 GPUs is ~300 KB: frames of 1 MiB held three, and wrote every third batch's counters
    whole. A frame holds at least eight of the longest line, so at most one batch in eight is whole."""
    events = batches(40, gpus=4608)
    path = tmp_path / "fleet.jsonl.zst"
    write(path, events)
    lines = [line for line in unzstd(path.read_bytes()).splitlines()[1:] if line]
    assert min(map(len, lines)) > 200_000  # four of them pass FRAME_BYTES
    whole = sum((energy_code(line) or 0) < DIFFERENCE for line in lines)
    assert whole <= 5  # 40 batches, eight or more a frame
    for want, got in zip(events, read_batches(path), strict=True):
        assert np.array_equal(want.values, got.values, equal_nan=True)
