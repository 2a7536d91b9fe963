"""Report speed and size: ``python benchmarks/bench_report.py [RECORDING]``.

Target: the report of the 80-minute gb300 recording within 3 s (the whole command, Python start-up
included) and under 5 MB. Prints the command's wall time (best of 3), the phases and the file size.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tokenwatch.frontends.report.run_report import render_run_report  # noqa: E402
from tokenwatch.runs.loading import load_run  # noqa: E402


def main() -> None:
    recording = (
        Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "sample_runs" / "gb300-nvl72-offline.jsonl.zst"
    )
    with tempfile.TemporaryDirectory() as tmp:
        walls = []
        for attempt in range(3):
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
    print(f"tokenwatch report    {min(walls):.2f} s best of 3 (all: {', '.join(f'{w:.2f}' for w in walls)})")
    print(f"  load (read + core) {loaded - start:.2f} s")
    print(f"  render HTML        {rendered - loaded:.3f} s")
    print(f"report size          {size / 1e6:.2f} MB ({len(html):,} characters)")


if __name__ == "__main__":
    main()
