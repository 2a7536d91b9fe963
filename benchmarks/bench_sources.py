"""Speed of the source parsers, on real files (run from the checkout root):

    python benchmarks/bench_sources.py

* ``summarize`` of an 18-node LoadGen result set (summary + detail log per node, built from the real
  ASUSTeK MI325X files in tests/data/sources): target 200 ms.
* The trace tail parser on a LoadGen 6.0.17 trace grown to ~1M events, fed in 64 KiB chunks as a tail
  reads them, on one core: target 200,000 events/s.
* nvidia-smi rows, a vLLM /metrics scrape and vLLM log lines, for reference.
"""

from __future__ import annotations

import argparse
import functools
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_common import add_short_option, target  # noqa: E402

from tokenwatch.runs.result_folders import summarize_result_dirs  # noqa: E402
from tokenwatch.sources.harness_log import LogProgressParser  # noqa: E402
from tokenwatch.sources.loadgen_trace import TraceTailParser  # noqa: E402
from tokenwatch.sources.nvidia_smi import NvidiaSmiParser  # noqa: E402
from tokenwatch.sources.prometheus_metrics import MetricsScrapeParser  # noqa: E402

DATA = ROOT / "tests" / "data" / "sources"
ASUSTEK = DATA / "loadgen" / "asustek-8xmi325x-offline"
CHUNK = 64 * 1024


def build_result_set(root: Path, nodes: int = 18, qsl_entries: int | None = None) -> None:
    """``nodes`` result folders, each a copy of a real run's summary and detail log (4 runs, cycled)."""
    runs = sorted(run for run in ASUSTEK.iterdir() if (run / "mlperf_log_detail.txt").exists())
    for i in range(nodes):
        folder = root / f"node{i:02d}"
        folder.mkdir(parents=True)
        shutil.copy(runs[i % len(runs)] / "mlperf_log_summary.txt", folder)
        text = (runs[i % len(runs)] / "mlperf_log_detail.txt").read_text()
        if qsl_entries:  # a Server-sized loaded_qsl_set line (24,576 entries in real Server logs)
            lines = text.splitlines()
            at = next(j for j, line in enumerate(lines) if '"loaded_qsl_set"' in line)
            head, _, tail = lines[at].partition('"value": [')
            lines[at] = (
                head + '"value": [' + ", ".join(map(str, range(qsl_entries))) + "]" + tail.partition("]")[2]
            )
            text = "\n".join(lines) + "\n"
        (folder / "mlperf_log_detail.txt").write_text(text)


def best_and_median(fn: Callable[[], object], repeat: int) -> tuple[float, float, float]:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times[0], min(times), statistics.median(times)


def bench_summarize(repeat: int) -> None:
    for label, qsl in (
        ("ASUSTeK detail logs (3,000-entry QSL set)", None),
        ("Server-sized QSL set (24,576)", 24_576),
    ):
        with tempfile.TemporaryDirectory() as folder:
            root = Path(folder)
            build_result_set(root, 18, qsl)
            size = sum(f.stat().st_size for f in root.rglob("*.txt"))
            first, best, median = best_and_median(functools.partial(summarize_result_dirs, [root], 4), repeat)
            summary, _ = summarize_result_dirs([root], 4)
            target(
                f"summarize 18 nodes, {label}, {size / 1e6:.2f} MB",
                f"median {median * 1e3:.1f} ms (first {first * 1e3:.1f}, best {best * 1e3:.1f}; "
                f"aggregate {summary.tokens_per_s:,.1f} tok/s)",
                "<= 200 ms",
                median <= 0.2,
            )


def big_trace(run: str, min_events: int) -> bytes:
    """A real trace with its event lines repeated until it holds ``min_events`` events."""
    data = (DATA / "loadgen" / "generated" / run / "mlperf_log_trace.json").read_bytes()
    lines = data.split(b"\n")
    head, events = (
        lines[0],
        [line for line in lines[1:] if line.startswith(b'{"name":') and b"LastTrace" not in line],
    )
    copies = -(-min_events // len(events))
    return head + b"\n" + b"\n".join(events * copies) + b"\n"


def bench_trace(run: str, min_events: int, repeat: int) -> None:
    data = big_trace(run, min_events)
    rates = []
    for _ in range(repeat):
        parser = TraceTailParser("node00")
        start = time.perf_counter()
        for offset in range(0, len(data), CHUNK):
            parser.feed(data[offset : offset + CHUNK])
        elapsed = time.perf_counter() - start
        rates.append(parser.events_seen / elapsed)
    target(
        f"trace tail ({run}), {parser.events_seen:,} events ({len(data) / 1e6:.0f} MB, "
        f"{parser.samples_done:,} samples) in 64 KiB chunks, one core",
        f"median {statistics.median(rates):,.0f} events/s, best {max(rates):,.0f}",
        ">= 200,000 events/s",
        statistics.median(rates) >= 200_000,
    )


def bench_others() -> None:
    row = "{}, 1398.20, 1400.00, 1965, 3996, 189471, 196608, 87, 100, 61, 0x0000000000000004\n"
    # What -lms prints for an 8-GPU node (a batch per round), and a one-GPU stream (a batch per row).
    for label, gpus in (("8-GPU rounds", 8), ("one GPU", 1)):
        rows = "".join(row.format(g) for g in range(gpus)).encode() * (200_000 // gpus)
        smi = NvidiaSmiParser("n")
        start = time.perf_counter()
        for offset in range(0, len(rows), CHUNK):
            smi.feed(rows[offset : offset + CHUNK], 0.0)
        print(f"nvidia-smi ({label}): {smi.rows / (time.perf_counter() - start):,.0f} rows/s")
    text = (DATA / "prometheus" / "vllm_metrics.txt").read_text()
    parser = MetricsScrapeParser("vllm", "n")
    _, best, median = best_and_median(lambda: parser.parse(text, 0.0), 20)
    print(
        f"vLLM /metrics scrape ({len(text) / 1e3:.0f} kB): "
        f"median {median * 1e3:.1f} ms, best {best * 1e3:.1f} ms"
    )
    log = (DATA / "logs" / "vllm.log").read_bytes() * 50
    lines = log.count(b"\n")
    vllm = LogProgressParser.preset("vllm", "n")
    start = time.perf_counter()
    for offset in range(0, len(log), CHUNK):
        vllm.feed(log[offset : offset + CHUNK], 0.0)
    print(f"vLLM log preset: {lines / (time.perf_counter() - start):,.0f} lines/s")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--events", type=int, default=1_000_000, help="trace events to parse (default 1M)")
    p.add_argument("--repeat", type=int, default=5)
    add_short_option(p)
    args = p.parse_args()
    if args.short:
        args.events, args.repeat = 100_000, 2
    print(f"Python {sys.version.split()[0]}")
    bench_summarize(args.repeat if args.short else max(args.repeat, 10))
    for run in ("offline-short", "server-short"):
        bench_trace(run, args.events, args.repeat)
    bench_others()
    return 0


if __name__ == "__main__":
    sys.exit(main())
