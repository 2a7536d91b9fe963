"""Damage loses only what is damaged.

A ``.zst`` recording is written as independent zstandard frames (each ends on a line, carries a
checksum and decodes alone), so a reader that meets a damaged frame skips to the next intact one and
keeps everything before and after. Time going back (a body appended twice, ``cat a b``) is reported and
the repeated span is not counted twice.
"""

from __future__ import annotations

import math
import random
import shutil
from pathlib import Path

import orjson
import pytest
import zstandard

from tests.conftest import SAMPLE_RUNS, run_tokenwatch, unzstd
from tokenwatch.base.events import Event, Heartbeat, RunStarted
from tokenwatch.recording import RecordingReader, RecordingWriter, read_events
from tokenwatch.recording.codec import Decoder, dumps
from tokenwatch.recording.latency_buckets import table_differences, writers_table
from tokenwatch.runs.from_core import summarize_recording

SERVER = SAMPLE_RUNS / "gb300-nvl72-server.jsonl.zst"
MAGIC = b"\x28\xb5\x2f\xfd"


def frames_of(data: bytes) -> list[tuple[int, int, bytes]]:
    """(start, end, decoded content) of every frame, found with zstandard alone."""
    frames = []
    start = 0
    while start < len(data):
        dobj = zstandard.ZstdDecompressor().decompressobj()
        content = dobj.decompress(data[start:])
        assert dobj.eof, "every frame of a closed recording is complete"
        end = len(data) - len(dobj.unused_data)
        frames.append((start, end, content))
        start = end
    return frames


def events_in(content: bytes) -> list[bytes]:
    """The events of one frame's lines, as their canonical encoding (the header line is no event).

    One decoder per frame: a frame is read on its own (GPU energy differences chain within it). Latency
    histograms in bucket form take the values of this machine's table, as the writer's header lists them."""
    out = []
    decoder = Decoder()
    decoder.bucket_values = writers_table(table_differences() or None)
    for line in content.split(b"\n"):
        if line and not line.startswith(b'{"tokenwatch_recording"'):
            out.append(dumps(decoder.loads(line)))
    return out


@pytest.fixture(scope="module")
def framed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Server sample re-recorded with this writer: many frames. Flushed by size alone: the writer's
    flushes on the wall clock (every 0.5 s) fall wherever a loaded machine puts them, and a frame ends at
    the first flush past its size, so they would move the frames' count from run to run."""
    path = tmp_path_factory.mktemp("frames") / "server.jsonl.zst"
    with RecordingWriter(path, flush_interval_s=math.inf) as writer:
        for event in RecordingReader(SERVER).events():
            writer.write(event)
    return path


def test_the_writer_writes_independent_checksummed_frames_ending_on_lines(framed: Path) -> None:
    data = framed.read_bytes()
    frames = frames_of(data)
    # 3.6 MiB of lines since GPU batches are whole numbers (6 MiB with histograms as bucket numbers)
    assert len(frames) >= 4
    for start, _, content in frames:
        assert data[start : start + 4] == MAGIC
        assert zstandard.get_frame_parameters(data[start:]).has_checksum
        assert content.endswith(b"\n")  # a frame holds whole lines: a reader can start at any frame
    assert b"".join(c for _, _, c in frames) == unzstd(data)


def test_corrupted_bytes_lose_only_their_frame(framed: Path, tmp_path: Path) -> None:
    data = framed.read_bytes()
    frames = frames_of(data)
    per_frame = [events_in(content) for _, _, content in frames]
    rng = random.Random(14)
    lost_frames = 0
    for trial in range(30):
        k = rng.randrange(1, len(frames))  # not the first: it holds the header
        start, end, _ = frames[k]
        at = rng.randrange(start, end - 16)
        damaged = bytearray(data)
        damaged[at : at + 16] = rng.randbytes(16)
        path = tmp_path / f"damaged{trial}.jsonl.zst"
        path.write_bytes(bytes(damaged))
        events, warnings = read_events(path)
        got = [dumps(e) for e in events]
        everything = [e for frame in per_frame for e in frame]
        without_k = [e for i, frame in enumerate(per_frame) if i != k for e in frame]
        if got == everything:  # the damage changed nothing the decoder reads
            continue
        lost_frames += 1
        assert got == without_k, f"trial {trial}: damage at byte {at} in frame {k} lost more than its frame"
        assert any("damaged" in w and f"byte {start}" in w for w in warnings), warnings
    assert lost_frames >= 25  # the damage was real in nearly every trial


