"""Latency histograms as bucket numbers in .zst recordings: every value and count back exactly, old
recordings read as before, damage skipped with one line."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path

import numpy as np
import orjson
import pytest
import zstandard

from tests.conftest import SAMPLE_RUNS, unzstd
from tokenwatch.base.events import Event, Heartbeat, LatencyBatch
from tokenwatch.base.log_buckets import GAMMA, MIN_VALUE_S, N_BUCKETS, bucket_value, compress
from tokenwatch.inputs.sim.profile import load_profile
from tokenwatch.inputs.sim.rack_sim import RackSimulation, SimSettings
from tokenwatch.recording import RecordingReader, RecordingWriter, read_events
from tokenwatch.recording.codec import dumps
from tokenwatch.recording.latency_buckets import TABLE_KEY, reference_values, table_differences

DATA = Path(__file__).parents[1] / "data"
OLD_RECORDINGS = sorted(
    path
    for path in [*DATA.rglob("*.jsonl*"), *SAMPLE_RUNS.glob("*.jsonl*")]
    if path.suffix in (".jsonl", ".zst")
)


def write(path: Path, events: Sequence[Event]) -> None:
    with RecordingWriter(path) as writer:
        for event in events:
            writer.write(event)


def canonical(events: Sequence[Event]) -> list[bytes]:
    """Each event's full encoding: floats to the last bit (orjson writes the shortest exact form)."""
    return [dumps(e) for e in events]


def histogram(t: float, node: str, counts: dict[int, int]) -> LatencyBatch:
    """A histogram on the log buckets as a source makes one: its values from ``bucket_value`` of just
    its buckets (the recording's table is computed once, for all of them)."""
    buckets = sorted(counts)
    values = bucket_value(np.array(buckets))
    return LatencyBatch(t, node, "ttft", values, np.array([counts[i] for i in buckets], np.int64))


def is_recording(path: Path) -> bool:
    with path.open("rb") as fh:
        if path.suffix == ".zst":
            head = zstandard.ZstdDecompressor().stream_reader(fh).read(64)
        else:
            head = fh.read(64)
    return head.startswith(b'{"tokenwatch_recording"')


def test_a_server_run_reads_back_event_for_event_and_its_histograms_take_half_the_bytes(
    tmp_path: Path,
) -> None:
    settings = SimSettings(load_profile("gb300-nvl72"), scenario="Server", seed=2, duration_s=120.0)
    events = list(RackSimulation(settings).events())
    histograms = [e for e in events if isinstance(e, LatencyBatch)]
    assert len(histograms) > 300
    write(tmp_path / "run.jsonl.zst", events)
    write(tmp_path / "run.jsonl", events)  # plain recordings keep the values
    back, warnings = read_events(tmp_path / "run.jsonl.zst")
    assert warnings == []
    assert canonical(back) == canonical(events)
    lines = unzstd((tmp_path / "run.jsonl.zst").read_bytes()).splitlines()
    assert sum(b'"first_bucket"' in line for line in lines) == len(histograms)
    assert not any(b'"values_s"' in line for line in lines)
    assert b'"first_bucket"' not in (tmp_path / "run.jsonl").read_bytes()
    whole = zstandard.ZstdCompressor(level=3).compress(b"\n".join(dumps(e) for e in histograms))
    buckets = zstandard.ZstdCompressor(level=3).compress(
        b"\n".join(line for line in lines if line.startswith(b'{"k":"latency"'))
    )
    assert len(buckets) < 0.6 * len(whole)


def on_buckets(buckets: Sequence[int], counts: Sequence[int]) -> LatencyBatch:
    """Values of the log buckets in the order given (as a source might send them), with these counts."""
    values = compress(np.bincount(buckets, minlength=N_BUCKETS))[0]
    order = np.argsort(np.argsort(buckets))  # each bucket's place among the sorted ones
    return LatencyBatch(1.0, "n0", "ttft", values[order], np.array(counts, np.int64))


