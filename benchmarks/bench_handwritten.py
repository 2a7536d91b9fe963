"""Why three parts of tokenwatch are hand-written rather than a library.

``python benchmarks/bench_handwritten.py`` compares:


1. Latency histograms: the core's numpy log-bucket histogram against DDSketch (``ddsketch``, the usual
   library for mergeable quantile sketches), for what the core does with them: add a Server run's per-node
   observations in batches, merge 1,152 nodes into the rack's histogram and read p50/p90/p99.
2. The Prometheus exposition: the exporter's renderer against prometheus_client's ``generate_latest`` of the
   same families (byte-for-byte the same text;
   ``tests/frontends/metrics/test_exporter_metrics.py`` checks that), for a 64-rack fleet's /metrics.
3. The report's charts: the report's own SVG line chart against matplotlib (import, and one 18-line chart of
   1,000 points to SVG).

The comparison libraries are not tokenwatch dependencies: install them anywhere on the path to compare,
e.g. ``pip install --target /tmp/extra ddsketch matplotlib`` then ``PYTHONPATH=/tmp/extra python
benchmarks/bench_handwritten.py``; a missing one is reported and skipped.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_common import add_short_option, target  # noqa: E402

from tokenwatch.core import RackCore  # noqa: E402
from tokenwatch.core.histogram import LogHistogram  # noqa: E402
from tokenwatch.frontends.metrics.exposition import families, render_families  # noqa: E402
from tokenwatch.frontends.metrics.families import take_view  # noqa: E402
from tokenwatch.inputs.sim.profile import load_profile  # noqa: E402
from tokenwatch.inputs.sim.rack_sim import RackSimulation, SimSettings  # noqa: E402

NODES = 1152
BATCH = 200  # observations per node per latency batch (the simulator sends a node's 5 s at once)
ROUNDS = 5


def best_of(fn: Callable[[], object], repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        fn()
        times.append(time.perf_counter() - began)
    return min(times)


def histograms() -> None:
    rng = np.random.default_rng(1)
    batches = [rng.lognormal(-1.0, 0.6, BATCH) for _ in range(NODES)]

    def ours() -> None:
        nodes = [LogHistogram() for _ in range(NODES)]
        for _ in range(ROUNDS):
            for hist, values in zip(nodes, batches, strict=True):
                hist.add(values)
        rack = LogHistogram()
        for hist in nodes:
            rack.merge(hist)
        rack.quantiles([0.5, 0.9, 0.99])

    observations = NODES * BATCH * ROUNDS
    ours_s = best_of(ours)
    print(f"  histograms: {observations:,} observations on {NODES:,} nodes, merged, p50/p90/p99")
    print(f"    tokenwatch LogHistogram (numpy)   {ours_s * 1000:8.1f} ms")
    try:
        from ddsketch import DDSketch
    except ImportError:
        print("    ddsketch                          not installed (skipped)")
        return

    def theirs() -> None:
        nodes = [DDSketch(relative_accuracy=0.01) for _ in range(NODES)]
        for _ in range(ROUNDS):
            for sketch, values in zip(nodes, batches, strict=True):
                for value in values.tolist():
                    sketch.add(value)
        rack = DDSketch(relative_accuracy=0.01)
        for sketch in nodes:
            rack.merge(sketch)
        for q in (0.5, 0.9, 0.99):
            rack.get_quantile_value(q)

    theirs_s = best_of(theirs, 1)
    print(
        f"    DDSketch (1 % accuracy)           {theirs_s * 1000:8.1f} ms   ({theirs_s / ours_s:.0f}x slower)"
    )
    target(
        "histograms: the hand-written one against DDSketch",
        f"{theirs_s / ours_s:.1f}x faster",
        "faster",
        ours_s < theirs_s,
    )


def fleet_core() -> RackCore:
    profile = load_profile("gb300-nvl72")
    profile = dataclasses.replace(profile, nodes=profile.nodes * 64, total_samples=profile.total_samples * 64)
    core = RackCore()
    events: Iterator[Any] = RackSimulation(SimSettings(profile, seed=1, duration_s=600.0)).events()
    for event in events:
        core.ingest(event)
        if event.t > 120:
            break
    return core


def exposition() -> None:
    from prometheus_client import CollectorRegistry
    from prometheus_client.exposition import generate_latest

    sys.path.insert(0, str(REPO))
    from tests.frontends.metrics.test_exporter_metrics import _Mirror

    view = take_view(fleet_core())
    assert view is not None
    fams = families(view)
    ours = [best_of(lambda: render_families(fams)) for _ in range(3)]
    registry = CollectorRegistry()
    registry.register(_Mirror(fams))
    theirs = [best_of(lambda: generate_latest(registry), 1) for _ in range(3)]
    assert render_families(fams) == generate_latest(registry)  # the same bytes
    print("  /metrics text of a 64-rack fleet (4,608 GPUs), the same bytes either way")
    print(f"    tokenwatch renderer               {statistics.median(ours) * 1000:8.1f} ms")
    print(
        f"    prometheus_client generate_latest {statistics.median(theirs) * 1000:8.1f} ms"
        f"   ({statistics.median(theirs) / statistics.median(ours):.0f}x slower)"
    )
    ratio = statistics.median(theirs) / statistics.median(ours)
    target(
        "/metrics text: the hand-written renderer against prometheus_client",
        f"{ratio:.1f}x faster",
        "faster",
        ratio > 1,
    )


def charts() -> None:
    from tokenwatch.frontends.report.charts import Frame, Line, line_chart

    rng = np.random.default_rng(2)
    t = np.linspace(0, 4800, 1000)
    series = [60_000 + rng.normal(0, 600, len(t)).cumsum() / 30 for _ in range(18)]

    def ours() -> str:
        lines = [Line(f"node{i + 1:02d}", t, y, f"s{i % 8}") for i, y in enumerate(series)]
        return line_chart("throughput per node", Frame("run time", "tok/s"), lines)

    ours_s = best_of(ours)
    print("  one chart: 18 lines x 1,000 points, to SVG")
    print(f"    tokenwatch report.charts          {ours_s * 1000:8.1f} ms (no import beyond numpy)")
    code = (
        "import time; t0 = time.perf_counter(); import matplotlib; matplotlib.use('svg'); "
        "import matplotlib.pyplot as plt, numpy as np, io; t1 = time.perf_counter(); "
        "x = np.linspace(0, 4800, 1000); fig, ax = plt.subplots(); "
        "ys = [60000 + np.random.default_rng(i).normal(0, 600, 1000).cumsum() / 30 for i in range(18)]; "
        "[ax.plot(x, y) for y in ys]; "
        "buf = io.StringIO(); fig.savefig(buf, format='svg'); t2 = time.perf_counter(); "
        "print(f'{t1 - t0:.3f} {t2 - t1:.3f} {len(buf.getvalue())}')"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        print("    matplotlib                        not installed (skipped)")
        return
    imported, drawn, size = done.stdout.split()
    print(
        f"    matplotlib                        {float(drawn) * 1000:8.1f} ms to draw"
        f" + {float(imported) * 1000:.0f} ms to import; {int(size) / 1024:.0f} KiB of SVG"
    )
    print(f"    (tokenwatch's SVG: {len(ours().encode()) / 1024:.0f} KiB)")
    theirs_s = float(drawn)
    target(
        "a chart: report.charts against matplotlib's drawing alone",
        f"{theirs_s / ours_s:.1f}x faster",
        "faster",
        ours_s < theirs_s,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_short_option(parser)
    parser.parse_args()  # one size only: about 20 s in all
    print("Hand-written parts against the libraries that could replace them (best of 3, one process):")
    histograms()
    exposition()
    charts()


if __name__ == "__main__":
    main()
