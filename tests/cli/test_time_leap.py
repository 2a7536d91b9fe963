"""One distant timestamp does not keep a replay running for hours. A 2-minute run's recording with one
heartbeat at 31,000,000 s appended made ``replay --speed 0 --headless --interval 10s`` write ~3 M JSONL
snapshots of empty time and take minutes to answer Ctrl-C; the leap is now one warning and left out.
"""

from __future__ import annotations

import math
import signal
import subprocess
from pathlib import Path

import orjson
import pytest

from tests.conftest import run_tokenwatch, start_tokenwatch

CEILING_S = 120.0  # generous: a loaded 2-core machine (the old code needed hours)
LEAP = b'{"k":"heartbeat","t":31000000}\n'


@pytest.fixture(scope="module")
def leaping(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, float]:
    """The recording with the leap appended, and the newest run time before it (read from its lines)."""
    path = tmp_path_factory.mktemp("leap") / "hb.jsonl"
    made = run_tokenwatch(
        "sim", "--speed", "0", "--headless", "--duration", "2m", "--interval", "1h", "--record", str(path)
    )
    assert made.returncode == 0, made.stderr
    newest = max(orjson.loads(line)["t"] for line in path.read_bytes().splitlines()[1:])
    with open(path, "ab") as fh:
        fh.write(LEAP)
    return path, newest


def test_a_leap_in_run_time_is_one_warning_and_no_snapshots(
    leaping: tuple[Path, float], tmp_path: Path
) -> None:
    path, newest = leaping
    lines = path.read_bytes().count(b"\n")
    out = tmp_path / "snapshots.jsonl"
    done = run_tokenwatch(
        "replay", str(path), "--speed", "0", "--headless", "--interval", "10s", "--jsonl", str(out),
        timeout=CEILING_S,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    # No more snapshots than the recorded run time over the interval (and the last, at its end).
    assert out.read_bytes().count(b"\n") <= math.floor(newest / 10) + 1
    warnings = done.stderr.splitlines()
    assert warnings == [
        f"warning: {path}:{lines}: run time leaps from {newest:g} s to 31,000,000 s with nothing between: "
        "left out (and any later event as far ahead), no snapshots are made for empty time"
    ]


def test_ctrl_c_stops_a_replay_of_it_with_exit_130(leaping: tuple[Path, float]) -> None:
    path, _ = leaping
    proc = start_tokenwatch("replay", str(path), "--speed", "1", "--headless", "--interval", "10s")
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()  # the line at 00:10: the replay is under way
        assert first.startswith("00:10"), first
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=CEILING_S)
    except subprocess.TimeoutExpired:
        pytest.fail("Ctrl-C did not stop the replay")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert "INTERRUPTED at 00:1" in out
