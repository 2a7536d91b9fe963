"""Every benchmark takes ``--short``, the quick pass CI runs through ``benchmarks/run_all.py`` so that none
rots; the runner fails a script that fails, hangs or prints no MET/MISSED line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = ROOT / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import run_all  # noqa: E402

SCRIPTS = run_all.scripts()


def test_the_runner_finds_every_benchmark() -> None:
    on_disk = {p.name for p in BENCHMARKS.glob("bench_*.py")} - {"bench_common.py"}
    assert {p.name for p in SCRIPTS} == on_disk
    assert len(SCRIPTS) >= 15


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.stem for p in SCRIPTS])
def test_each_benchmark_takes_the_short_option(script: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(script), "--help"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "--short" in done.stdout


def write(folder: Path, name: str, body: str) -> Path:
    path = folder / name
    path.write_text(f"import sys\n{body}\n")
    return path


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ("print('MET     a figure: 1 ms  (target <= 2 ms)')", "ok"),
        ("print('MISSED  a figure: 3 ms  (target <= 2 ms)')", "ok"),
        ("print('a figure, no verdict')", "printed no MET/MISSED line"),
        ("print('MET  x'); sys.exit(3)", "failed (exit 3)"),
        ("import time; time.sleep(600)", "timed out after 3 s"),
    ],
    ids=["met", "missed-is-not-a-failure", "no-verdict", "exit-status", "silent-hang"],
)
def test_the_runner_judges_a_script(tmp_path: Path, body: str, status: str) -> None:
    # A generous limit where the script ends by itself (a loaded machine starts Python slowly).
    limit_s = 3.0 if "sleep" in body else 300.0
    outcome = run_all.run_one(write(tmp_path, "bench_x.py", body), short=True, limit_s=limit_s)
    assert outcome.status == status
    if status == "ok":
        assert len(outcome.met) + len(outcome.missed) == 1