@pytest.mark.parametrize(
    ("what", "event"),
    [
        ("raw latencies", LatencyBatch(1.0, "n0", "e2e", np.array([0.5, 0.2, 0.5]))),
        (
            "a Prometheus layout",
            LatencyBatch(1.0, "n0", "e2e", np.array([0.1, 0.25, 1.0]), np.array([3, 1, 2])),
        ),
        ("buckets out of order", on_buckets([600, 500], [1, 2])),
        ("a count of zero", on_buckets([500, 501], [0, 4])),
        ("a negative count", on_buckets([500, 501], [3, -4])),
        ("counts above 90", histogram(1.0, "n0", {700: 91, 701: 10**12, 703: 1})),
        ("two latencies hours apart", histogram(1.0, "n0", {10: 1, 1200: 1})),
        (
            "the first and last buckets",
            histogram(1.0, "n0", {0: 3, N_BUCKETS - 1: 1} | dict.fromkeys(range(1, 400), 1)),
        ),
        ("a value past the last bucket", LatencyBatch(1.0, "n0", "e2e", np.array([2e5]), np.array([1]))),
        ("no latency", LatencyBatch(1.0, "n0", "ttft", np.array([]), np.array([], np.int64))),
    ],
)
def test_every_histogram_comes_back_exactly_whatever_form_it_is_written_in(
    tmp_path: Path, what: str, event: LatencyBatch
) -> None:
    # In a burst with ordinary histograms, as a source sends them: each is written in its own form.
    burst = [histogram(1.0, "n1", {600: 5, 602: 1}), event, histogram(1.0, "n2", {610: 90, 611: 2})]
    write(tmp_path / "run.jsonl.zst", [*burst, Heartbeat(2.0)])
    back, warnings = read_events(tmp_path / "run.jsonl.zst")
    lines = unzstd((tmp_path / "run.jsonl.zst").read_bytes()).splitlines()
    assert b'"first_bucket"' in lines[1]
    assert b'"first_bucket"' in lines[3]  # its neighbours in bucket form whatever its own
    if event.counts is not None and len(event.counts) and event.counts.min() < 0:
        # Unreadable however written (a count below zero is refused): the line alone is lost.
        assert len(warnings) == 1
        assert "negative" in warnings[0]
        assert canonical(back) == canonical([burst[0], burst[2], Heartbeat(2.0)])
        return
    assert warnings == [], what
    assert canonical(back) == canonical([*burst, Heartbeat(2.0)]), what


def test_the_table_gives_back_the_buckets_own_values_bit_for_bit(tmp_path: Path) -> None:
    every = histogram(1.0, "n0", dict.fromkeys(range(N_BUCKETS), 1))
    write(tmp_path / "all.jsonl.zst", [every])
    lines = unzstd((tmp_path / "all.jsonl.zst").read_bytes()).splitlines()
    assert b'"first_bucket":0' in lines[1]
    (back,), _ = read_events(tmp_path / "all.jsonl.zst")
    assert isinstance(back, LatencyBatch)
    assert back.values_s.tobytes() == every.values_s.tobytes()


@pytest.mark.parametrize("path", OLD_RECORDINGS, ids=lambda p: str(p.relative_to(p.parents[1])))
def test_old_recordings_read_as_written_and_record_again_exactly(path: Path, tmp_path: Path) -> None:
    if not is_recording(path):
        pytest.skip("not a tokenwatch recording (another tool's file)")
    events, warnings = read_events(path)
    # Their histograms, as an independent parse of the lines has them.
    raw = unzstd(path.read_bytes()) if path.suffix == ".zst" else path.read_bytes()
    records = [orjson.loads(line) for line in raw.splitlines() if line.startswith(b'{"k":"latency"')]
    histograms = [e for e in events if isinstance(e, LatencyBatch)]
    if not warnings:
        assert len(histograms) == len(records)
    for record, event in zip(records, histograms, strict=False):
        assert (record["t"], record["node"], record["metric"]) == (event.t, event.node, event.metric)
        assert event.values_s.tolist() == record["values_s"]
        assert (None if event.counts is None else event.counts.tolist()) == record.get("counts")
    write(tmp_path / "again.jsonl.zst", events)
    again, again_warnings = read_events(tmp_path / "again.jsonl.zst")
    assert again_warnings == []
    assert canonical(again) == canonical(events)


BAD_LINES = [
    (b'"first_bucket":-1,"bucket_counts":"$"', "first_bucket must be a bucket number"),
    (b'"first_bucket":true,"bucket_counts":"$"', "first_bucket must be a bucket number"),
    (b'"first_bucket":1.5,"bucket_counts":"$"', "first_bucket must be a bucket number"),
    (b'"first_bucket":' + str(N_BUCKETS).encode() + b',"bucket_counts":"$"', "first_bucket must be"),
    (
        b'"first_bucket":' + str(N_BUCKETS - 1).encode() + b',"bucket_counts":"$$"',
        "runs past the last bucket",
    ),
    (b'"first_bucket":5,"bucket_counts":"$ $"', "a character that is not a count"),
    (b'"first_bucket":5,"bucket_counts":"$\\u00e9"', "a character that is not a count"),
    (b'"first_bucket":5,"bucket_counts":"###"', "holds no latency"),
    (b'"first_bucket":5,"bucket_counts":""', "holds no latency"),
    (b'"first_bucket":5,"bucket_counts":[1,-2]', "must not hold a negative count"),
    (b'"first_bucket":5,"bucket_counts":[1,99999999999999999999]', "a text of counts or a list"),
    (b'"first_bucket":5,"bucket_counts":[1,2.5]', "a text of counts or a list"),
    (b'"first_bucket":5,"bucket_counts":{"a":1}', "a text of counts or a list"),
    (b'"first_bucket":5', "without 'bucket_counts'"),
]


