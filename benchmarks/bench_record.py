"""The recorder's own CPU and the recording's size: a rack's Server and Offline runs written to ``.zst``.

    python benchmarks/bench_record.py [--short] [--duration 10m] [--repeat 3] [--code DIR]

The simulator's events are made once, in memory; the figure is the CPU time (``time.process_time``) of
writing them all with ``RecordingWriter`` (unpaced, as ``sim --speed 0 --record``), the best of
``--repeat``, beside its floor: a zstd pass over the same recording's lines at the recorder's level. Also
the file's size, in MB and MB per rack-hour (the run's length from the last event's time), against the
target of 3 MB per rack-hour. ``--short``: 2-minute runs, one repeat.

``--code DIR``: import tokenwatch from that checkout instead of this one (``git worktree add DIR main``),
so the code before and after a change are measured by the same script, in the same run.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_common import add_short_option, verdict_text  # noqa: E402

SIZE_TARGET = 3.0  # MB per rack-hour (docs/speed.md)


def record_figures(duration_s: float, repeat: int) -> list[str]:
    """Two lines per scenario: the writer's CPU against its zstd floor, and the recording's size against
    its target (a MET / MISSED line)."""
    import zstandard

    import tokenwatch
    from tokenwatch.inputs.sim.profile import load_profile
    from tokenwatch.inputs.sim.rack_sim import RackSimulation, SimSettings
    from tokenwatch.recording import RecordingWriter

    lines = [f"tokenwatch from {Path(tokenwatch.__file__).parent.parent}"]
    profile = load_profile("gb300-nvl72")
    for scenario in ("Server", "Offline"):
        settings: Any = SimSettings(profile, scenario=scenario, seed=2, duration_s=duration_s)
        events = list(RackSimulation(settings).events())
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "run.jsonl.zst"
            best = float("inf")
            for _ in range(repeat):
                path.unlink(missing_ok=True)
                start = time.process_time()
                with RecordingWriter(path, flush_interval_s=float("inf")) as writer:
                    for event in events:
                        writer.write(event)
                best = min(best, time.process_time() - start)
            size = path.stat().st_size
            with path.open("rb") as fh:
                text = zstandard.ZstdDecompressor().stream_reader(fh, read_across_frames=True).read()
            floor = float("inf")
            for _ in range(repeat):
                start = time.process_time()
                zstandard.ZstdCompressor(level=3, write_checksum=True).compress(text)
                floor = min(floor, time.process_time() - start)
        hours = max(e.t for e in events) / 3600
        label = f"record, 1 rack {scenario} x {duration_s / 60:.0f} min"
        lines.append(
            f"{label} ({len(events):,} events): {best:.3f} s CPU, "
            f"zstd floor {floor:.3f} s ({best / floor:.1f}x)"
        )
        per_hour = size / 1e6 / hours
        figure = f"{size / 1e6:.3f} MB, {per_hour:.2f} MB per rack-hour"
        lines.append(
            verdict_text(
                f"{label}, size", figure, f"<= {SIZE_TARGET} MB per rack-hour", per_hour <= SIZE_TARGET
            )
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_short_option(parser)
    parser.add_argument("--duration", default="10m", help="run length: minutes, e.g. 10m")
    parser.add_argument("--repeat", type=int, default=None)
    parser.add_argument("--code", type=Path, default=REPO, help="the checkout whose tokenwatch is measured")
    args = parser.parse_args()
    sys.path.insert(0, str(args.code.resolve()))
    duration_s = 120.0 if args.short else float(args.duration.rstrip("m")) * 60
    for line in record_figures(duration_s, args.repeat or (1 if args.short else 3)):
        print(line, flush=True)


if __name__ == "__main__":
    main()
