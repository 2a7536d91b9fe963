"""Ingest speed at 1, 16 and 64 racks, each as a ratio to a floor measured in the same run; the verdict
tick at 64 racks against the dashboard's frame; summarize of a failing Server run against a passing one.

    python benchmarks/bench_speed.py [--short] [--racks 1,16,64] [--duration 80m] [--repeat 1]

Every command runs as `python -m tokenwatch ...` in a child process pinned to one CPU (taskset when
present); the figure is its CPU time (user + system), the best of ``--repeat``, beside a floor run the
same way on the same file:

* ``sim --racks N --speed 0 --headless --record`` against a bare zstd pass that compresses the
  recording's own bytes at the recorder's level (target <= 3x);
* headless ``replay --speed 0`` against a bare orjson pass over the recording's lines (<= 3x);
* ``summarize`` against a bare ``json.loads`` pass (1 rack: <= 1.0x) and an orjson pass (64 racks: <= 0.7x).

In process, on a 64-rack core built from the simulator (Offline and Server): one verdict tick (the
rack-wide forecast and each rack's, ``verdict_tick`` + ``fleet_tick``), CPU time, median and p95 of
``--ticks`` forced ticks a second apart while the run goes on (its events between them not timed),
against the dashboard's frame (1 / ``REFRESH_HZ`` = 250 ms: a tick longer than
that drops a frame) and against "a few ms" (<= 5 ms).

``--parts summarize``: ``summarize`` of a fresh recording (its summary trailer read), of the same bytes
without the trailer (the full pass an older recording takes) and, with ``--before DIR``, of another
checkout's code on those bytes, each against the same json.loads / orjson passes.

``--parts record``: the recorder alone, writing a rack's 10-minute Server and Offline runs (made in
memory first) against a zstd pass over its lines, and the recording's size (``bench_record.py``); with
``--code DIR``, of that checkout's tokenwatch (the code before, in the same session).

Server runs of the same length, one that passes (llama2-70b) and one that fails early stopping
(llama2-70b-interactive): ``summarize`` of the failing one against the passing one (<= 1.1x).

``--short`` (what CI runs): 2-minute runs (1 minute at 64 racks), one repeat, 10 ticks; the long form,
80 minutes, takes tens of minutes at 64 racks. Prints MET / MISSED per figure.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tokenwatch.base.events import Scenario

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_common import bytecode_compiled, verdict_text  # noqa: E402

_DECODE_PASS = r"""
import sys, zstandard
loads = __import__(sys.argv[2]).loads
with open(sys.argv[1], "rb") as fh:
    stream = zstandard.ZstdDecompressor().stream_reader(fh, read_across_frames=True)
    tail = b""
    while chunk := stream.read(1 << 20):
        lines = (tail + chunk).split(b"\n")
        tail = lines.pop()
        for line in lines:
            loads(line)
"""
# The recorder's own work at its floor: the recording's bytes (decompressed beforehand) compressed at
# its level, in its frame size.
_ZSTD_PASS = r"""
import sys, zstandard
compressor = zstandard.ZstdCompressor(level=3, write_checksum=True)
with open(sys.argv[1], "rb") as fh, open(sys.argv[2], "wb") as out:
    writer = compressor.stream_writer(out)
    while chunk := fh.read(1 << 20):
        writer.write(chunk)
    writer.flush(zstandard.FLUSH_FRAME)
