"""Work counters as differences in .zst recordings: smaller, every count back exactly, old files read."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import orjson
import pytest
import zstandard

from tests.conftest import unzstd
from tokenwatch.base.events import GPU_METRICS, Event, GpuBatch, Heartbeat, ProgressBatch
from tokenwatch.recording import ReadPoint, RecordingReader, RecordingWriter
from tokenwatch.recording.codec import CodecError, Decoder
from tokenwatch.recording.writer import FRAME_BYTES

OLD_FORMAT = Path(__file__).parents[1] / "data" / "recording" / "whole-counters.jsonl.zst"


def progress(n: int, nodes: int = 18, prompt: bool = False, seed: int = 0) -> list[ProgressBatch]:
    """A rack's nodes once a second: ~34,000 tokens and ~7 samples each, counted from hours of work."""
    rng = np.random.default_rng(seed)
    samples = rng.integers(10**6, 10**7, nodes)
    tokens = rng.integers(10**9, 10**12, nodes)
    prompts = rng.integers(10**9, 10**12, nodes)
    out = []
    for t in range(n):
        samples = samples + rng.integers(0, 15, nodes)
        tokens = tokens + rng.integers(30_000, 38_000, nodes)
        prompts = prompts + rng.integers(0, 90_000, nodes)
        out.append(ProgressBatch(float(t), np.arange(nodes), samples, tokens, prompts if prompt else None))
    return out


def write(path: Path, events: Sequence[Event]) -> None:
    with RecordingWriter(path) as writer:
        for event in events:
            writer.write(event)


def read_progress(path: Path, **kwargs: object) -> list[ProgressBatch]:
    return [e for e in RecordingReader(path, **kwargs).events() if isinstance(e, ProgressBatch)]  # type: ignore[arg-type]


def same(a: ProgressBatch, b: ProgressBatch) -> bool:
    pa, pb = a.prompt_tokens_done, b.prompt_tokens_done
    prompts = (pa is None and pb is None) or (pa is not None and pb is not None and np.array_equal(pa, pb))
    return (
        a.t == b.t
        and a.filled == b.filled
        and np.array_equal(a.node_index, b.node_index)
        and np.array_equal(a.samples_done, b.samples_done)
        and np.array_equal(a.tokens_done, b.tokens_done)
        and prompts
    )


@pytest.mark.parametrize("prompt", [False, True])
def test_every_count_comes_back_exactly_and_the_file_is_smaller(tmp_path: Path, prompt: bool) -> None:
    events = progress(600, prompt=prompt)
    write(tmp_path / "deltas.jsonl.zst", events)
    write(tmp_path / "whole.jsonl", events)  # plain recordings keep whole counters
    back = read_progress(tmp_path / "deltas.jsonl.zst")
    assert len(back) == len(events)
    assert all(same(want, got) for want, got in zip(events, back, strict=True))
    lines = unzstd((tmp_path / "deltas.jsonl.zst").read_bytes()).splitlines()
    assert sum(b'"tokens_delta"' in line for line in lines) == len(events) - 1  # all but the first
    assert (b'"prompt_tokens_delta"' in lines[-1]) == prompt
    assert b"_delta" not in (tmp_path / "whole.jsonl").read_bytes()
    whole = zstandard.ZstdCompressor(level=3).compress((tmp_path / "whole.jsonl").read_bytes())
    assert (tmp_path / "deltas.jsonl.zst").stat().st_size < 0.8 * len(whole)


def test_a_change_of_nodes_or_columns_starts_whole_and_history_points_stay_filled(tmp_path: Path) -> None:
    full = progress(8, nodes=6)
    down = [ProgressBatch(b.t + 8, b.node_index[1:], b.samples_done[1:], b.tokens_done[1:]) for b in full[:3]]
    prompt = progress(3, nodes=6, prompt=True, seed=1)
    filled = [
        ProgressBatch(b.t + 20, b.node_index, b.samples_done, b.tokens_done, filled=True) for b in full[4:]
    ]
    events = [*full[:4], *down, *[ProgressBatch(b.t + 11, *_arrays(b)) for b in prompt], *filled]
    write(tmp_path / "mixed.jsonl.zst", events)
    back = read_progress(tmp_path / "mixed.jsonl.zst")
    assert len(back) == len(events)
    assert all(same(want, got) for want, got in zip(events, back, strict=True))
    lines = [orjson.loads(line) for line in unzstd((tmp_path / "mixed.jsonl.zst").read_bytes()).splitlines()]
    whole_at = [r["t"] for r in lines if r.get("k") == "progress_batch" and "tokens" in r]
    # The first of each set of nodes and columns is whole (the filled points continue the first set).
    assert whole_at == [0.0, 8.0, 11.0]


def _arrays(b: ProgressBatch) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    return b.node_index, b.samples_done, b.tokens_done, b.prompt_tokens_done


def test_a_reader_starting_at_any_frame_reads_exact_counts(tmp_path: Path) -> None:
    events: list[Event] = []
    for batch in progress(12_000, nodes=32):
        events += [batch, Heartbeat(batch.t + 0.5)]
    path = tmp_path / "long.jsonl.zst"
    write(path, events)
    assert len(unzstd(path.read_bytes())) > 3 * FRAME_BYTES
    reader = RecordingReader(path)
    points: list[ReadPoint] = []
    for _ in reader.events():
        if not points or reader.point != points[-1]:
            points.append(reader.point)
    assert len(points) >= 3
    by_t = {b.t: b for b in events if isinstance(b, ProgressBatch)}
    for point in points[1:]:
        got = read_progress(path, start=point)
        assert got, point
        assert all(same(by_t[batch.t], batch) for batch in got)


