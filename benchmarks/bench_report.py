"""Report speed and size: ``python benchmarks/bench_report.py [RECORDING] [--short]``.

Target: the report of the 80-minute gb300 recording within 3 s (the whole command, Python start-up
included) and under 5 MB. Prints the command's wall time (best of 3), the phases and the file size.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_common import add_short_option, target  # noqa: E402

from tokenwatch.frontends.report.run_report import render_run_report  # noqa: E402
from tokenwatch.runs.loading import load_run  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "recording", nargs="?", type=Path, default=ROOT / "sample_runs" / "gb300-nvl72-offline.jsonl.zst"
    )
    add_short_option(parser)
    args = parser.parse_args()
    recording: Path = args.recording
    repeat = 1 if args.short else 3
    with tempfile.TemporaryDirectory() as tmp:
        walls = []
        for attempt in range(repeat):
            out = Path(tmp) / f"report-{attempt}.html"  # report refuses to overwrite a file
            start = time.perf_counter()
            subprocess.run(
                [sys.executable, "-m", "tokenwatch", "report", str(recording), "-o", str(out)],
                check=True,
                cwd=ROOT,
                capture_output=True,
            )
            walls.append(time.perf_counter() - start)
        size = out.stat().st_size
    start = time.perf_counter()
    run = load_run(recording)
    loaded = time.perf_counter()
    html = render_run_report(run)
    rendered = time.perf_counter()
    print(f"recording            {recording.name} ({recording.stat().st_size / 1e6:.1f} MB)")
    print(
        f"tokenwatch report    {min(walls):.2f} s best of {repeat} "
        f"(all: {', '.join(f'{w:.2f}' for w in walls)})"
    )
    print(f"  load (read + core) {loaded - start:.2f} s")
    print(f"  render HTML        {rendered - loaded:.3f} s")
    print(f"report size          {size / 1e6:.2f} MB ({len(html):,} characters)")
    target(
        "tokenwatch report of the recording, the whole command",
        f"{min(walls):.2f} s",
        "<= 3 s",
        min(walls) <= 3,
    )
    target("the report's size", f"{size / 1e6:.2f} MB", "< 5 MB", size < 5e6)


if __name__ == "__main__":
    main()
