"""Fixtures for the source parsers: real data paths, chunked feeding, real LoadGen runs."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import PATIENCE_S
from tokenwatch.base.events import Event

DATA = Path(__file__).resolve().parent.parent / "data" / "sources"
LOADGEN = DATA / "loadgen"
FAKE_SUT = Path(__file__).resolve().parent / "fake_sut.py"

needs_loadgen = pytest.mark.skipif(
    importlib.util.find_spec("mlperf_loadgen") is None,
    reason="mlperf_loadgen not installed (pip install mlcommons-loadgen)",
)


def feed_in_chunks(feed: Callable[[bytes], list[Event]], data: bytes, size: int) -> list[Event]:
    """Feed ``data`` in pieces of ``size`` bytes, as a tail would, and collect the events."""
    events: list[Event] = []
    for start in range(0, len(data), size):
        events += feed(data[start : start + size])
    return events


@dataclass
class TailedRun:
    """One LoadGen run (one "node"): its folder, what the SUT served, what tailing its trace gave."""

    name: str
    folder: Path
    served: dict[str, int] = field(default_factory=dict)
    # (wall seconds since the run started, LoadGen process still running?, events of that read)
    reads: list[tuple[float, bool, list[Event]]] = field(default_factory=list)


def run_nodes(
    root: Path, nodes: dict[str, list[str]], tail: bool = True, timeout: float = 2 * PATIENCE_S
) -> list[TailedRun]:
    """Start one fake-SUT LoadGen process per node (side by side) and tail each trace as it grows."""
    from tokenwatch.sources.loadgen_trace import TraceTailParser

    runs = [TailedRun(name, root / name) for name in nodes]
    procs = []
    for run in runs:
        argv = [sys.executable, str(FAKE_SUT), "--outdir", str(run.folder), *nodes[run.name]]
        procs.append(subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    parsers = [TraceTailParser(run.name) for run in runs]
    offsets = [0] * len(runs)
    start = time.monotonic()

    def read_all(running: list[bool]) -> None:
        for i, run in enumerate(runs):
            trace = run.folder / "mlperf_log_trace.json"
            if not trace.exists():
                continue
            with open(trace, "rb") as fh:
                fh.seek(offsets[i])
                data = fh.read()
            offsets[i] += len(data)
            if data:
                run.reads.append((time.monotonic() - start, running[i], parsers[i].feed(data)))

    try:
        while any(p.poll() is None for p in procs):
            if time.monotonic() - start > timeout:
                raise TimeoutError("LoadGen runs did not finish in time")
            if tail:
                read_all([p.poll() is None for p in procs])
            time.sleep(0.05)  # the tail's poll interval
        read_all([False] * len(procs))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    for run, proc in zip(runs, procs, strict=True):
        out, err = proc.communicate()
        assert proc.returncode == 0, f"{run.name}: fake SUT failed: {err[-2000:]}"
        run.served = json.loads(out.strip().splitlines()[-1])
    return runs
