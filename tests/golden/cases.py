"""The runs whose output the golden files pin, and how each one is made.

Every input is fixed: a seeded ``sim --speed 0`` run (deterministic byte for byte), a sample recording
from ``sample_runs/``, or MLPerf LoadGen result folders from ``tests/data/``. Inputs are named by paths
relative to the repository root and the CLI runs there, so paths that reach the output (a result
folder's ``path``) read the same on every checkout.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from tests.conftest import REPO_ROOT, cli_env

GOLDEN_DIR = Path(__file__).resolve().parent / "expected"
LOADGEN = "tests/data/sources/loadgen"

# Artefacts: what a case's golden files hold.
HEADLESS = "headless.txt"  # stdout of --headless: one line per interval, then the summary table
SNAPSHOTS = "snapshots.jsonl"  # the --jsonl file
SUMMARY_JSON = "summary.json"  # summarize --json
SUMMARY_TABLE = "summary.txt"  # summarize (the table)


@dataclass(frozen=True, slots=True)
class HeadlessCase:
    """``sim`` (``recording`` None: the run is recorded on the way) or ``replay RECORDING``, headless."""

    name: str
    args: tuple[str, ...]  # the command's own flags, without --headless / --interval / --jsonl / --record
    interval_s: float
    recording: str | None = None
    start_s: float = 0.0
    scenario: str = "Offline"

    @property
    def artefacts(self) -> tuple[str, ...]:
        # A sim run also pins `summarize --json` of its own recording.
        return (HEADLESS, SNAPSHOTS) if self.recording else (HEADLESS, SNAPSHOTS, SUMMARY_JSON)


@dataclass(frozen=True, slots=True)
class RecordingSummaryCase:
    name: str
    recording: str

    @property
    def artefacts(self) -> tuple[str, ...]:
        return (SUMMARY_JSON,)


@dataclass(frozen=True, slots=True)
class ResultFoldersCase:
    """``summarize DIR... [--gpus-per-node N]`` of MLPerf LoadGen result folders."""

    name: str
    folders: tuple[str, ...]
    gpus_per_node: int | None = None
    table: bool = False  # also pin the human table

    @property
    def artefacts(self) -> tuple[str, ...]:
        return (SUMMARY_JSON, SUMMARY_TABLE) if self.table else (SUMMARY_JSON,)


Case = HeadlessCase | RecordingSummaryCase | ResultFoldersCase

SIM_OFFLINE = HeadlessCase(
    "sim-offline", ("sim", "--seed", "7", "--duration", "5m", "--speed", "0"), interval_s=30
)
SIM_SERVER = HeadlessCase(
    "sim-server",
    ("sim", "--scenario", "Server", "--seed", "11", "--duration", "3m", "--speed", "0"),
    interval_s=30,
    scenario="Server",
)
# node09 never answers, node07 goes down mid-run; throttle, slow and stale show in the alerts.
SIM_FAULTS = HeadlessCase(
    "sim-faults",
    (
        "sim",
        "--seed",
        "3",
        "--duration",
        "6m",
        "--speed",
        "0",
        "--faults",
        "node09:down@0s,node07:down@2m,node03:throttle@1m-3m,node11:slow@1m-2m,node05:stale@3m10s-3m50s",
    ),
    interval_s=30,
)
REPLAY_SERVER = HeadlessCase(
    "replay-server",
    ("replay", "sample_runs/gb300-nvl72-server.jsonl.zst", "--speed", "0", "--start", "4m"),
    interval_s=60,
    recording="sample_runs/gb300-nvl72-server.jsonl.zst",
    start_s=240,
    scenario="Server",
)
REPLAY_NODE_FAILURE = HeadlessCase(
    "replay-node-failure",
    ("replay", "sample_runs/gb300-nvl72-node-failure.jsonl.zst", "--speed", "0"),
    interval_s=300,
    recording="sample_runs/gb300-nvl72-node-failure.jsonl.zst",
)
HEADLESS_CASES = (SIM_OFFLINE, SIM_SERVER, SIM_FAULTS, REPLAY_SERVER, REPLAY_NODE_FAILURE)

RECORDING_SUMMARY_CASES = tuple(
    RecordingSummaryCase(f"sample-{kind}", f"sample_runs/gb300-nvl72-{kind}.jsonl.zst")
    for kind in ("offline", "server", "node-failure")
)

RESULT_FOLDER_CASES = (
    # Eight real per-GPU Offline results (all VALID), detail logs beside four of them.
    ResultFoldersCase("results-asustek-offline", (f"{LOADGEN}/asustek-8xmi325x-offline",), gpus_per_node=1),
    # Two Server results, one INVALID: per-node TTFT / TPOT, no rack percentiles, a flagged node.
    ResultFoldersCase(
        "results-server-pair",
        (f"{LOADGEN}/generated/server-short", f"{LOADGEN}/nvidia-gb200-server"),
        table=True,
    ),
    # One whole-system Server result: its percentiles are the rack's.
    ResultFoldersCase("results-amd-server", (f"{LOADGEN}/amd-8xmi325x-server",), gpus_per_node=8),
    # A published submission: its accuracy/ stub skipped, the GPUs from its systems/*.json (issue 10).
    ResultFoldersCase("results-dell-submission", (f"{LOADGEN}/submissions/dell-xe9680l-b200x8",), table=True),
    # A ranging run beside run_1: listed apart, never summed.
    ResultFoldersCase(
        "results-lenovo-ranging",
        (f"{LOADGEN}/submissions/lenovo-sr680a-b200x8-ranging",),
        gpus_per_node=8,
        table=True,
    ),
)

ALL_CASES: tuple[Case, ...] = (*HEADLESS_CASES, *RECORDING_SUMMARY_CASES, *RESULT_FOLDER_CASES)


def golden_path(case: Case, artefact: str) -> Path:
    return GOLDEN_DIR / f"{case.name}.{artefact}"


@dataclass(slots=True)
class CaseOutput:
    """What one case produced: each artefact's bytes, the recording behind it, and stderr."""

    artefacts: dict[str, bytes] = field(default_factory=dict)
    recording: Path | None = None
    stderr: dict[str, str] = field(default_factory=dict)  # command label -> its stderr


