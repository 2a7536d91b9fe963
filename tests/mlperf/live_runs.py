"""Real LoadGen runs (the fake SUT) tailed as they are written: trace and detail log, through tokenwatch's
own parsers, each read stamped with its run time (seconds since the runs started), as a watch does."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.sources.conftest import FAKE_SUT
from tokenwatch.base.events import Event, LoadGenDetail, NodeStatus, RunStarted
from tokenwatch.mlperf.pace import Assumptions
from tokenwatch.sources.loadgen_detail import DetailLogParser
from tokenwatch.sources.loadgen_trace import TraceTailParser

TOKENS_PER_SAMPLE = 12  # the fake SUT's mean output length (8..16 tokens): what a harness config states


@dataclass
class TailedRun:
    name: str
    scenario: str
    folder: Path
    events: list[Event] = field(default_factory=list)

    def run_started(self) -> RunStarted:
        return RunStarted(0.0, self.name, self.scenario, (self.name,), 1, None, None, "live", 0.0)  # type: ignore[arg-type]

    def detail(self) -> dict[str, Any]:
        """LoadGen's detail log read with the standard library alone."""
        values: dict[str, Any] = {}
        for line in (self.folder / "mlperf_log_detail.txt").read_text().splitlines():
            record = json.loads(line.removeprefix(":::MLLOG "))
            values[record["key"]] = record["value"]
        return values

    def result_lines(self) -> list[str]:
        """LoadGen's own "Result is" block, as its summary prints it."""
        lines = (self.folder / "mlperf_log_summary.txt").read_text().splitlines()
        start = next(i for i, line in enumerate(lines) if line.startswith("Result is"))
        block = [lines[start]]
        for line in lines[start + 1 :]:
            if not line.startswith("  ") or not line.strip():
                break
            block.append(line)
        return block

    def span(self) -> tuple[float, float]:
        """(LoadGen's start, its end) on the run clock: the query plan's arrival, the trace's last event."""
        start = next(
            e.t for e in self.events if isinstance(e, LoadGenDetail) and "generated_query_count" in e.values
        )
        end = next(e.t for e in self.events if isinstance(e, NodeStatus) and e.state == "finished")
        return start, end


def run_and_tail(
    root: Path, runs: dict[str, list[str]], poll_s: float = 0.05, timeout_s: float = 90.0
) -> list[TailedRun]:
    """One fake-SUT LoadGen process per run, side by side; both files tailed every ``poll_s``."""
    tailed = [TailedRun(name, args[args.index("--scenario") + 1], root / name) for name, args in runs.items()]
    procs = [
        subprocess.Popen(
            [sys.executable, str(FAKE_SUT), "--outdir", str(run.folder), *runs[run.name]],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for run in tailed
    ]
    parsers = [
        (DetailLogParser(run.name), TraceTailParser(run.name, tokens_per_sample=TOKENS_PER_SAMPLE))
        for run in tailed
    ]
    offsets = [[0, 0] for _ in tailed]
    start = time.monotonic()

    def read_all() -> None:
        t = time.monotonic() - start
        for run, (detail, trace), offset in zip(tailed, parsers, offsets, strict=True):
            files: tuple[tuple[str, DetailLogParser | TraceTailParser], ...] = (
                ("mlperf_log_detail.txt", detail),
                ("mlperf_log_trace.json", trace),
            )
            for k, (name, parser) in enumerate(files):
                path = run.folder / name
                if not path.exists():
                    continue
                with open(path, "rb") as fh:
                    fh.seek(offset[k])
                    data = fh.read()
                offset[k] += len(data)
                if data:
                    run.events += parser.feed(data, t)

    try:
        while any(p.poll() is None for p in procs):
            if time.monotonic() - start > timeout_s:
                raise TimeoutError("LoadGen runs did not finish in time")
            read_all()
            time.sleep(poll_s)
        read_all()
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    t_end = time.monotonic() - start
    for run, (detail, trace), proc in zip(tailed, parsers, procs, strict=True):
        _, err = proc.communicate()
        assert proc.returncode == 0, f"{run.name}: fake SUT failed: {err[-2000:]}"
        run.events += detail.close(t_end) + trace.close(t_end)
    return tailed


# Seconds-long runs: the forecast's minute-scale assumptions scaled down.
SECONDS = Assumptions(
    window_s=1.0,
    block_s=0.25,
    history_s=10.0,
    drain_s=0.05,
    outage_s=0.2,
    stall_after_s=0.25,
    # A seconds-long run on a fake SUT: its 0.25-s windows are noisy, its warm-up at most half a second.
    warm_window_s=0.25,
    warm_rise=0.1,
    warm_max_s=0.5,
    # A 1.5-s run whose last queries queue (the TTFT run ends 17 % below its pace at half-way): the
    # allowance for what is still to come, as the old 0.2-s outage gave it, is half its time left.
    future_share=0.5,
)
