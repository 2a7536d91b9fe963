"""Foundation speed: simulate+record, summarize, headless replay — CPU time and peak RSS on one core.

    python benchmarks/bench_foundation.py [--repeat 3]

Each step runs `python -m tokenwatch ...` in a child process pinned to one CPU (taskset when present).
The headline figure is the child's CPU time (user + system), the best of --repeat runs: it is what one
core spends, and unlike wall time it barely moves when other work shares the machine (wall time is
printed beside it). Peak RSS is each child's own maximum resident set.

Targets: sim+record of the 80-minute 72-GPU run <= 5 s; summarize <= a bare json.loads pass
over the recording's lines; headless replay at --speed 0 <= 3 s; peak RSS < 200 MB each.
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
    args = parser.parse_args()
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
    rows = [
        ("sim + record, 80-min gb300 (72 GPUs), --speed 0", sim, "<= 5 s", sim[0] <= 5),
        ("summarize that recording", summ, f"<= bare json.loads pass ({bare[0]:.2f} s)", summ[0] <= bare[0]),
        ("headless replay, --speed 0", rep, "<= 3 s", rep[0] <= 3),
    ]
    peak = max(sim[2], summ[2], rep[2])
    print(
        f"tokenwatch foundation benchmark: best of {args.repeat}, pinned to one core, Python "
        f"{sys.version.split()[0]}"
    )
    for name, (cpu, wall, _), target, ok in rows:
        verdict = "ok" if ok else "MISSED"
        print(f"  {name:<50} CPU {cpu:5.2f} s (wall {wall:5.2f} s)  target {target:<36} {verdict}")
    print(
        f"  {'peak RSS, largest of the three':<50} {peak:9.0f} MB{'':15}  target {'< 200 MB':<36} "
        f"{'ok' if peak < 200 else 'MISSED'}"
    )
    per_hour = size_mb / rack_hours
    print(
        f"  {'recording size (.jsonl.zst), per rack-hour':<50} {per_hour:9.2f} MB{'':15}  "
        f"target {'<= 3 MB':<36} {'ok' if per_hour <= 3 else 'MISSED'}  ({size_mb:.1f} MB in all)"
    )


if __name__ == "__main__":
    main()