def test_counts_whose_base_was_lost_are_a_skipped_line_not_wrong_counts(tmp_path: Path) -> None:
    path = tmp_path / "lost.jsonl.zst"
    events = progress(5, nodes=4)
    write(path, events)
    lines = [line for line in unzstd(path.read_bytes()).splitlines()[1:] if line]
    decoder = Decoder()
    assert same(decoder.loads(lines[0]), events[0])  # type: ignore[arg-type]
    assert same(decoder.loads(lines[1]), events[1])  # type: ignore[arg-type]
    # Line 2 lost to damage: line 3 counts from it, and cannot be read.
    with pytest.raises(CodecError, match="differences from a batch not read here"):
        decoder.loads(lines[3])
    # Nor can line 4, which counts from line 3: never a wrong count.
    with pytest.raises(CodecError, match="not read here"):
        decoder.loads(lines[4])


def test_a_damaged_line_in_a_recording_costs_the_counts_chained_on_it_with_warnings(tmp_path: Path) -> None:
    path = tmp_path / "damaged.jsonl.zst"
    events = progress(6, nodes=4)
    write(path, events)
    lines = unzstd(path.read_bytes()).splitlines(keepends=True)
    lines[3] = lines[3].replace(
        b'"tokens_delta":[', b'"tokens_delta":["x",'
    )  # batch 2 (line 1 is the header)
    path.write_bytes(zstandard.ZstdCompressor(write_checksum=True).compress(b"".join(lines)))
    reader = RecordingReader(path)
    got = [e for e in reader.events() if isinstance(e, ProgressBatch)]
    assert [b.t for b in got] == [0.0, 1.0]  # batches 3-5 count from the damaged one: skipped, not wrong
    assert all(same(want, b) for want, b in zip(events, got, strict=False))
    assert len(reader.warnings) == 4
    assert all("skipped" in w for w in reader.warnings)


@pytest.mark.parametrize(
    ("delta", "why"),
    [
        ("[1,2,3]", "one whole number per node"),
        ('"many"', "whole numbers"),
        ("[1,2,3,1e30]", "whole numbers"),
        ("[1,2,3,-99999999999999999]", "must not be negative"),
    ],
)
def test_bad_differences_are_one_clear_line(tmp_path: Path, delta: str, why: str) -> None:
    path = tmp_path / "bad.jsonl.zst"
    write(path, progress(2, nodes=4))
    lines = [line for line in unzstd(path.read_bytes()).splitlines()[1:] if line]
    record = orjson.loads(lines[1])
    bad = lines[1].replace(orjson.dumps(record["samples_delta"]), delta.encode())
    decoder = Decoder()
    decoder.loads(lines[0])
    with pytest.raises(CodecError, match=why):
        decoder.loads(bad)


def test_a_recording_of_whole_counters_reads_as_it_was_written() -> None:
    """The sample run as written before counters were written as differences: every energy and work
    counter read equals the number on its line."""
    raw = [orjson.loads(line) for line in unzstd(OLD_FORMAT.read_bytes()).splitlines()[1:] if line]
    assert not any(key.endswith("_delta") for r in raw for key in (*r, *r.get("m", {})))
    reader = RecordingReader(OLD_FORMAT)
    events = list(reader.events())
    assert reader.warnings == []
    assert len(events) == len(raw)
    energy = GPU_METRICS.index("energy_j")
    pairs = list(zip(raw, events, strict=True))
    gpu = [(r, e) for r, e in pairs if isinstance(e, GpuBatch)]
    work = [(r, e) for r, e in pairs if isinstance(e, ProgressBatch)]
    assert len(gpu) == len(work) == 90
    for r, batch in gpu:
        assert batch.values[:, energy].tolist() == r["m"]["energy_j"]
    for r, progress_batch in work:
        assert progress_batch.tokens_done.tolist() == r["tokens"]
        assert progress_batch.samples_done.tolist() == r["samples"]


def test_the_old_recording_written_again_is_smaller_and_reads_the_same(tmp_path: Path) -> None:
    events = list(RecordingReader(OLD_FORMAT).events())
    again = tmp_path / "again.jsonl.zst"
    write(again, events)
    assert again.stat().st_size < 0.8 * OLD_FORMAT.stat().st_size
    back = list(RecordingReader(again).events())
    assert len(back) == len(events)
    for want, got in zip(events, back, strict=True):
        if isinstance(want, ProgressBatch):
            assert isinstance(got, ProgressBatch)
            assert same(want, got)
        elif isinstance(want, GpuBatch):
            assert isinstance(got, GpuBatch)
            assert np.array_equal(want.values, got.values, equal_nan=True)


def test_a_recording_decompressed_by_hand_reads_as_the_compressed_one(tmp_path: Path) -> None:
    """``zstd -d rec.jsonl.zst`` gives a plain file whose counters are differences chained across its
    1-MiB read chunks (a plain file's chunks are no frames): every count reads as from the .zst."""
    events = progress(6000, nodes=32)
    compressed = tmp_path / "rec.jsonl.zst"
    write(compressed, events)
    plain = tmp_path / "rec.jsonl"
    plain.write_bytes(unzstd(compressed.read_bytes()))
    assert plain.stat().st_size > 2 * (1 << 20)  # read in more than one chunk
    reader = RecordingReader(plain)
    back = [e for e in reader.events() if isinstance(e, ProgressBatch)]
    assert reader.warnings == []
    assert len(back) == len(events)
    assert all(same(want, got) for want, got in zip(events, back, strict=True))
