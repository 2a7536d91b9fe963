"""What a real NVIDIA H200 said (tests/data/device-h200, written by scripts/device/run_checks.sh on a lent
GPU machine), read by tokenwatch's nvidia-smi parser, its NVML reader and its summary of the watches of a
real LoadGen run on that GPU. Each check is against another of the GPU's own outputs (nvidia-smi -q,
the energy counter against the power readings, LoadGen's summary, what the SUT served)."""

from __future__ import annotations

import itertools
import json
import math
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pynvml
import pytest

from tokenwatch.base.events import GPU_METRICS, GpuBatch, Notice
from tokenwatch.base.throttle import reason_names
from tokenwatch.inputs.live.nvml_source import NvmlReader
from tokenwatch.sources.nvidia_smi import DEFAULT_QUERY_FIELDS, NvidiaSmiParser

H200 = Path(__file__).resolve().parents[1] / "data" / "device-h200"
COLUMN = {name: GPU_METRICS.index(name) for name in GPU_METRICS}


def _batches(text: str) -> tuple[list[GpuBatch], list[Notice]]:
    parser = NvidiaSmiParser("h200", DEFAULT_QUERY_FIELDS)
    events = parser.feed(text.encode(), 1.0) + parser.close(2.0)
    return [e for e in events if isinstance(e, GpuBatch)], [e for e in events if isinstance(e, Notice)]


def _q_field(q_text: str, label: str) -> str:
    """A value of ``nvidia-smi -q`` by its label (the first occurrence)."""
    match = re.search(rf"^\s*{re.escape(label)}\s*:\s*(.+?)\s*$", q_text, re.MULTILINE)
    assert match, label
    return match.group(1)


@pytest.mark.parametrize("capture", ["load-Offline.query-gpu.csv", "load-Server.query-gpu.csv"])
def test_every_streamed_row_of_a_whole_run_parses_with_the_limit_the_gpu_states(capture: str) -> None:
    text = (H200 / capture).read_text()
    rows = [line for line in text.splitlines() if line.strip()]
    batches, notices = _batches(text)
    assert notices == []
    assert sum(len(b.gpu) for b in batches) == len(rows)
    values = np.vstack([b.values for b in batches])
    limit = float(_q_field((H200 / "h200-idle.q.txt").read_text(), "Current Power Limit").split()[0])
    assert limit == 700.0
    assert np.all(values[:, COLUMN["power_limit_w"]] == limit)
    powers = [float(line.split(",")[1]) for line in rows]
    assert values[:, COLUMN["power_w"]].tolist() == powers
    assert max(powers) > 400 > 100 > min(powers)  # the GPU worked hard, and idled at the ends


def test_a_power_capped_gpu_is_named_as_such_the_way_nvidia_smi_q_says_it() -> None:
    perf = (H200 / "h200-load-Offline.perf.q.txt").read_text()
    assert _q_field(perf, "SW Power Cap") == "Active"
    assert _q_field(perf, "Idle") == "Not Active"
    batches, notices = _batches(
        (H200 / "load-Offline.units.csv").read_text()
    )  # same moment, header and units
    assert notices == []
    (batch,) = batches
    assert reason_names(int(batch.throttle_reasons[0])) == ["sw_power_cap"]
    average = float(_q_field(perf, "Average Power Draw").split()[0])
    assert batch.values[0, COLUMN["power_w"]] == pytest.approx(average)  # power.draw is the 1-s average
    idle, _ = _batches((H200 / "idle.query-gpu.csv").read_text())
    assert _q_field((H200 / "h200-idle.q.txt").read_text(), "Idle") == "Active"
    assert reason_names(int(idle[0].throttle_reasons[0])) == ["gpu_idle"]


def test_driver_580_offers_no_energy_field_to_query() -> None:
    """Why energy comes from NVML or DCGM: nvidia-smi's query list has no energy counter."""
    help_text = (H200 / "help-query-gpu.txt").read_text()
    assert "power.draw" in help_text
    assert "energy" not in help_text.lower()