"""
# A fresh launcher per measurement, so RUSAGE_CHILDREN describes exactly one child.
_LAUNCH = (
    "import resource,subprocess,sys; subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL); "
    "r = resource.getrusage(resource.RUSAGE_CHILDREN); print(r.ru_utime + r.ru_stime)"
)
FRAME_S = 0.25  # the dashboard redraws at 4 Hz (frontends/tui/app.py REFRESH_HZ)
FEW_MS = 0.005


def cpu_of(cmd: list[str], repeat: int, code: Path = REPO) -> float:
    """The best CPU time (s) of ``cmd`` in a child pinned to one core (``code``: the checkout it runs)."""
    taskset = shutil.which("taskset")
    pinned = [taskset, "-c", "0", *cmd] if taskset else cmd
    env = dict(os.environ, PYTHONPATH=str(code))
    runs = []
    for _ in range(repeat):
        out = subprocess.run(
            [sys.executable, "-c", _LAUNCH, *pinned],
            check=True,
            capture_output=True,
            text=True,
            env=env,
            cwd=REPO,
        )
        runs.append(float(out.stdout.split()[0]))
    return min(runs)


def verdict_line(name: str, value: float, floor: float, target: float, unit: str = "x") -> str:
    ratio = value / floor if floor > 0 else float("inf")
    figures = f"{value:.2f} s vs {floor:.2f} s = {ratio:.2f}{unit}"
    line: str = verdict_text(name, figures, f"<= {target:g}{unit}", ratio <= target)
    return line


def tokenwatch(*args: str) -> list[str]:
    return [sys.executable, "-m", "tokenwatch", *args]


def ingest_figures(racks: int, duration: str, repeat: int, tmp: Path) -> list[str]:
    """sim + record, headless replay and summarize of ``racks`` racks against their floors."""
    rec = tmp / f"r{racks}.jsonl.zst"
    sim = tokenwatch(
        "sim", "--racks", str(racks), "--duration", duration, "--speed", "0", "--seed", "1", "--headless"
    )
    sim += ["--interval", duration, "--record", str(rec)]

    def simulate() -> float:
        rec.unlink(missing_ok=True)
        return cpu_of(sim, 1)

    sim_cpu = min(simulate() for _ in range(repeat))
    plain = tmp / f"r{racks}.jsonl"
    import zstandard

    with open(rec, "rb") as fh, open(plain, "wb") as out:
        zstandard.ZstdDecompressor().copy_stream(fh, out, read_size=1 << 20)
    zstd = cpu_of([sys.executable, "-c", _ZSTD_PASS, str(plain), str(tmp / "floor.zst")], repeat)
    plain.unlink()
    orjson = cpu_of([sys.executable, "-c", _DECODE_PASS, str(rec), "orjson"], repeat)
    json = cpu_of([sys.executable, "-c", _DECODE_PASS, str(rec), "json"], repeat)
    replay = cpu_of(
        tokenwatch("replay", str(rec), "--speed", "0", "--headless", "--interval", duration), repeat
    )
    summarize = cpu_of(tokenwatch("summarize", str(rec)), repeat)
    size = rec.stat().st_size / 1e6
    label = f"{racks} rack{'s' if racks > 1 else ''} x {duration} ({size:.0f} MB)"
    lines = [
        verdict_line(f"sim + record, {label}, vs zstd", sim_cpu, zstd, 3.0),
        verdict_line(f"headless replay, {label}, vs orjson", replay, orjson, 3.0),
        verdict_line(f"summarize, {label}, vs json.loads", summarize, json, 1.0),
    ]
    if racks >= 64:
        lines.append(verdict_line(f"summarize, {label}, vs orjson", summarize, orjson, 0.7))
    rec.unlink()
    return lines


def summarize_figures(racks: int, duration: str, repeat: int, tmp: Path, before: Path | None) -> list[str]:
    """``summarize`` of a fresh recording (its summary trailer read) and of the same bytes without the
    trailer (the full pass: an older recording's), against the json.loads and orjson passes; with
    ``before`` (another checkout, e.g. ``git worktree add /tmp/main main``) that code's summarize too."""
    rec, bare = tmp / f"s{racks}.jsonl.zst", tmp / f"s{racks}-bare.jsonl.zst"
    rec.unlink(missing_ok=True)
    sim = tokenwatch("sim", "--racks", str(racks), "--duration", duration, "--speed", "0", "--seed", "1")
    subprocess.run(
        [*sim, "--headless", "--interval", duration, "--record", str(rec)],
        check=True, stdout=subprocess.DEVNULL, env=dict(os.environ, PYTHONPATH=str(REPO)), cwd=REPO,
    )  # fmt: skip
    data = rec.read_bytes()
    # The trailer's own marks (recording/trailer.py): payload length and TWTRAILR at the very end.
    length = int.from_bytes(data[-12:-8], "little") if data.endswith(b"TWTRAILR") else -20
    bare.write_bytes(data[: len(data) - length - 20])
    json = cpu_of([sys.executable, "-c", _DECODE_PASS, str(rec), "json"], repeat)
    orjson = cpu_of([sys.executable, "-c", _DECODE_PASS, str(rec), "orjson"], repeat)
    label = f"{racks} rack{'s' if racks > 1 else ''} x {duration} ({len(data) / 1e6:.0f} MB)"
    runs = [("trailer", rec, REPO), ("full pass", bare, REPO)]
    if before is not None:
        runs.append(("code before", bare, before))
    lines = []
    for what, path, code in runs:
        cpu = cpu_of(tokenwatch("summarize", str(path)), repeat, code)
        lines.append(verdict_line(f"summarize ({what}), {label}, vs json.loads", cpu, json, 1.0))
        if racks >= 64:
            lines.append(verdict_line(f"summarize ({what}), {label}, vs orjson", cpu, orjson, 0.7))
    rec.unlink()
    bare.unlink()
    return lines


def verdict_tick_figures(scenario: Scenario, run_s: float, ticks: int) -> list[str]:
    """One verdict tick of a 64-rack core (rack-wide + every rack's forecast), CPU ms."""
    from bench_common import sixty_four_rack_profile

    from tokenwatch.core import CoreConfig, RackCore
    from tokenwatch.core.fleet import fleet_tick
    from tokenwatch.core.verdict import verdict_tick
    from tokenwatch.inputs.sim.rack_sim import RackSimulation, SimSettings

    # The run goes on between the ticks, a second of its events each, as a live run's does: every node's
    # planned totals and counts move, so nothing a tick found is reused unless it still holds.
    core = RackCore(CoreConfig(rack_forecasts=False))  # built without the ticks measured below
    events = RackSimulation(SimSettings(sixty_four_rack_profile(), scenario=scenario, seed=1)).events()
    times = []
    due = run_s
    for event in events:
        core.ingest(event)
        if event.t < due:
            continue
        state = core.state
        assert state.fleet is not None
        state.config = dataclasses.replace(state.config, rack_forecasts=True)
        state.version += 1  # a new state: nothing memoised from the tick before
        state.verdict.next_due_s = state.fleet.next_due_s = 0.0
        began = time.process_time()
        verdict_tick(state, state.now)
        fleet_tick(state, state.now)
        times.append(time.process_time() - began)
        state.config = dataclasses.replace(state.config, rack_forecasts=False)  # ingest: not timed
        due += 1.0
        if len(times) > ticks:
            break
    times = sorted(times[1:])  # the first finds every node's early-stopping budget, as a run's first tick
    median, p95 = statistics.median(times), times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]
    what = f"verdict tick, 64 racks, {scenario} at {run_s:.0f} s"
    figure = f"median {median * 1e3:.1f} ms, p95 {p95 * 1e3:.1f} ms (CPU)"
    return [
        verdict_text(
            f"{what}, within the dashboard's frame", figure, f"<= {FRAME_S * 1e3:.0f} ms", p95 <= FRAME_S
        ),
        verdict_text(f"{what}, a few ms", figure, f"<= {FEW_MS * 1e3:.0f} ms", p95 <= FEW_MS),
    ]


