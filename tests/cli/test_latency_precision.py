"""A latency percentile is shown with the precision its source allows: LoadGen's exact value to 0.1 ms, the
core's estimate from its 1 % log buckets to three digits and marked ``~`` (a recording's summary said
``918.4`` for a bucket's value, as if it knew the tenth of a millisecond)."""

from __future__ import annotations

import math
import re

import pytest

from tests.conftest import REPO_ROOT, RunCli
from tests.sources.conftest import LOADGEN
from tokenwatch.base.formatting import latency_cell

SERVER_RECORDING = REPO_ROOT / "sample_runs" / "gb300-nvl72-server.jsonl.zst"
LOADGEN_SERVER = LOADGEN / "nvidia-gb300-nvl72-server"


@pytest.mark.parametrize("value", [0.353, 9.996, 54.7, 318.2, 918.4, 999.6, 13_943.1, 58_852.6, 120_428.8])
def test_an_estimate_holds_three_significant_digits_and_says_so(value: float) -> None:
    shown = latency_cell(value, estimated=True)
    assert shown.startswith("~")
    number = float(shown[1:].replace(",", ""))
    exponent = math.floor(math.log10(value))
    assert number == pytest.approx(round(value, 2 - exponent), abs=10.0 ** (exponent - 2))
    assert len(shown[1:].replace(",", "").replace(".", "").lstrip("0").rstrip("0") or "0") <= 3
    assert latency_cell(value, estimated=False) == f"{value:,.1f}"  # an exact figure keeps its tenth


def latency_rows(table: str) -> dict[str, list[str]]:
    lines = table.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Latency (ms)"))
    rows = {}
    for line in lines[start + 1 :]:
        parts = line.split()
        if len(parts) != 4 or parts[0] not in ("TTFT", "TPOT", "E2E"):
            break
        rows[parts[0]] = parts[1:]
    return rows


def test_a_recordings_percentiles_are_marked_estimates_and_loadgens_are_exact(run_cli: RunCli) -> None:
    recording = run_cli("summarize", str(SERVER_RECORDING))
    assert recording.returncode == 0, recording.stderr
    estimated = latency_rows(recording.stdout)
    assert estimated
    for cells in estimated.values():
        assert all(re.fullmatch(r"~[\d,.]+", cell) for cell in cells), cells
    loadgen = run_cli("summarize", str(LOADGEN_SERVER))
    assert loadgen.returncode == 0, loadgen.stderr
    exact = latency_rows(loadgen.stdout)
    assert exact["TTFT"][2] == "276.3"  # LoadGen's 276,316,453 ns, to its tenth of a millisecond