class AnsweringNvml:
    """pynvml's functions and constants, answering what NVML answered on the H200 at one moment."""

    NVMLError = pynvml.NVMLError
    NVML_CLOCK_SM = pynvml.NVML_CLOCK_SM
    NVML_CLOCK_MEM = pynvml.NVML_CLOCK_MEM
    NVML_TEMPERATURE_GPU = pynvml.NVML_TEMPERATURE_GPU

    def __init__(self, raw: list[dict[str, Any]]) -> None:
        self.raw = raw

    def nvmlInit(self) -> None:
        pass

    def nvmlShutdown(self) -> None:
        pass

    def nvmlDeviceGetCount(self) -> int:
        return len(self.raw)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetPowerUsage(self, h: int) -> int:
        return int(self.raw[h]["nvmlDeviceGetPowerUsage"])

    def nvmlDeviceGetEnforcedPowerLimit(self, h: int) -> int:
        return int(self.raw[h]["nvmlDeviceGetEnforcedPowerLimit"])

    def nvmlDeviceGetTotalEnergyConsumption(self, h: int) -> int:
        return int(self.raw[h]["nvmlDeviceGetTotalEnergyConsumption"])

    def nvmlDeviceGetClockInfo(self, h: int, clock: int) -> int:
        return int(self.raw[h]["clock_sm" if clock == pynvml.NVML_CLOCK_SM else "clock_mem"])

    def nvmlDeviceGetMemoryInfo(self, h: int) -> SimpleNamespace:
        return SimpleNamespace(total=self.raw[h]["memory_total"], used=self.raw[h]["memory_used"])

    def nvmlDeviceGetUtilizationRates(self, h: int) -> SimpleNamespace:
        return SimpleNamespace(gpu=self.raw[h]["util_gpu"], memory=self.raw[h]["util_memory"])

    def nvmlDeviceGetTemperature(self, h: int, _sensor: int) -> int:
        return int(self.raw[h]["temperature_gpu"])

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: int) -> int:
        return int(self.raw[h]["clocks_event_reasons"])


NVML_UNITS = {  # GPU metric -> (NVML's answer, factor to the event model's unit)
    "power_w": ("nvmlDeviceGetPowerUsage", 1e-3),
    "power_limit_w": ("nvmlDeviceGetEnforcedPowerLimit", 1e-3),
    "energy_j": ("nvmlDeviceGetTotalEnergyConsumption", 1e-3),
    "sm_clock_mhz": ("clock_sm", 1.0),
    "mem_clock_mhz": ("clock_mem", 1.0),
    "hbm_used_mib": ("memory_used", 1 / 2**20),
    "hbm_total_mib": ("memory_total", 1 / 2**20),
    "hbm_busy_pct": ("util_memory", 1.0),
    "util_pct": ("util_gpu", 1.0),
    "temp_c": ("temperature_gpu", 1.0),
}


@pytest.mark.parametrize("capture", ["nvml-idle.json", "nvml-load-Offline.json", "nvml-load-Server.json"])
def test_nvml_reader_turns_the_h200s_answers_into_watts_joules_and_mib(capture: str) -> None:
    rounds = json.loads((H200 / capture).read_text())["rounds"]
    for moment in rounds:
        raw = moment["raw"][0]
        reader = NvmlReader(AnsweringNvml(moment["raw"]))
        reader.open()
        batch = reader.read(moment["t"])
        for metric, (answer, factor) in NVML_UNITS.items():
            assert batch.values[0, COLUMN[metric]] == pytest.approx(raw[answer] * factor), metric
        assert math.isnan(batch.values[0, COLUMN["hbm_temp_c"]])  # not asked of NVML: unknown, not 0
        assert int(batch.throttle_reasons[0]) == raw["clocks_event_reasons"]


@pytest.mark.parametrize("capture", ["nvml-idle.json", "nvml-load-Offline.json", "nvml-load-Server.json"])
def test_the_reader_on_the_gpu_read_what_nvml_answered_a_moment_before(capture: str) -> None:
    """On the GPU the reader ran right after the raw answers were taken: what cannot move in that
    instant is equal, and the energy counter moved forward by no more than the GPU's power allows."""
    for moment in json.loads((H200 / capture).read_text())["rounds"]:
        raw, on_gpu = moment["raw"][0], moment["reader"][0]
        assert on_gpu["power_limit_w"] == raw["nvmlDeviceGetEnforcedPowerLimit"] / 1000 == 700.0
        assert on_gpu["hbm_total_mib"] == raw["memory_total"] / 2**20 == 143771.0
        moved_j = on_gpu["energy_j"] - raw["nvmlDeviceGetTotalEnergyConsumption"] / 1000
        assert 0 <= moved_j <= 1000 * 0.5  # at most 1 kW (the limit is 700 W) for half a second


