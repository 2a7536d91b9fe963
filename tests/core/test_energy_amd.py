"""Energy from amd-smi: an MI-series GPU's ``energy.total_energy_consumption`` counter is the node's energy
(its growth, J), and a Radeon's counter that reads 0.0 J while it draws power (the real RX 6600 capture,
tests/data/amd-smi/) is no counter: that node's energy is its integrated power, never zero."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tokenwatch.base.events import Event, GpuBatch, NodeStatus, ProgressBatch, RunStarted
from tokenwatch.core import RackCore
from tokenwatch.sources.amd_smi import AmdSmiParser

CAPTURE: dict[str, Any] = json.loads(
    (Path(__file__).resolve().parents[1] / "data" / "amd-smi" / "rx6600-metric.json").read_text()
)[0]
START_J = 1_234_567.891  # a counter that has run since the driver loaded
POWER_W = 700.0
SECONDS = 120


def document(t: float, counting: bool) -> bytes:
    entries = []
    for gpu in range(2):
        entry = copy.deepcopy(CAPTURE)
        entry["gpu"] = gpu
        entry["power"]["socket_power"]["value"] = POWER_W
        if counting:  # as amd-smi prints an MI300X's: joules, three decimals
            entry["energy"]["total_energy_consumption"]["value"] = round(START_J + POWER_W * t, 3)
        entries.append(entry)
    return json.dumps({"gpu_data": entries}).encode() + b"\n"


def test_counter_energy_and_integrated_power_never_a_flat_zero() -> None:
    names = ("mi300x-node", "radeon-node")
    parsers = [AmdSmiParser(name, node_index=i) for i, name in enumerate(names)]
    events: list[Event] = [RunStarted(0.0, "amd-energy", "Offline", names, 2, None, None, "sim", 0.0)]
    events += [NodeStatus(0.0, n, "up") for n in names]
    for k in range(SECONDS + 1):
        t = float(k)
        for i, parser in enumerate(parsers):
            events += [e for e in parser.feed(document(t, counting=i == 0), t) if isinstance(e, GpuBatch)]
        tokens = np.array([1000 * k, 1000 * k], dtype=np.int64)
        events.append(ProgressBatch(t, np.arange(2), tokens // 100, tokens))
    core = RackCore()
    for event in events:
        core.ingest(event)
    snap = core.snapshot()
    assert snap.nodes.energy_source == ("counter", "power")
    assert snap.aggregate.energy_source == "mixed"
    # Independent figures: the counters grew by 2 GPUs x 700 W x 120 s; the Radeon node's power, held
    # for each 1 s tick, integrates to the same.
    counted = 2 * POWER_W * SECONDS
    assert snap.aggregate.energy_j == pytest.approx(2 * counted, rel=0.01)
    node_tokens_per_joule = snap.nodes.tokens_per_joule
    assert node_tokens_per_joule[0] == pytest.approx(1000 * SECONDS / counted, rel=0.01)
    assert node_tokens_per_joule[1] == pytest.approx(1000 * SECONDS / counted, rel=0.01)
