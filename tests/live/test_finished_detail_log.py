"""Watching a LoadGen detail log that already holds LoadGen's result: the GB300 NVL72 rack's own Server run
(tests/data/sources/loadgen/nvidia-gb300-nvl72-server, LoadGen: VALID). The log is read from its first byte,
LoadGen's verdict and figures are the run's, the recording holds them, and the watch ends by itself."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import orjson
import pytest

from tests.conftest import PATIENCE_S, RunCli
from tokenwatch.base.events import LoadGenDetail, NodeStatus, RunEnded
from tokenwatch.recording import read_events
from tokenwatch.sources.loadgen_detail import read_detail

GB300 = Path(__file__).resolve().parent.parent / "data" / "sources" / "loadgen" / "nvidia-gb300-nvl72-server"


def summary_result_lines() -> list[str]:
    """LoadGen's own "Result is" block, as its summary printed it."""
    lines = (GB300 / "mlperf_log_summary.txt").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Result is"))
    return lines[start : start + 5]


def watch_config(tmp_path: Path, log: Path) -> Path:
    config = tmp_path / "gb300.yaml"
    config.write_text(
        "run: {name: gb300-nvl72, scenario: Server, benchmark: llama2-70b}\n"
        "gpu: {source: none}\n"
        f"progress:\n  - {{kind: loadgen-detail, path: '{log}'}}\n"
    )
    return config


@pytest.mark.parametrize("age", ["written a month ago", "just written"])
def test_a_finished_detail_log_is_judged_by_loadgen_and_the_watch_ends_by_itself(
    tmp_path: Path, run_cli: RunCli, age: str
) -> None:
    log = tmp_path / "mlperf_log_detail.txt"
    shutil.copyfile(GB300 / "mlperf_log_detail.txt", log)
    if age == "written a month ago":  # no history to place: LoadGen's records hold at the watch's start
        month_ago = time.time() - 30 * 86400
        os.utime(log, (month_ago, month_ago))
    recording = tmp_path / "watch.jsonl"
    # No --stop-after: the watch must end when LoadGen's result has been read.
    result = run_cli(
        "watch",
        str(watch_config(tmp_path, log)),
        "--headless",
        "--interval",
        "10m",
        "--record",
        str(recording),
        timeout=2 * PATIENCE_S,
    )
    assert result.returncode == 0, result.stderr
    expected = read_detail(GB300 / "mlperf_log_detail.txt")
    figure = expected.values["result_completed_tokens_per_second"]
    assert expected.valid is True
    assert figure == 868278  # LoadGen's, as its detail log states it
    end_line = next(line for line in result.stdout.splitlines() if "FINAL" in line)
    assert "FINAL VALID" in end_line, result.stdout
    assert f"{figure:,} tok/s" in end_line, result.stdout
    events, _ = read_events(recording)
    details = [e for e in events if isinstance(e, LoadGenDetail)]
    assert details
    assert details[-1].values["result_validity"] == "VALID"
    assert any(isinstance(e, NodeStatus) and e.state == "finished" for e in events)
    (ended,) = [e for e in events if isinstance(e, RunEnded)]
    assert ended.reason == "every node finished"
    if age == "just written":  # placed in time: LoadGen's plan at its own time before the result
        plan = next(d for d in details if "generated_query_duration" in d.values)
        loadgen_gap_s = (2423715.560676 - 2223.025683) / 1e3  # the two records' time_ms in the log
        assert details[-1].t - plan.t == pytest.approx(loadgen_gap_s, abs=0.01)
    summary = run_cli("summarize", str(recording), "--json")
    assert summary.returncode == 0, summary.stderr
    verdict = orjson.loads(summary.stdout)["verdict"]
    assert verdict["valid"] is True
    assert verdict["judged_by"] == "LoadGen"
    assert verdict["tokens_per_s"] == figure
    assert verdict["result_lines"] == summary_result_lines()
