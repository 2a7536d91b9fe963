"""Cause hints from AMD telemetry: a rack of 8 nodes x 4 GPUs whose GPU readings are ``amd-smi metric --json``
documents (the real RX 6600 capture, tests/data/amd-smi/, with per-tick clocks, power and temperature set
by the test) read by the real parser, the same GpuBatch the core reads from NVIDIA sources. node05 slows
at 100 s with one piece of evidence planted in the documents; the real core names it."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tokenwatch.base.events import Event, GpuBatch, NodeStatus, ProgressBatch, RunStarted
from tokenwatch.core import RackCore
from tokenwatch.sources.amd_smi import AmdSmiParser

NODES, GPUS, SLOW = 8, 4, 5
FAULT_T = 100.0
RATE = 10_000.0
(CAPTURE,) = json.loads(
    (Path(__file__).resolve().parents[2] / "data" / "amd-smi" / "rx6600-metric.json").read_text()
)


def _entry(gpu: int, clock: float, power: float, temp: float) -> dict[str, Any]:
    entry: dict[str, Any] = copy.deepcopy(CAPTURE)
    entry["gpu"] = gpu
    entry["clock"]["gfx_0"]["clk"]["value"] = round(clock)
    entry["power"]["socket_power"]["value"] = round(power, 1)
    entry["temperature"]["hotspot"]["value"] = round(temp, 1)
    entry["usage"]["gfx_activity"]["value"] = 98
    return entry


def _power_violation(entry: dict[str, Any]) -> None:
    entry["clock"]["gfx_0"]["clk"]["value"] = round(entry["clock"]["gfx_0"]["clk"]["value"] * 0.85)
    entry["power"]["throttle_status"] = "THROTTLED"
    entry["throttle"] = {"ppt_violation_status": True, "socket_thermal_violation_status": False}


def _hot(entry: dict[str, Any]) -> None:
    if entry["gpu"] == 1:
        entry["temperature"]["hotspot"]["value"] += 25
        entry["clock"]["gfx_0"]["clk"]["value"] = round(entry["clock"]["gfx_0"]["clk"]["value"] * 0.85)
        entry["throttle"] = {"hbm_thermal_violation_status": False, "socket_thermal_violation_status": True}


def _prochot(entry: dict[str, Any]) -> None:
    if entry["gpu"] == 2:
        entry["clock"]["gfx_0"]["clk"]["value"] = round(entry["clock"]["gfx_0"]["clk"]["value"] * 0.65)
        entry["throttle"] = {"prochot_violation_status": True}


def amd_rack(plant: Callable[[dict[str, Any]], None], duration_s: int = 240) -> list[Event]:
    rng = np.random.default_rng(0)
    names = tuple(f"node{i:02d}" for i in range(NODES))
    parsers = [AmdSmiParser(name, node_index=i) for i, name in enumerate(names)]
    events: list[Event] = [RunStarted(0.0, "amd", "Offline", names, GPUS, None, None, "sim", 0.0)]
    events += [NodeStatus(0.0, n, "up") for n in names]
    tokens = np.zeros(NODES)
    for k in range(duration_s + 1):
        t = float(k)
        rate = np.full(NODES, RATE) * (1 + rng.normal(0, 0.003, NODES))
        for i, parser in enumerate(parsers):
            document = [
                _entry(g, 2100 * (1 + rng.normal(0, 0.004)), 650 + rng.normal(0, 5), 60 + rng.normal(0, 0.5))
                for g in range(GPUS)
            ]
            if i == SLOW and t >= FAULT_T:
                for entry in document:
                    plant(entry)
                rate[i] *= 0.85
            read = parser.feed(json.dumps(document).encode() + b"\n", t)
            events += [e for e in read if isinstance(e, GpuBatch)]
        tokens += rate
        events.append(
            ProgressBatch(t, np.arange(NODES), (tokens / 100).astype(np.int64), tokens.astype(np.int64))
        )
    return events


@pytest.mark.parametrize(
    ("plant", "kind", "gpu", "words"),
    [
        (_power_violation, "power_cap", None, "SW power cap"),
        (_hot, "thermal", 1, ""),
        (_prochot, "throttle", 2, "HW slowdown"),
    ],
    ids=["package power violation", "a hot GPU in thermal violation", "PROCHOT on one GPU"],
)
def test_amd_violations_are_the_hint(
    plant: Callable[[dict[str, Any]], None], kind: str, gpu: int | None, words: str
) -> None:
    core = RackCore()
    for event in amd_rack(plant):
        core.ingest(event)
    snap = core.snapshot()
    assert snap.stragglers == ("node05",)
    cause = snap.nodes.causes[SLOW]
    assert cause is not None
    assert (cause.kind, cause.gpu) == (kind, gpu), cause.text
    assert words in cause.text
    assert all(c is None for i, c in enumerate(snap.nodes.causes) if i != SLOW)