def tokenwatch(*args: str) -> subprocess.CompletedProcess[bytes]:
    """``python -m tokenwatch ARGS`` in the repository root, output as bytes (no newline translation)."""
    result = subprocess.run(
        [sys.executable, "-m", "tokenwatch", *args],
        capture_output=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        env=cli_env(),
        cwd=REPO_ROOT,
    )
    if result.returncode != 0:
        stderr = result.stderr.decode(errors="replace")
        raise AssertionError(f"tokenwatch {' '.join(args)} exited {result.returncode}:\n{stderr}")
    return result


def produce(case: Case, workdir: Path) -> CaseOutput:
    """Run the case's commands (each once) and collect its artefacts."""
    out = CaseOutput()
    if isinstance(case, HeadlessCase):
        jsonl = workdir / f"{case.name}.jsonl"
        flags = ["--headless", "--interval", f"{case.interval_s:g}s", "--jsonl", str(jsonl)]
        if case.recording is None:
            out.recording = workdir / f"{case.name}.rec.jsonl"
            flags += ["--record", str(out.recording)]
        else:
            out.recording = REPO_ROOT / case.recording
        run = tokenwatch(*case.args, *flags)
        out.artefacts[HEADLESS] = run.stdout
        out.artefacts[SNAPSHOTS] = jsonl.read_bytes()
        out.stderr[case.args[0]] = run.stderr.decode()
        if case.recording is None:
            summary = tokenwatch("summarize", str(out.recording), "--json")
            out.artefacts[SUMMARY_JSON] = summary.stdout
            out.stderr["summarize"] = summary.stderr.decode()
    elif isinstance(case, RecordingSummaryCase):
        out.recording = REPO_ROOT / case.recording
        summary = tokenwatch("summarize", case.recording, "--json")
        out.artefacts[SUMMARY_JSON] = summary.stdout
        out.stderr["summarize"] = summary.stderr.decode()
    else:
        gpus = () if case.gpus_per_node is None else ("--gpus-per-node", str(case.gpus_per_node))
        summary = tokenwatch("summarize", *case.folders, *gpus, "--json")
        out.artefacts[SUMMARY_JSON] = summary.stdout
        out.stderr["summarize"] = summary.stderr.decode()
        if case.table:
            table = tokenwatch("summarize", *case.folders, *gpus)
            out.artefacts[SUMMARY_TABLE] = table.stdout
            out.stderr["summarize table"] = table.stderr.decode()
    return out
