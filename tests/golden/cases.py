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
from tokenwatch.base.events import RunEnded
from tokenwatch.recording import RecordingWriter, read_events

GOLDEN_DIR = Path(__file__).resolve().parent / "expected"
LOADGEN = "tests/data/sources/loadgen"

# Artefacts: what a case's golden files hold.
HEADLESS = "headless.txt"  # stdout of --headless: one line per interval, then the summary table
SNAPSHOTS = "snapshots.jsonl"  # the --jsonl file
SUMMARY_JSON = "summary.json"  # summarize --json
SUMMARY_TABLE = "summary.txt"  # summarize (the table)


@dataclass(frozen=True, slots=True)
class HeadlessCase:
    """``sim`` (``recording`` None: the run is recorded on the way) or ``replay RECORDING``, headless.

    With ``cut_s``, the ``sim`` run is recorded, cut after ``cut_s`` of run time, and the cut recording is
    replayed: ending in ``RunEnded(reason="interrupted")`` at its last event (what Ctrl-C writes) when
    ``interrupted``, or with no run end at all (a writer killed, a file cut off). A live interrupt is
    timing-dependent; its recording is not, and replaying it shows what the interrupted run showed.
    """

    name: str
    args: tuple[str, ...]  # the command's own flags, without --headless / --interval / --jsonl / --record
    interval_s: float
    recording: str | None = None
    start_s: float = 0.0
    scenario: str = "Offline"
    cut_s: float | None = None
    interrupted: bool = True

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
# At its end: node07 down since 2m, node05 silent since 4m (its work done, never said so), node03
# throttled from 1m to its (late) finish.
FAULTS_AT_END = "node07:down@2m,node05:stale@4m,node03:throttle@1m"
SIM_FAULTS_AT_END = HeadlessCase(
    "sim-faults-at-end",
    ("sim", "--seed", "5", "--duration", "6m", "--speed", "0", "--faults", FAULTS_AT_END),
    interval_s=60,
)
# Interrupted at 4m30s with all three faults active (node03 still throttled and running).
SIM_INTERRUPTED = HeadlessCase(
    "sim-interrupted",
    ("sim", "--seed", "5", "--duration", "6m", "--speed", "0", "--faults", FAULTS_AT_END),
    interval_s=60,
    cut_s=270,
)
# The same recording cut off at 4m30s with no run end (the writer killed).
SIM_CUT_OFF = HeadlessCase(
    "sim-cut-off",
    ("sim", "--seed", "5", "--duration", "6m", "--speed", "0", "--faults", FAULTS_AT_END),
    interval_s=60,
    cut_s=270,
    interrupted=False,
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
HEADLESS_CASES = (
    SIM_OFFLINE,
    SIM_SERVER,
    SIM_FAULTS,
    SIM_FAULTS_AT_END,
    SIM_INTERRUPTED,
    SIM_CUT_OFF,
    REPLAY_SERVER,
    REPLAY_NODE_FAILURE,
)

RECORDING_SUMMARY_CASES = (
    *(
        RecordingSummaryCase(f"sample-{kind}", f"sample_runs/gb300-nvl72-{kind}.jsonl.zst")
        for kind in ("offline", "server", "node-failure")
    ),
    # The first 90 s of the Offline sample as written before counters were written as differences:
    # whole energy counters and whole work counters (its golden file was made by the code of then).
    RecordingSummaryCase("whole-counters", "tests/data/recording/whole-counters.jsonl.zst"),
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
    # A published submission: its accuracy/ stub skipped, the GPUs from its systems/*.json.
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


def cut_recording(case: HeadlessCase, workdir: Path) -> Path:
    """The case's ``sim`` run recorded, then cut after ``cut_s`` (and ended as interrupted, if so)."""
    assert case.cut_s is not None
    whole = workdir / f"{case.name}.whole.jsonl"
    tokenwatch(*case.args, "--headless", "--interval", "1h", "--record", str(whole))
    events, warnings = read_events(whole)
    assert not warnings
    kept = [e for e in events if e.t <= case.cut_s]
    if case.interrupted:
        kept.append(RunEnded(kept[-1].t, "interrupted"))
    cut = workdir / f"{case.name}.rec.jsonl"
    with RecordingWriter(cut, meta={"created": "2025-09-09T00:00:00+00:00"}) as writer:
        for event in kept:
            writer.write(event)
    return cut


def produce(case: Case, workdir: Path) -> CaseOutput:
    """Run the case's commands (each once) and collect its artefacts."""
    out = CaseOutput()
    if isinstance(case, HeadlessCase):
        jsonl = workdir / f"{case.name}.jsonl"
        flags = ["--headless", "--interval", f"{case.interval_s:g}s", "--jsonl", str(jsonl)]
        args = case.args
        if case.cut_s is not None:
            out.recording = cut_recording(case, workdir)
            args = ("replay", str(out.recording), "--speed", "0")
        elif case.recording is None:
            out.recording = workdir / f"{case.name}.rec.jsonl"
            flags += ["--record", str(out.recording)]
        else:
            out.recording = REPO_ROOT / case.recording
        run = tokenwatch(*args, *flags)
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