@pytest.mark.parametrize(("fields", "why"), BAD_LINES)
def test_a_damaged_bucket_line_is_one_warning_and_reading_goes_on(
    tmp_path: Path, fields: bytes, why: str
) -> None:
    good = histogram(2.0, "n0", {600: 3})
    path = tmp_path / "bad.jsonl.zst"
    write(path, [good])
    lines = unzstd(path.read_bytes()).splitlines()
    bad = b'{"k":"latency","t":1.0,"node":"n0","metric":"ttft",' + fields + b"}"
    path.write_bytes(zstandard.ZstdCompressor().compress(b"\n".join([lines[0], bad, lines[1]]) + b"\n"))
    events, warnings = read_events(path)
    assert canonical(events) == canonical([good])
    assert len(warnings) == 1
    assert warnings[0].startswith(f"{path}:2: ")
    assert why in warnings[0]


def test_a_lost_frame_costs_only_its_own_histograms(tmp_path: Path) -> None:
    # Histograms stand alone (no difference from an earlier one): the frames after a lost one read whole.
    events: list[Event] = []
    rng = np.random.default_rng(3)
    for k in range(1000):
        for node in range(18):
            values, counts = compress(np.bincount(rng.integers(600, 760, 300), minlength=N_BUCKETS))
            events.append(LatencyBatch(float(k), f"node{node:02d}", "ttft", values, counts))
        events.append(Heartbeat(float(k)))
    path = tmp_path / "run.jsonl.zst"
    write(path, events)
    data = path.read_bytes()
    frames = []  # (start, end, lines) of each frame
    start = 0
    while start < len(data):
        dobj = zstandard.ZstdDecompressor().decompressobj()
        content = dobj.decompress(data[start:])
        end = len(data) - len(dobj.unused_data)
        frames.append((start, end, content.count(b"\n")))
        start = end
    assert len(frames) >= 3
    (tmp_path / "cut.jsonl.zst").write_bytes(data[: frames[1][0]] + data[frames[1][1] :])
    reader = RecordingReader(tmp_path / "cut.jsonl.zst")
    back = list(reader.events())
    assert reader.warnings == []  # a frame cut out whole leaves no line torn
    before, lost = frames[0][2] - 1, frames[1][2]  # the first frame's lines less the header
    assert canonical(back) == canonical(events[:before] + events[before + lost :])


def test_the_values_come_from_the_writers_table_whatever_the_readers_machine(tmp_path: Path) -> None:
    # The header lists where the writer's bucket values differ from the reference (numpy's power differs
    # between machines in the last bit); a reader uses exactly those, never its own numpy's.
    path = tmp_path / "run.jsonl.zst"
    write(path, [histogram(1.0, "n0", {600: 2, 601: 1})])
    head, line = unzstd(path.read_bytes()).splitlines()[:2]
    header = orjson.loads(head)
    assert header.get(TABLE_KEY, []) == table_differences()
    elsewhere = np.nextafter(reference_values()[600], 1.0)  # a machine whose power rounds the other way
    header[TABLE_KEY] = [[600, float(elsewhere)]]
    path.write_bytes(zstandard.ZstdCompressor().compress(orjson.dumps(header) + b"\n" + line + b"\n"))
    (back,), warnings = read_events(path)
    assert warnings == []
    assert isinstance(back, LatencyBatch)
    assert back.values_s.tolist() == [float(elsewhere), float(reference_values()[601])]
    header[TABLE_KEY] = [[600, 0.5]]  # not the bucket's value: damage
    path.write_bytes(zstandard.ZstdCompressor().compress(orjson.dumps(header) + b"\n" + line + b"\n"))
    (back,), warnings = read_events(path)
    assert len(warnings) == 1
    assert f"{path}:1: the header's {TABLE_KEY}" in warnings[0]
    assert isinstance(back, LatencyBatch)
    assert back.values_s.tolist() == reference_values()[[600, 601]].tolist()


def test_the_reference_table_is_the_buckets_formula_rounded_once() -> None:
    # Independently: GAMMA**i from exact rationals, then the formula's own float steps.
    gamma = Fraction(GAMMA)
    for i in (0, 1, 2, 57, 600, 1000, N_BUCKETS - 1):
        want = MIN_VALUE_S * 2.0 * float(gamma**i) / (GAMMA + 1.0)
        assert reference_values()[i] == want, i
    # and within a rounding of what this machine's numpy computes
    assert np.allclose(reference_values(), bucket_value(np.arange(N_BUCKETS)), rtol=4e-16, atol=0)
