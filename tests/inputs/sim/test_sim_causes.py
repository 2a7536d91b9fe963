"""Simulator faults with a known cause give the right first-ranked hint: the right node, GPU and kind, and
a start within one straggler window of the fault's; a healthy run gives none, Offline and Server, several
seeds. The simulated run goes through the real core event by event. Cost: ~0.3 s per Offline run and
~0.9 s per Server run (10 simulated minutes each)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tokenwatch.base import throttle
from tokenwatch.base.events import GPU_METRICS, GpuBatch, ProgressBatch, Scenario
from tokenwatch.core import RackCore
from tokenwatch.core.causes import Cause
from tokenwatch.inputs.sim.faults import FaultError, parse_faults
from tokenwatch.inputs.sim.profile import load_profile
from tokenwatch.inputs.sim.rack_sim import RackSimulation, SimSettings

PROFILE = load_profile("gb300-nvl72")
NODES = PROFILE.node_names()
FAULT_START_S = 180.0
_POWER, _LIMIT, _SM = (GPU_METRICS.index(m) for m in ("power_w", "power_limit_w", "sm_clock_mhz"))


def first_hints(
    faults: str, scenario: Scenario = "Offline", seed: int = 4, duration_s: float = 600.0
) -> tuple[RackCore, dict[str, Cause]]:
    """Run the simulator through the core; each node's first hint (as its straggler alert was raised)."""
    settings = SimSettings(
        PROFILE, scenario=scenario, seed=seed, duration_s=duration_s, faults=parse_faults(faults, NODES, 4)
    )
    core = RackCore()
    first: dict[str, Cause] = {}
    judged: object = None
    for ev in RackSimulation(settings).events():
        core.ingest(ev)
        if core.started and core.state.causes.causes is not judged:  # a new list each time hints change
            judged = core.state.causes.causes
            for name, cause in zip(NODES, core.state.causes.causes, strict=True):
                if cause is not None and name not in first:
                    first[name] = cause
    return core, first


# (fault, scenario, node, kind, gpu)
FAULTS: list[tuple[str, Scenario, str, str, int | None]] = [
    ("node03:throttle@3m-7m", "Offline", "node03", "throttle", None),
    ("node08/gpu3:throttle@3m-7m", "Offline", "node08", "throttle", 3),
    ("node11:slow@3m-7m", "Offline", "node11", "engine", None),
    ("node05:powercap=1200@3m-7m", "Offline", "node05", "power_limit", None),
    ("node12/gpu2:hot@3m-7m", "Offline", "node12", "thermal", 2),
    ("node11:slow@3m-7m", "Server", "node11", "engine", None),
    ("node12/gpu2:hot@3m-7m", "Server", "node12", "thermal", 2),
]


@pytest.mark.parametrize(
    ("faults", "scenario", "node", "kind", "gpu"), FAULTS, ids=[f"{f[0]} {f[1]}" for f in FAULTS]
)
def test_a_fault_with_a_known_cause_gets_the_right_hint(
    faults: str, scenario: Scenario, node: str, kind: str, gpu: int | None
) -> None:
    core, first = first_hints(faults, scenario)
    assert set(first) == {node}, {n: c.text for n, c in first.items()}  # the faulted node, no other
    cause = first[node]
    assert (cause.kind, cause.gpu) == (kind, gpu), cause.text
    window = core.config.straggler_window_s
    assert FAULT_START_S - window <= cause.since_t <= FAULT_START_S + window, cause.text
    (alert,) = [a for a in core.state.alerts.log if a.kind == "straggler" and a.active]
    assert alert.node == node
    assert alert.message.endswith(cause.text)