def test_a_cut_off_frame_still_keeps_its_complete_blocks(tmp_path: Path) -> None:
    path = tmp_path / "cut.jsonl.zst"
    writer = RecordingWriter(path)
    for i in range(300):
        writer.write(Heartbeat(float(i)))
        if i % 50 == 49:
            writer.flush()
    writer.flush()  # never closed, as after kill -9
    events, warnings = read_events(path)
    assert [e.t for e in events] == [float(i) for i in range(300)]
    assert "cut off" in warnings[-1]


def test_old_single_frame_recordings_still_read(tmp_path: Path) -> None:
    raw = unzstd(SERVER.read_bytes())
    one = tmp_path / "one.jsonl.zst"
    one.write_bytes(zstandard.ZstdCompressor(level=3).compress(raw))
    assert len(frames_of(one.read_bytes())) == 1
    events, warnings = read_events(one)
    assert warnings == []
    assert [dumps(e) for e in events] == events_in(raw)


# ---------------------------------------------------------------------------- time order
def plain(path: Path) -> bytes:
    return unzstd(path.read_bytes())


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.zst"])
def test_a_recording_appended_to_itself_is_not_counted_twice(tmp_path: Path, suffix: str) -> None:
    single = tmp_path / f"single{suffix}"
    shutil.copyfile(SERVER, single) if suffix == ".jsonl.zst" else single.write_bytes(plain(SERVER))
    twice = tmp_path / f"twice{suffix}"
    twice.write_bytes(single.read_bytes() * 2)  # cat a a > twice
    once, _ = summarize_recording(single)
    doubled, _ = summarize_recording(twice)
    assert doubled.tokens_per_s == once.tokens_per_s
    assert [n.tokens_per_s for n in doubled.nodes] == [n.tokens_per_s for n in once.nodes]
    assert any("appended" in w for w in doubled.warnings), doubled.warnings
    done = run_tokenwatch("summarize", str(twice), "--json", timeout=60)
    assert done.returncode == 0, done.stderr
    assert any("appended" in w for w in orjson.loads(done.stdout)["warnings"])


def test_a_different_recording_appended_is_left_out(tmp_path: Path) -> None:
    first = plain(SERVER)
    other = tmp_path / "other.jsonl"
    with RecordingWriter(other) as writer:
        writer.write(RunStarted(0.0, "another run", "Offline", ("x",), 1, 10.0, None, "sim", 1.0))
        for i in range(1, 5000):
            writer.write(Heartbeat(float(i)))
    both = tmp_path / "both.jsonl"
    both.write_bytes(first + other.read_bytes())
    events, warnings = read_events(both)
    assert [dumps(e) for e in events] == events_in(first)
    assert any("a different recording" in w for w in warnings), warnings


def test_time_going_back_skips_the_repeated_span_and_says_so(tmp_path: Path) -> None:
    lines = plain(SERVER).split(b"\n")
    header, body = lines[0], [line for line in lines[1:] if line]
    decoder = Decoder()  # one for the stream: counters are differences from the batch before
    events_of_body = [decoder.loads(line) for line in body]
    times = [e.t for e in events_of_body]

    def tick_start(i: int) -> int:  # the first event of the tick at or after index i
        while times[i] == times[i - 1]:
            i += 1
        return i

    a, b = tick_start(len(body) // 3), tick_start(2 * len(body) // 3)
    # up to b, then a..b again (a body appended twice, without a header), then the rest
    path = tmp_path / "repeat.jsonl"
    path.write_bytes(b"\n".join([header, *body[:b], *body[a:b], *body[b:]]) + b"\n")
    events, warnings = read_events(path)
    assert [dumps(e) for e in events] == [
        dumps(e) for e in events_of_body
    ]  # the repeat skipped, nothing lost
    back = [w for w in warnings if "went back" in w]
    assert len(back) == 1
    # The repeat's first work counters count from a batch before it that this reader last saw at its
    # end: those lines are skipped on their own (never read wrong), the rest of the repeat by time.
    uncounted = [w for w in warnings if "not read here" in w]
    assert len(uncounted) < 100
    assert f"the {b - a - len(uncounted)} events" in back[0]


def test_small_inversions_of_a_live_run_are_kept(tmp_path: Path) -> None:
    start = RunStarted(0.0, "r", "Offline", ("a",), 1, 10.0, None, "live", 1.0)
    times = [1.0, 2.0, 1.5, 3.0, 2.9, 4.0]  # sources stamping their events a little apart
    path = tmp_path / "live.jsonl"
    with RecordingWriter(path) as writer:
        writer.write(start)
        for t in times:
            writer.write(Heartbeat(t))
    events, warnings = read_events(path)
    assert [e.t for e in events[1:]] == times
    assert warnings == []


def _events(path: Path) -> list[Event]:
    return read_events(path)[0]
