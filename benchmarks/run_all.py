"""Every benchmark in this folder, one after another, each in its own process:

    python benchmarks/run_all.py --short     # what CI runs: small inputs, a few minutes in all
    python benchmarks/run_all.py             # the full measurements (an hour or more)
    python benchmarks/run_all.py --short bench_tui bench_live   # some of them

Each script prints its figures and, for each target, a line starting MET or MISSED
(``bench_common.target``). This runner prints every script's output as it comes, then a table of what
each met and missed. It exits non-zero when a script fails, runs past its time limit, or prints no
MET/MISSED line at all: a benchmark that no longer runs has rotted, and CI says so. A MISSED target does
not fail the run (a short pass on a shared CI machine says little about speed); the figures that count
are the full runs' (docs/speed.md).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
VERDICTS = ("MET", "MISSED")


@dataclass
class Outcome:
    script: str
    status: str = "ok"  # ok | failed (exit N) | timed out | no target line
    seconds: float = 0.0
    met: list[str] = field(default_factory=list)
    missed: list[str] = field(default_factory=list)


def scripts() -> list[Path]:
    """Every benchmark script: ``bench_*.py`` except the shared helpers."""
    return sorted(p for p in HERE.glob("bench_*.py") if p.name != "bench_common.py")


def run_one(path: Path, short: bool, limit_s: float) -> Outcome:
    outcome = Outcome(path.stem)
    print(f"\n=== {path.name}{' --short' if short else ''}", flush=True)
    began = time.monotonic()
    with subprocess.Popen(
        [sys.executable, str(path), *(["--short"] if short else [])],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    ) as proc:
        assert proc.stdout is not None
        # A script that hangs silently never ends its output: a timer kills it, which ends the loop.
        fired = threading.Event()

        def stop() -> None:
            fired.set()
            proc.kill()

        timer = threading.Timer(limit_s, stop) if limit_s != float("inf") else None
        if timer:
            timer.start()
        try:
            for line in proc.stdout:  # echoed as it comes, so a slow script shows where it is
                print(line, end="", flush=True)
                word = line.split(maxsplit=1)[0] if line.strip() else ""
                if word == "MET":
                    outcome.met.append(line.strip())
                elif word == "MISSED":
                    outcome.missed.append(line.strip())
            proc.wait()
        finally:
            if timer:
                timer.cancel()
    if fired.is_set():
        outcome.status = f"timed out after {limit_s:.0f} s"
    outcome.seconds = time.monotonic() - began
    if outcome.status == "ok" and proc.returncode != 0:
        outcome.status = f"failed (exit {proc.returncode})"
    if outcome.status == "ok" and not (outcome.met or outcome.missed):
        outcome.status = "printed no MET/MISSED line"
    return outcome


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("only", nargs="*", help="script names (bench_tui or bench_tui.py); default all")
    parser.add_argument("--short", action="store_true", help="pass --short to each script (CI)")
    parser.add_argument(
        "--limit", type=float, help="seconds one script may take (default 600 with --short, else none)"
    )
    args = parser.parse_args(argv)
    limit_s = args.limit or (600.0 if args.short else float("inf"))
    chosen = scripts()
    if args.only:
        wanted = {name.removesuffix(".py") for name in args.only}
        unknown = wanted - {p.stem for p in chosen}
        if unknown:
            parser.error(f"no such benchmark: {', '.join(sorted(unknown))}")
        chosen = [p for p in chosen if p.stem in wanted]
    from bench_common import ROOT, bytecode_compiled  # beside this script

    bytecode_compiled(ROOT)  # every script's processes read the caches an installed tokenwatch has
    outcomes = [run_one(path, args.short, limit_s) for path in chosen]
    print("\n=== benchmarks" + (" (short pass)" if args.short else ""))
    for o in outcomes:
        print(
            f"  {o.script:<28} {o.seconds:6.0f} s  MET {len(o.met):2d}  MISSED {len(o.missed):2d}  {o.status}"
        )
        for line in o.missed:
            print(f"      {line}")
    broken = [o.script for o in outcomes if o.status != "ok"]
    if broken:
        print(f"benchmarks that did not run to the end: {', '.join(broken)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