@pytest.mark.parametrize("capture", ["nvml-idle.json", "nvml-load-Offline.json"])
def test_the_energy_counter_grows_by_the_power_the_gpu_reports(capture: str) -> None:
    """Joules from the counter over the capture against the mean of the 1-s average power readings:
    the counter's unit (mJ) and the reader's scaling are right (a steady load: within 5 %)."""
    rounds = json.loads((H200 / capture).read_text())["rounds"]
    energy = [r["reader"][0]["energy_j"] for r in rounds]
    power = [r["reader"][0]["power_w"] for r in rounds]
    elapsed = rounds[-1]["t"] - rounds[0]["t"]
    trapezoid = sum((a + b) / 2 for a, b in itertools.pairwise(power)) / (len(power) - 1)
    assert (energy[-1] - energy[0]) / elapsed == pytest.approx(trapezoid, rel=0.05)


def _loadgen(scenario: str, folder: Path = H200) -> dict[str, str]:
    summary = (folder / f"loadgen-{scenario}" / "mlperf_log_summary.txt").read_text()
    fields = dict(re.findall(r"^\s*([A-Za-z][^:\n]*?)\s*:\s*(\S+)\s*$", summary, re.MULTILINE))
    return fields


@pytest.mark.parametrize(
    ("scenario", "source"), [(s, g) for s in ("Offline", "Server") for g in ("nvml", "nvidia-smi")]
)
def test_the_watch_of_a_real_gpu_run_agrees_with_loadgen_on_validity_and_counts_its_tokens(
    run_cli: Any, scenario: str, source: str
) -> None:
    result = run_cli("summarize", str(H200 / f"watch-{scenario}-{source}.jsonl.zst"), "--json")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    loadgen = _loadgen(scenario)
    assert summary["complete"] is True
    assert summary["verdict"]["valid"] is (loadgen["Result is"] == "VALID")
    assert summary["nodes"][0]["tokens_per_s"] > 0
    # The GPU's energy: NVML's counter where the watch read NVML; nvidia-smi has none to read.
    assert summary["power"]["energy_source"] == ("counter" if source == "nvml" else "power")


LOADGEN_TOKENS_PER_S = {"Offline": "Tokens per second", "Server": "Completed tokens per second"}


RUNS = [(H200, "Offline"), (H200, "Server"), (H200 / "run2", "Offline"), (H200 / "run2", "Server")]


@pytest.mark.parametrize(("folder", "scenario"), RUNS, ids=[f"{f.name}-{s}" for f, s in RUNS])
def test_the_final_figure_of_a_real_gpu_run_is_loadgens(run_cli: Any, folder: Path, scenario: str) -> None:
    loadgen = float(_loadgen(scenario, folder)[LOADGEN_TOKENS_PER_S[scenario]])
    for source in ("nvml", "nvidia-smi"):
        result = run_cli("summarize", str(folder / f"watch-{scenario}-{source}.jsonl.zst"), "--json")
        summary = json.loads(result.stdout)
        assert summary["verdict"]["judged_by"] == "LoadGen"
        assert summary["verdict"]["valid"] is (_loadgen(scenario, folder)["Result is"] == "VALID")
        assert summary["aggregate"]["tokens_per_s"] == pytest.approx(loadgen, rel=0.005)


@pytest.mark.parametrize("scenario", ["Offline", "Server"])
def test_the_live_watch_on_the_gpu_machine_ended_on_loadgens_figure(scenario: str) -> None:
    """What the watches printed on the GPU machine as the run went (run2, the code that lets LoadGen judge):
    the last line is FINAL with LoadGen's figure; before it, the projection warmed up and never said VALID
    for a run LoadGen failed."""
    run2 = H200 / "run2"
    loadgen = _loadgen(scenario, run2)
    figure = float(loadgen[LOADGEN_TOKENS_PER_S[scenario]])
    for source in ("nvml", "nvidia-smi"):
        lines = (run2 / f"watch-{scenario}-{source}.stdout").read_text().splitlines()
        interval = [line for line in lines if re.match(r"^\d\d:\d\d ", line)]
        last = interval[-1]
        assert f"FINAL {loadgen['Result is']}" in last
        shown = float(re.split(r"\s+", last)[2].replace(",", ""))
        assert shown == pytest.approx(figure, abs=0.5)
        assert "proj warming up" in interval[0]
        if loadgen["Result is"] == "INVALID":
            assert not any(" VALID" in line and "INVALID" not in line for line in interval)
            assert any("DECIDED INVALID" in line for line in interval[:-1])
