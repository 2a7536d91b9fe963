"""Foundation speed: simulate+record, summarize, headless replay — CPU time and peak RSS on one core.

    python benchmarks/bench_foundation.py [--repeat 3] [--short]

Each step runs `python -m tokenwatch ...` in a child process pinned to one CPU (taskset when present).
The headline figure is the child's CPU time (user + system), the best of --repeat runs: it is what one
core spends, and unlike wall time it barely moves when other work shares the machine (wall time is
printed beside it). Peak RSS is each child's own maximum resident set.

Targets: sim+record of the 80-minute 72-GPU run <= 5 s; summarize <= a bare json.loads pass
over the recording's lines; headless replay at --speed 0 <= 3 s; peak RSS < 200 MB each. ``--short``
simulates 10 minutes once (the absolute targets are the 80-minute run's, so they say little there).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import add_short_option, target

REPO = Path(__file__).resolve().parent.parent

BARE_JSON_PASS = r"""
import json, sys, zstandard
path = sys.argv[1]
with open(path, "rb") as fh:
    zst = path.endswith(".zst")
    stream = zstandard.ZstdDecompressor().stream_reader(fh, read_across_frames=True) if zst else fh
    tail = b""
    while chunk := stream.read(1 << 20):
        lines = (tail + chunk).split(b"\n")
        tail = lines.pop()
        for line in lines:
            json.loads(line)
"""

# A fresh launcher per measurement, so RUSAGE_CHILDREN describes exactly one child.
_LAUNCH = (
    "import resource,subprocess,sys; subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL); "
    "r = resource.getrusage(resource.RUSAGE_CHILDREN); print(r.ru_utime + r.ru_stime, r.ru_maxrss)"
)

Measure = tuple[float, float, float]  # CPU s, wall s, peak RSS MB


def pinned(cmd: list[str]) -> list[str]:
    taskset = shutil.which("taskset")
    return [taskset, "-c", "0", *cmd] if taskset else cmd


def run_child(cmd: list[str]) -> Measure:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    began = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", _LAUNCH, *pinned(cmd)],
        check=True,
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
    )
    wall = time.perf_counter() - began
    cpu, rss_kb = out.stdout.split()
    return float(cpu), wall, int(rss_kb) / 1024.0


def best(cmd: list[str], repeat: int, setup: Callable[[], object] | None = None) -> Measure:
    """Best CPU and wall time over ``repeat`` runs, and the largest peak RSS."""
    runs = []
    for _ in range(repeat):
        if setup:
            setup()
        runs.append(run_child(cmd))
    return min(r[0] for r in runs), min(r[1] for r in runs), max(r[2] for r in runs)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=3)
    add_short_option(parser)
    args = parser.parse_args()
    if args.short:
        args.repeat = 1
    duration = "10m" if args.short else "80m"
    py = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        rec = Path(tmp) / "gb300.jsonl.zst"
        sim_cmd = [
            py,
            "-m",
            "tokenwatch",
            "sim",
            "--speed",
            "0",
            "--seed",
            "1",
            "--duration",
            duration,
            "--headless",
            "--interval",
            "10m",
            "--record",
            str(rec),
        ]
        sim = best(sim_cmd, args.repeat, setup=lambda: rec.unlink(missing_ok=True))
        bare = best([py, "-c", BARE_JSON_PASS, str(rec)], args.repeat)
        summ = best([py, "-m", "tokenwatch", "summarize", str(rec)], args.repeat)
        replay_cmd = [
            py,
            "-m",
            "tokenwatch",
            "replay",
            str(rec),
            "--speed",
            "0",
            "--headless",
            "--interval",
            "10m",
        ]
        rep = best(replay_cmd, args.repeat)
        size_mb = rec.stat().st_size / 1e6
        run = subprocess.run(
            [py, "-m", "tokenwatch", "summarize", str(rec), "--json"], capture_output=True, check=True
        )
        rack_hours = json.loads(run.stdout)["duration_s"] / 3600  # one rack
    what = f"{duration} gb300 (72 GPUs)"
    print(
        f"tokenwatch foundation benchmark: best of {args.repeat}, pinned to one core, Python "
        f"{sys.version.split()[0]}; CPU time (wall in brackets)"
    )

    def cpu(m: Measure) -> str:
        return f"{m[0]:.2f} s CPU ({m[1]:.2f} s wall)"

    target(f"sim + record, {what}, --speed 0", cpu(sim), "<= 5 s", sim[0] <= 5)
    target(
        "summarize that recording",
        cpu(summ),
        f"<= a bare json.loads pass, {bare[0]:.2f} s",
        summ[0] <= bare[0],
    )
    target("headless replay, --speed 0", cpu(rep), "<= 3 s", rep[0] <= 3)
    peak = max(sim[2], summ[2], rep[2])
    target("peak RSS, largest of the three", f"{peak:.0f} MB", "< 200 MB", peak < 200)
    per_hour = size_mb / rack_hours
    target(
        "recording size (.jsonl.zst) per rack-hour",
        f"{per_hour:.2f} MB ({size_mb:.1f} MB in all)",
        "<= 3 MB",
        per_hour <= 3,
    )


if __name__ == "__main__":
    main()