@pytest.mark.parametrize("scenario", ["Offline", "Server"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_healthy_run_has_no_hint(scenario: Scenario, seed: int) -> None:
    core, first = first_hints("", scenario, seed=seed)
    assert first == {}
    assert not [a for a in core.state.alerts.log if a.kind in ("straggler", "cause", "power_limit")]


def test_powercap_lowers_the_limit_and_the_clock_and_throughput_follow() -> None:
    """node05:powercap=1200@3m-7m: one power-limit event down and one back up, on node05's four GPUs;
    while capped, their power sits at the cap, their clocks drop with sw_power_cap set, and node05's
    throughput falls by as much as its clock does."""
    settings = SimSettings(
        PROFILE, seed=4, duration_s=600, faults=parse_faults("node05:powercap=1200@3m-7m", NODES)
    )
    core = RackCore()
    power, clock, reasons, limits, tokens = [], [], [], [], []
    for ev in RackSimulation(settings).events():
        core.ingest(ev)
        if isinstance(ev, GpuBatch) and len(ev.gpu) == 72:
            rows = ev.node_index == 4  # node05
            power.append((ev.t, ev.values[rows, _POWER]))
            clock.append((ev.t, ev.values[:, _SM].reshape(18, 4)))
            reasons.append((ev.t, ev.throttle_reasons[rows]))
            limits.append((ev.t, ev.values[rows, _LIMIT]))
        if isinstance(ev, ProgressBatch) and len(ev.node_index) == 18:
            tokens.append((ev.t, ev.tokens_done.astype(np.float64)))
    changes = core.snapshot().power_limit_changes
    assert [(c.t, c.node, c.gpus, c.old_w, c.new_w) for c in changes] == [
        (180.0, "node05", (0, 1, 2, 3), 1400.0, 1200.0),
        (420.0, "node05", (0, 1, 2, 3), 1200.0, 1400.0),
    ]
    messages = [a.message for a in core.state.alerts.log if a.kind == "power_limit"]
    assert messages == [
        "power limit lowered 1,400 -> 1,200 W on node05 GPU0-3 at 03:00",
        "power limit raised 1,200 -> 1,400 W on node05 GPU0-3 at 07:00",
    ]
    capped = [p for t, p in power if 200 <= t < 420]
    assert all(((p >= 1200 * 0.97) & (p <= 1200)).all() for p in capped)
    assert all((r & throttle.SW_POWER_CAP).all() for t, r in reasons if 200 <= t < 420)
    assert all((lim == 1200).all() for t, lim in limits if 180 <= t < 420)

    def mean_between(series: list[tuple[float, np.ndarray]], lo: float, hi: float) -> np.ndarray:
        return np.asarray(np.mean([v for t, v in series if lo <= t < hi], axis=0))

    def rate_between(lo: float, hi: float) -> np.ndarray:
        (t0, a), (t1, b) = [next((t, v) for t, v in tokens if t >= x) for x in (lo, hi)]
        return (b - a) / (t1 - t0)

    before, during = mean_between(clock, 100, 180), mean_between(clock, 240, 420)
    clock_ratio = during[4].mean() / before[4].mean() / (during.mean() / before.mean())
    rates_before, rates_during = rate_between(100, 180), rate_between(240, 420)
    others = np.delete(np.arange(18), 4)
    rate_ratio = (
        rates_during[4] / rates_before[4] / (rates_during[others].mean() / rates_before[others].mean())
    )
    assert clock_ratio < 0.92  # the cap costs clock...
    assert rate_ratio == pytest.approx(clock_ratio, abs=0.02)  # ...and throughput follows it


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("node05:powercap@3m", "powercap needs the cap in W"),
        ("node05:powercap=-5@3m", "powercap needs the cap in W"),
        ("node05:slow=3@3m", "slow takes no value"),
        ("node05/gpu2:slow@3m", "slow is a fault of the whole node"),
        ("node05/gpu9:hot@3m", "no GPU 9"),
        ("node05/x:hot@3m", "write the GPU as /gpuN"),
    ],
)
def test_bad_fault_specs_are_one_line(text: str, error: str) -> None:
    with pytest.raises(FaultError, match=error):
        parse_faults(text, NODES, 4)


def test_fault_specs_with_a_gpu_and_a_value() -> None:
    hot, cap = parse_faults("node12/gpu2:hot@40m,node05:powercap=1200@20m-30m", NODES, 4)
    assert (hot.node, hot.kind, hot.gpu, hot.start_s, hot.end_s) == ("node12", "hot", 2, 2400.0, math.inf)
    assert (cap.node, cap.kind, cap.gpu, cap.value, cap.start_s, cap.end_s) == (
        "node05",
        "powercap",
        None,
        1200.0,
        1200.0,
        1800.0,
    )
