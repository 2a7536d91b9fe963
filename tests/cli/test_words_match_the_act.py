"""Words that match what happened: a fault or a start beyond the run is one warning line (never a silent
clamp), and a ``.zst`` whose bytes do not decompress is called damaged, with the byte where reading
failed (not "empty, or cut off")."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tests.conftest import SAMPLE_RUNS, RunCli

pytestmark = pytest.mark.timeout(180)
FAULT_RUN = SAMPLE_RUNS / "gb300-nvl72-node-failure.jsonl.zst"


def warning_lines(stderr: str) -> list[str]:
    assert "Traceback" not in stderr
    return [line for line in stderr.splitlines() if "warning" in line]


def test_a_fault_after_the_runs_nominal_end_is_one_warning_line(run_cli: RunCli) -> None:
    result = run_cli(
        "sim", "--speed", "0", "--duration", "2m", "--headless", "--interval", "10m",
        "--faults", "node07:down@90m,node03:throttle@1m-3m,node12/gpu2:hot@2m",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert warning_lines(result.stderr) == [
        "tokenwatch sim: warning: fault node07:down starts at 90:00, after the run's nominal 02:00: it "
        "happens only if the run lasts that long",
        "tokenwatch sim: warning: fault node12/gpu2:hot starts at 02:00, after the run's nominal 02:00: it "
        "happens only if the run lasts that long",
    ]  # node03's, inside the run, says nothing


def test_faults_inside_the_run_say_nothing(run_cli: RunCli) -> None:
    result = run_cli(
        "sim", "--speed", "0", "--duration", "2m", "--headless", "--interval", "10m",
        "--faults", "node07:down@30s",
    )  # fmt: skip
    assert result.returncode == 0
    assert warning_lines(result.stderr) == []


def test_replay_start_after_the_end_of_a_fault_run_is_one_warning_line(run_cli: RunCli) -> None:
    result = run_cli("replay", str(FAULT_RUN), "--start", "200m", "--speed", "0", "--headless")
    assert result.returncode == 0, result.stderr
    end = run_cli("summarize", str(FAULT_RUN)).stdout.splitlines()[0].rsplit(" · ", 1)[1]
    assert end == "84:35"  # the summary's own run length (its first line)
    assert warning_lines(result.stderr) == [
        f"warning: --start 200:00 is past the recording's end at {end}: the replay starts there"
    ]
    assert "Total aggregate" in result.stdout  # the run up to its end, as replayed


@pytest.mark.parametrize(
    ("kept", "problem"),
    [(0, "Unknown frame descriptor"), (12, "")],
    ids=["random-bytes", "a-real-frame-cut-into-random-bytes"],
)
def test_random_bytes_in_a_zst_are_called_damaged_with_the_byte(
    tmp_path: Path, run_cli: RunCli, kept: int, problem: str
) -> None:
    noise = random.Random(7).randbytes(20_000)
    path = tmp_path / "noise.jsonl.zst"
    path.write_bytes(FAULT_RUN.read_bytes()[:kept] + noise[kept:])
    for command in (("summarize", str(path)), ("replay", str(path), "--headless", "--speed", "0")):
        result = run_cli(*command)
        assert result.returncode == 2
        lines = result.stderr.splitlines()
        assert len(lines) == 1, result.stderr
        assert lines[0].startswith(
            f"tokenwatch {command[0]}: {path}: damaged: the compressed data fails at byte 0 ("
        )
        assert problem in lines[0]
        assert "empty" not in lines[0]


def test_an_empty_zst_is_called_empty(tmp_path: Path, run_cli: RunCli) -> None:
    path = tmp_path / "empty.jsonl.zst"
    path.write_bytes(b"")
    result = run_cli("summarize", str(path))
    assert result.returncode == 2
    assert result.stderr.strip() == f"tokenwatch summarize: {path}: empty: not a tokenwatch recording"