def failing_server_figures(duration: str, repeat: int, tmp: Path) -> list[str]:
    """summarize of a failing Server recording against a passing one of the same length."""
    cpu = {}
    for benchmark in ("llama2-70b", "llama2-70b-interactive"):
        rec = tmp / f"{benchmark}.jsonl.zst"
        sim = [
            "sim",
            "--scenario",
            "Server",
            "--benchmark",
            benchmark,
            "--duration",
            duration,
            "--speed",
            "0",
        ]
        subprocess.run(
            tokenwatch(*sim, "--headless", "--interval", duration, "--record", str(rec)),
            check=True,
            stdout=subprocess.DEVNULL,
            cwd=REPO,
            env=dict(os.environ, PYTHONPATH=str(REPO)),
        )
        cpu[benchmark] = cpu_of(tokenwatch("summarize", str(rec)), repeat)
    return [
        verdict_line(
            f"summarize, Server {duration}: failing vs passing run",
            cpu["llama2-70b-interactive"],
            cpu["llama2-70b"],
            1.1,
        )
    ]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--short", action="store_true", help="2-minute runs (1 at 64 racks), one repeat")
    parser.add_argument("--racks", default="1,16,64")
    parser.add_argument("--duration", default="80m")
    parser.add_argument("--repeat", type=int, default=None)
    parser.add_argument("--ticks", type=int, default=None)
    parser.add_argument(
        "--parts",
        default="ingest,tick,server",
        help="which figures: ingest, tick, server, summarize (with and without the summary trailer), record",
    )
    parser.add_argument("--before", type=Path, help="summarize: also this checkout's code (the full pass)")
    parser.add_argument(
        "--code",
        type=Path,
        help="the in-process parts (tick, record) import tokenwatch from this checkout (`git worktree add "
        "DIR main`: the code before and after measured by one script)",
    )
    args = parser.parse_args()
    if args.code is not None:
        sys.path.insert(0, str(args.code.resolve()))
    for checkout in {REPO, *(c.resolve() for c in (args.code, args.before) if c is not None)}:
        bytecode_compiled(checkout)
    repeat = args.repeat or (1 if args.short else 3)
    ticks = args.ticks or (10 if args.short else 40)
    parts = set(args.parts.split(","))
    print(
        f"tokenwatch speed against floors: CPU time, best of {repeat}, pinned to one core, Python "
        f"{sys.version.split()[0]}, load {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    with tempfile.TemporaryDirectory() as tmp:
        if "ingest" in parts:
            for racks in (int(r) for r in args.racks.split(",")):
                duration = ("1m" if racks >= 64 else "2m") if args.short else args.duration
                for line in ingest_figures(racks, duration, repeat, Path(tmp)):
                    print(line, flush=True)
        if "summarize" in parts:
            for racks in (int(r) for r in args.racks.split(",")):
                duration = ("1m" if racks >= 64 else "2m") if args.short else args.duration
                for line in summarize_figures(racks, duration, repeat, Path(tmp), args.before):
                    print(line, flush=True)
        if "tick" in parts:
            scenarios: tuple[Scenario, ...] = ("Offline", "Server")
            for scenario in scenarios:
                for line in verdict_tick_figures(scenario, 120.0 if args.short else 600.0, ticks):
                    print(line, flush=True)
        if "record" in parts:  # the recorder alone, in process (benchmarks/bench_record.py)
            from bench_record import record_figures

            for line in record_figures(120.0 if args.short else 600.0, repeat):
                print(line, flush=True)
        if "server" in parts:
            for line in failing_server_figures("10m" if args.short else "80m", repeat, Path(tmp)):
                print(line, flush=True)


if __name__ == "__main__":
    main()
