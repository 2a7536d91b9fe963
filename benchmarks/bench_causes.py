"""What cause hints (and the energy-counter and power-limit figures that came with them) add per refresh,
at 72 GPUs (one gb300-nvl72 rack) and 4,608 GPUs (64 racks, as ``tokenwatch sim --racks 64``).

    python benchmarks/bench_causes.py [--repeat 200] [--run-s 300]

The simulator runs each rack size with faults of known cause on a few nodes (a throttle, a node slow
with no GPU cause, a power cap, a hot GPU; eight of each kind at 64 racks) and feeds the real RackCore up
to ``--run-s`` of run time, when those nodes are stragglers. Then, on that state, it times:

- judge: one judgement of every straggler's hint (``core.causes.update_causes``: the rack's evidence
  over the straggler window, then each straggler ranked), forced by forgetting the hints each time so
  every straggler is judged afresh. The core does this at most every ``straggler_subwindow_s`` (5 s)
  of run time, so a refresh pays it at most once;
- snapshot extras: what the snapshot builds for them (per-node energy from the counters and its
  source, tokens per joule, the hints and their texts, the power-limit changes);
- the whole snapshot, for scale.

"added per refresh" is judge + snapshot extras: the worst case, a refresh that includes a judgement.
Medians of ``--repeat`` runs (CPU time of this process, so a shared machine's other work does not count);
target: under 3 ms at 72 GPUs and under 20 ms at 4,608.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_common import add_short_option, target  # noqa: E402

from tokenwatch.core import RackCore  # noqa: E402
from tokenwatch.core.causes import update_causes  # noqa: E402
from tokenwatch.core.energy import energy_source, node_energy, tokens_per_joule  # noqa: E402
from tokenwatch.inputs.sim.faults import parse_faults  # noqa: E402
from tokenwatch.inputs.sim.profile import load_profile  # noqa: E402
from tokenwatch.inputs.sim.rack_sim import RackSimulation, SimSettings  # noqa: E402

TARGET_MS = {1: 3.0, 64: 20.0}
KINDS = ("throttle", "slow", "powercap=1200", "hot")


def faults_for(nodes: tuple[str, ...], racks: int) -> str:
    """Two faults of each kind per rack at 1 rack, eight of each at 64: spread over the racks."""
    per_kind = 2 if racks == 1 else 8
    picks = np.linspace(0, len(nodes) - 1, per_kind * len(KINDS)).astype(int)
    items = []
    for k, node in enumerate(picks.tolist()):
        kind = KINDS[k % len(KINDS)]
        where = f"{nodes[node]}/gpu{k % 4}" if kind in ("hot", "throttle") else nodes[node]
        items.append(f"{where}:{kind}@2m")
    return ",".join(items)


def fed_core(racks: int, run_s: float) -> RackCore:
    profile = load_profile("gb300-nvl72")
    if racks > 1:
        profile = dataclasses.replace(
            profile,
            name=f"{profile.name} x{racks}",
            nodes=profile.nodes * racks,
            total_samples=profile.total_samples * racks,
        )
    nodes = profile.node_names()
    faults = parse_faults(faults_for(nodes, racks), nodes, 4)
    core = RackCore()
    for event in RackSimulation(SimSettings(profile, seed=0, faults=faults)).events():
        if event.t > run_s:
            break
        core.ingest(event)
    return core


def cpu_ms(fn: Callable[[], object], repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        t0 = time.process_time()
        fn()
        out.append((time.process_time() - t0) * 1000.0)
    return out


def bench(racks: int, run_s: float, repeat: int) -> float:
    core = fed_core(racks, run_s)
    state = core.state
    t = state.last_sample_t
    codes = state.effective_state(t)
    stragglers = int(state.rules.straggling.sum())

    def judge() -> None:
        state.causes.causes = [None] * len(state.causes.causes)
        state.causes.next_due_t = 0.0
        update_causes(state, t, codes)

    def extras() -> None:
        seen = np.isfinite(state.gpu_last_seen)
        energy, from_counter = node_energy(state.energy, seen)
        has = energy > 0
        energy_source(from_counter, has)
        tokens_per_joule(state.tokens, energy)
        _ = tuple(("counter" if c else "power") if h else "" for c, h in zip(from_counter, has, strict=True))
        _ = tuple(state.causes.causes)
        _ = tuple(c.text if c is not None else "" for c in state.causes.causes)
        _ = tuple(state.gpu_evidence.power_limits.changes)

    judge_ms = cpu_ms(judge, repeat)
    hinted = sum(c is not None for c in state.causes.causes)
    extras_ms = cpu_ms(extras, repeat)
    snap_ms = cpu_ms(core.snapshot, max(20, repeat // 5))
    added = statistics.median(judge_ms) + statistics.median(extras_ms)
    judge_med, judge_max = statistics.median(judge_ms), max(judge_ms)
    racks_words = f"{racks} rack{'s' if racks > 1 else ''}"
    print(f"{racks * 72:,} GPUs ({racks_words}) at {t:.0f} s, {stragglers} stragglers, {hinted} hints:")
    print(f"  judge every straggler's hint   median {judge_med:6.2f} ms   max {judge_max:6.2f} ms")
    print(f"  snapshot extras (energy, hints) median {statistics.median(extras_ms):6.2f} ms")
    print(f"  whole snapshot (for scale)     median {statistics.median(snap_ms):6.2f} ms")
    limit = TARGET_MS[racks]
    target(
        f"{racks * 72:,} GPUs: added per refresh (worst case)",
        f"{added:.2f} ms",
        f"< {limit:.0f} ms",
        added < limit,
    )
    return added


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=200, help="timed runs per figure (default 200)")
    parser.add_argument(
        "--run-s", type=float, default=300.0, help="run time to feed the core to (default 300)"
    )
    add_short_option(parser)
    args = parser.parse_args()
    if args.short:
        args.repeat, args.run_s = 20, 180.0
    for racks in (1, 64):
        bench(racks, args.run_s, args.repeat)


if __name__ == "__main__":
    main()
