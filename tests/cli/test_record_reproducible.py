"""An unpaced simulated run records the same bytes every time: a command regenerates each sample run."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import RunCli
from tokenwatch.recording import read_events
from tokenwatch.recording.codec import dumps


def test_a_seed_records_the_same_bytes_however_busy_the_machine(tmp_path: Path, run_cli: RunCli) -> None:
    # Each run takes seconds of wall time, so a flush by the wall clock (every 0.5 s) would end compressed
    # blocks at different lines in the two runs, and the bytes would differ.
    files = []
    for name in ("first", "second"):
        path = tmp_path / f"{name}.jsonl.zst"
        result = run_cli(
            *("sim", "--seed", "4", "--duration", "20m", "--speed", "0", "--headless", "--interval", "20m"),
            *("--record", str(path)),
        )
        assert result.returncode == 0, result.stderr
        files.append(path)
    first, second = (read_events(path)[0] for path in files)
    assert len(first) > 2_000
    assert [dumps(e) for e in first] == [dumps(e) for e in second]  # the same events...
    assert files[0].read_bytes() == files[1].read_bytes()  # ...in the same bytes
