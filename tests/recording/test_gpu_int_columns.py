"""GPU batch columns as whole numbers in .zst recordings: every reading back bit for bit, and smaller.

Each sample recording in tests/data and sample_runs is read, written again in the new form and read
back: the events must equal those read from the old form. The old files themselves must read as they
did before the new form existed (the digests below were taken with the code before it).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
import zstandard

from tests.conftest import unzstd
from tokenwatch.base.events import GPU_METRICS, Event, GpuBatch
from tokenwatch.recording import RecordingReader, RecordingWriter, read_events
from tokenwatch.recording.codec import CodecError, Decoder, dumps
from tokenwatch.recording.gpu_int_columns import CODES_KEY, DIFFERENCE, ENERGY_FROM_POWER

REPO = Path(__file__).resolve().parents[2]
# sha256 (first 16 hex digits) of the events' lines, and their number, as the code before read them.
OLD_READS = {
    "sample_runs/gb300-nvl72-node-failure.jsonl.zst": ("d7b8a995f4e2152c", 10208),
    "sample_runs/gb300-nvl72-offline.jsonl.zst": ("0506f1b1b3f915fa", 9930),
    "sample_runs/gb300-nvl72-server.jsonl.zst": ("60830c523481c856", 7978),
    "tests/data/device-h200/run2/watch-Offline-nvidia-smi.jsonl.zst": ("b90ae90067e07e56", 475),
    "tests/data/device-h200/run2/watch-Offline-nvml.jsonl.zst": ("30bdb1fa2653a46d", 474),
    "tests/data/device-h200/run2/watch-Server-nvidia-smi.jsonl.zst": ("51d80c918a11f3ec", 312),
    "tests/data/device-h200/run2/watch-Server-nvml.jsonl.zst": ("87ce2f3ab98fba52", 314),
    "tests/data/device-h200/watch-Offline-nvidia-smi.jsonl.zst": ("f53e295b69f37c10", 428),
    "tests/data/device-h200/watch-Offline-nvml.jsonl.zst": ("edb018867fac8f19", 428),
    "tests/data/device-h200/watch-Server-nvidia-smi.jsonl.zst": ("de41f784277e916f", 298),
    "tests/data/device-h200/watch-Server-nvml.jsonl.zst": ("315cc55e7d7130b5", 300),
    "tests/data/engine/watched-runs/offline-1033.jsonl.zst": ("1c7121da78e64fa3", 724),
    "tests/data/engine/watched-runs/offline-357.jsonl.zst": ("be8867decba69e11", 230),
    "tests/data/engine/watched-runs/offline-399-late-start.jsonl.zst": ("ea583109d96ebb42", 292),
    "tests/data/engine/watched-runs/offline-620.jsonl.zst": ("83d3ec4b71b63c32", 677),
    "tests/data/engine/watched-runs/offline-760.jsonl.zst": ("53277c35762f1248", 316),
    "tests/data/engine/watched-runs/server-198.jsonl.zst": ("99f2e0e2587334e6", 690),
    "tests/data/engine/watched-runs/server-52-late-start.jsonl.zst": ("d545a8e4286005a3", 573),
    "tests/data/recording/pre-energy-columns.jsonl.zst": ("e30ed35baf5d72bf", 112),
    "tests/data/recording/whole-counters.jsonl.zst": ("13c2862d766b4f1e", 217),
    "tests/data/tui/fault-run-end.jsonl.zst": ("9eef579927374b42", 811),
}
HEADER_KEYS_OF_THE_WRITER = ("tokenwatch_recording", "tokenwatch_version", "created", "latency_bucket_values")
POWER, ENERGY, UTIL, HBM_USED = (
    GPU_METRICS.index(m) for m in ("power_w", "energy_j", "util_pct", "hbm_used_mib")
)


def rewrite(source: Path, target: Path) -> list[Event]:
    """``source``'s events written to ``target`` by today's writer (its header's run facts kept)."""
    reader = RecordingReader(source)
    events = list(reader.events())
    meta = {k: v for k, v in reader.header.items() if k not in HEADER_KEYS_OF_THE_WRITER}
    with RecordingWriter(target, flush_interval_s=float("inf"), meta=meta) as writer:
        for event in events:
            writer.write(event)
    return events


def assert_same_events(want: Sequence[Event], got: Sequence[Event]) -> None:
    assert len(got) == len(want)
    for a, b in zip(want, got, strict=True):
        assert dumps(a) == dumps(b)
        if isinstance(a, GpuBatch):  # bit for bit, NaN included
            assert isinstance(b, GpuBatch)
            assert a.values.tobytes() == b.values.tobytes()


@pytest.mark.parametrize("name", sorted(OLD_READS))
def test_old_recordings_read_as_before(name: str) -> None:
    events, _ = read_events(REPO / name)
    digest, count = OLD_READS[name]
    assert len(events) == count
    assert hashlib.sha256(b"".join(dumps(e) for e in events)).hexdigest()[:16] == digest


@pytest.mark.parametrize("name", sorted(OLD_READS))
def test_every_sample_written_in_the_new_form_reads_back_the_same_events(name: str, tmp_path: Path) -> None:
    target = tmp_path / "again.jsonl.zst"
    events = rewrite(REPO / name, target)
    back, warnings = read_events(target)
    assert warnings == []
    assert_same_events(events, back)
    lines = unzstd(target.read_bytes()).splitlines()
    if any(isinstance(e, GpuBatch) and len(e.gpu) for e in events):
        assert any(CODES_KEY.encode() in line for line in lines)


def gpu_lines_compressed(path: Path) -> tuple[int, list[bytes]]:
    """The recording's GPU batch lines, compressed alone as the recorder would (zstd 3), and the lines."""
    lines = [line for line in unzstd(path.read_bytes()).splitlines() if line.startswith(b'{"k":"gpu_batch"')]
    return len(zstandard.ZstdCompressor(level=3).compress(b"\n".join(lines))), lines


@pytest.mark.parametrize("name", [n for n in OLD_READS if n.startswith("sample_runs/")])
def test_the_simulators_gpu_batches_are_smaller(name: str, tmp_path: Path) -> None:
    target = tmp_path / "again.jsonl.zst"
    rewrite(REPO / name, target)
    old_bytes, old_lines = gpu_lines_compressed(REPO / name)
    new_bytes, new_lines = gpu_lines_compressed(target)
    assert len(new_lines) == len(old_lines)
    assert CODES_KEY.encode() not in old_lines[5]
    assert new_bytes < 0.85 * old_bytes  # measured: 0.74 (Server), 0.68 (Offline)


def smi_batches(n: int) -> list[GpuBatch]:
    """Two nodes of four GPUs as nvidia-smi reports them: power to 0.01 W, utilisation and clocks whole,
    an energy counter in millijoules; HBM in binary fractions of a MiB (no decimal scale gives them back)."""
    rng = np.random.default_rng(7)
    gpus = 8
    energy = rng.uniform(1e8, 2e8, gpus).round(3)
    out = []
    for t in range(n):
        values = np.full((gpus, len(GPU_METRICS)), np.nan)
        values[:, POWER] = rng.normal(650, 30, gpus).round(2)
        values[:, UTIL] = rng.integers(0, 101, gpus).astype(float)
        values[:, HBM_USED] = rng.integers(0, 2**20, gpus) / 16.0
        energy = (energy + values[:, POWER] * rng.uniform(0.97, 1.03, gpus)).round(3)
        values[:, ENERGY] = energy
        if t == 3:
            values[2, UTIL] = np.nan  # a reading missed: the column goes as floats, this batch only
        out.append(
            GpuBatch(
                float(t), np.repeat([0, 1], 4), np.tile(np.arange(4), 2), values, np.zeros(gpus, np.uint64)
            )
        )
    return out


def records(path: Path) -> list[dict[str, Any]]:
    lines = unzstd(path.read_bytes()).splitlines()[1:]
    return [orjson.loads(line) for line in lines if line.startswith(b'{"k":"gpu_batch"')]


def test_real_readings_come_back_bit_for_bit_each_column_at_its_own_scale(tmp_path: Path) -> None:
    events = smi_batches(6)
    path = tmp_path / "smi.jsonl.zst"
    with RecordingWriter(path) as writer:
        for event in events:
            writer.write(event)
    back = [e for e in read_events(path)[0] if isinstance(e, GpuBatch)]
    assert_same_events(events, back)
    written = records(path)
    assert written[0][CODES_KEY] == {"power_w": 2, "util_pct": 0, "energy_j": 3}  # the first: whole
    for record in written[1:3]:  # then differences, the energy's less the power's
        assert record[CODES_KEY] == {
            "power_w": DIFFERENCE + 2,
            "util_pct": DIFFERENCE,
            "energy_j": ENERGY_FROM_POWER,
        }
    assert "util_pct" not in written[3][CODES_KEY]  # its NaN: floats, null where missing
    assert written[4][CODES_KEY]["util_pct"] == 0  # no base at a scale the batch before had: whole again
    assert all("hbm_used_mib" not in r[CODES_KEY] for r in written)  # 1/16 MiB: floats as before


def test_a_reader_of_some_columns_reads_the_same_power_and_energy(tmp_path: Path) -> None:
    path = tmp_path / "smi.jsonl.zst"
    with RecordingWriter(path) as writer:
        for event in smi_batches(6):
            writer.write(event)
    full = [e for e in read_events(path)[0] if isinstance(e, GpuBatch)]
    for metrics in (("energy_j",), ("power_w",), ("util_pct", "energy_j")):
        reader = RecordingReader(path, gpu_metrics=metrics)
        some = [e for e in reader.events() if isinstance(e, GpuBatch)]
        assert reader.warnings == []
        for a, b in zip(full, some, strict=True):
            for metric in metrics:
                i = GPU_METRICS.index(metric)
                assert a.values[:, i].tobytes() == b.values[:, i].tobytes()


def one_frame(lines: Sequence[bytes]) -> bytes:
    return zstandard.ZstdCompressor(level=3, write_checksum=True).compress(b"\n".join(lines) + b"\n")


def test_a_batch_lost_inside_a_frame_skips_the_batches_counted_from_it_never_reads_them_wrong(
    tmp_path: Path,
) -> None:
    events = smi_batches(6)
    path = tmp_path / "smi.jsonl.zst"
    with RecordingWriter(path) as writer:
        for event in events:
            writer.write(event)
    lines = unzstd(path.read_bytes()).splitlines()
    damaged = tmp_path / "lost.jsonl.zst"
    damaged.write_bytes(one_frame([line for i, line in enumerate(lines) if i != 2]))  # the second batch
    reader = RecordingReader(damaged)
    back = [e for e in reader.events() if isinstance(e, GpuBatch)]
    # Each later batch of the frame counts from the one before it: skipped, one warning each.
    assert [e.t for e in back] == [0.0]
    assert_same_events([events[0]], back)
    assert sum("not read wrong" in w for w in reader.warnings) == 4


def test_a_recording_cut_mid_frame_gives_a_warning_and_the_events_before_the_cut(tmp_path: Path) -> None:
    target = tmp_path / "server.jsonl.zst"
    events = rewrite(REPO / "sample_runs/gb300-nvl72-server.jsonl.zst", target)
    data = target.read_bytes()
    cut = tmp_path / "cut.jsonl.zst"
    cut.write_bytes(data[: len(data) * 3 // 5])
    back, warnings = read_events(cut)
    assert warnings
    assert "cut off" in warnings[-1]
    assert 0 < len(back) < len(events)
    assert_same_events(events[: len(back)], back)


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({CODES_KEY: {"power_w": 7}}, "unknown code"),
        ({CODES_KEY: ["power_w"]}, "must map"),
        ({CODES_KEY: {"power_w": 0}, "m": {"power_w": [1.5]}}, "whole numbers"),
        ({CODES_KEY: {"power_w": 10}, "gpu_base_t": 9.0}, "not read wrong"),
        (
            {CODES_KEY: {"energy_j": ENERGY_FROM_POWER}, "m": {"energy_j": [5], "power_w": [4.0]}},
            "power column",
        ),
        ({CODES_KEY: {"power_w": ENERGY_FROM_POWER}}, "unknown code"),
        (
            {
                CODES_KEY: {"power_w": 2, "energy_j": ENERGY_FROM_POWER},
                "m": {"energy_j": [5], "power_w": [400]},
            },
            "not read wrong",
        ),
    ],
)
def test_a_bad_column_code_is_one_clear_line(change: dict[str, object], why: str) -> None:
    record: dict[str, object] = {
        "k": "gpu_batch",
        "t": 1.0,
        "node_index": [0],
        "gpu": [0],
        "energy_base_t": 0.0,
        "m": {"power_w": [400]},
        "throttle_reasons": [0],
    }
    record.update(change)
    with pytest.raises(CodecError, match=why):
        Decoder().loads(orjson.dumps(record))


def changing_batches(n: int, seed: int) -> list[GpuBatch]:
    """A node's GPUs whose readings change form from batch to batch: a column's decimals (0 to 6), a reading
    missing, an optional column that comes and goes, a value past any reading, the GPUs' order. Every
    path of the writer (the batch before's scales kept, or searched afresh) is taken many times."""
    rng = np.random.default_rng(seed)
    gpus, out = 6, []
    energy = rng.uniform(1e8, 2e8, gpus).round(3)
    decimals = rng.integers(0, 3, len(GPU_METRICS))
    order = np.arange(gpus)
    for t in range(n):
        if rng.random() < 0.15:
            decimals[rng.integers(len(GPU_METRICS))] = rng.integers(0, 7)
        values = rng.uniform(0, 2000, (gpus, len(GPU_METRICS)))
        for column, places in enumerate(decimals):
            values[:, column] = values[:, column].round(places)
        energy = (energy + values[:, POWER] * rng.uniform(0.9, 1.1, gpus)).round(3)
        values[:, ENERGY] = energy
        if rng.random() < 0.3:
            values[:, GPU_METRICS.index("xid")] = np.nan  # an optional column absent from this batch
        if rng.random() < 0.1:
            values[rng.integers(gpus), rng.integers(len(GPU_METRICS))] = np.nan
        if rng.random() < 0.05:
            order = rng.permutation(gpus)
        out.append(
            GpuBatch(
                t * 0.7, np.zeros(gpus, np.int64), order.copy(), values[order], np.zeros(gpus, np.uint64)
            )
        )
    return out


@pytest.mark.parametrize("seed", range(4))
def test_readings_that_change_form_batch_to_batch_come_back_bit_for_bit(seed: int, tmp_path: Path) -> None:
    events = changing_batches(300, seed)
    path = tmp_path / "changing.jsonl.zst"
    with RecordingWriter(path, flush_interval_s=float("inf")) as writer:
        for event in events:
            writer.write(event)
    back, warnings = read_events(path)
    assert warnings == []
    assert_same_events(events, [e for e in back if isinstance(e, GpuBatch)])
    codes = [r.get(CODES_KEY, {}) for r in records(path)]
    assert sum(any(c >= DIFFERENCE for c in row.values()) for row in codes) > 100  # differences were written
    assert sum(not any(c >= DIFFERENCE for c in row.values()) for row in codes) > 10  # ...and whole batches


def test_a_value_past_any_reading_is_one_skipped_line_and_the_batches_after_it_read(tmp_path: Path) -> None:
    events = smi_batches(6)
    wild = events[2].values.copy()
    wild[0, UTIL] = 1e300
    events[2] = GpuBatch(2.0, events[2].node_index, events[2].gpu, wild, events[2].throttle_reasons)
    path = tmp_path / "wild.jsonl.zst"
    with RecordingWriter(path) as writer:
        for event in events:
            writer.write(event)
    back, warnings = read_events(path)
    assert len(warnings) == 1
    assert "beyond any reading" in warnings[0]
    assert_same_events(events[:2] + events[3:], [e for e in back if isinstance(e, GpuBatch)])
