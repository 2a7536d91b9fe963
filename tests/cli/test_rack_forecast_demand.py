"""Each rack's forecast is made only where something reads it as the run goes: the dashboard (the fleet
board, a rack's verdict panel) and /metrics (its per-rack families). A headless run, with or without
``--jsonl`` and ``--record``, never reads them, and what it prints is the same without them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tokenwatch.cli.options import RunOptions
from tokenwatch.core import CoreConfig

_SIM = (
    "sim",
    "--racks",
    "2",
    "--duration",
    "2m",
    "--speed",
    "0",
    "--headless",
    "--interval",
    "30s",
    "--seed",
    "5",
)


def test_only_the_dashboard_and_metrics_keep_each_racks_forecast() -> None:
    assert not RunOptions("sim", headless=True).core_config().rack_forecasts
    assert not RunOptions("sim", headless=True, jsonl="-", record="r.jsonl").core_config().rack_forecasts
    assert not RunOptions("replay").core_config().rack_forecasts  # pytest's stdout is not a terminal
    assert RunOptions("sim", force_dashboard=True).core_config().rack_forecasts
    assert RunOptions("sim", headless=True, prometheus_port=0).core_config().rack_forecasts
    # A setting given on the command line is kept beside it.
    config = RunOptions("sim", headless=True, ttft_sla_s=0.5).core_config(CoreConfig(verdict_interval_s=5.0))
    assert config.ttft_sla_s == 0.5
    assert config.verdict_interval_s == 5.0
    assert CoreConfig().rack_forecasts  # a core made in code keeps them (the report, a baseline, tests)


def test_a_headless_fleet_sims_lines_and_summary_do_not_read_the_racks_forecasts(tmp_path: Path) -> None:
    """The same headless fleet run with the per-rack forecasts forced on (/metrics on a free port) and
    off: every line of its JSONL and its summary are the same, bar the port's announcement on stderr."""
    outputs = []
    for extra in ([], ["--prometheus-port", "0"]):
        jsonl = tmp_path / f"run{len(outputs)}.jsonl"
        run = subprocess.run(
            [sys.executable, "-m", "tokenwatch", *_SIM, "--jsonl", str(jsonl), *extra],
            capture_output=True,
            text=True,
            check=True,
            timeout=600,
        )
        outputs.append((run.stdout, jsonl.read_text()))
    assert outputs[0] == outputs[1]
    assert outputs[0][1].count("\n") >= 4  # a snapshot every 30 s of the 2-minute run
