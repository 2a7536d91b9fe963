"""``--baseline RUN``: a reference run loaded the one way runs are loaded, then frozen for the core.

RUN is a recording (through the core, as ``summarize`` reads it), a folder of MLPerf results (final figures
only), or ``sim:PROFILE``: the simulator's expected run of a profile's published figures, so a first run on
new hardware has something to be held against. The simulated reference is deterministic (seed 0, no
faults) and every node runs at the profile's published mean per node (no drawn spread: the rack figure is
the published aggregate), at the run's duration and scenario. Every simulated node is the profile's expected
node, so the profile's own rack is simulated once and its nodes are laid over the run's in order (node i of
the run against simulated node i modulo the profile's count, the reference rack as many such nodes as the
run has): a 1,152-node run, or a watch whose nodes are not known yet, gets its reference as fast as an
18-node one. GPU telemetry is not compared and not kept, and Server latencies travel once a minute
rather than every 5 s: the same histograms, built several times faster.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from tokenwatch.base.events import GpuBatch, GpuSample
from tokenwatch.core import RackCore
from tokenwatch.core.baseline import Baseline, RunIdentity
from tokenwatch.core.baseline.freeze import freeze_summary
from tokenwatch.runs.errors import RunLoadError
from tokenwatch.runs.from_core import ingest_recording
from tokenwatch.runs.result_folders import read_result_dirs

SIM_PREFIX = "sim:"
_SIM_SCENARIOS = ("Offline", "Server")
_SIM_LATENCY_INTERVAL_S = 60.0


def load_baseline(
    spec: str, run: RunIdentity, progress: Callable[[float], None] | None = None
) -> tuple[Baseline, list[str]]:
    """The baseline ``spec`` names and the warnings of reading it (damaged lines skipped). A path that
    is neither a recording nor a folder of results, or an unknown profile, is a :class:`RunLoadError`
    (one line). ``progress`` hears the share done as a recording is read or a profile simulated."""
    if spec.startswith(SIM_PREFIX):
        return simulated_baseline(spec[len(SIM_PREFIX) :], run, progress), []
    path = Path(spec)
    if path.is_dir():
        summary = read_result_dirs([path], None).summary
        return freeze_summary(summary, path.resolve().name or spec, "result folders"), list(summary.warnings)
    if not path.exists():
        raise RunLoadError(f"{spec}: no such recording or result folder")
    if not path.is_file():
        raise RunLoadError(f"{spec}: not a recording file nor a folder of results")
    core, reader = ingest_recording(path, power_only=True, progress=progress)
    return core.as_baseline(path.name, "recording"), list(reader.warnings)


def simulated_baseline(
    profile_name: str, run: RunIdentity, progress: Callable[[float], None] | None = None
) -> Baseline:
    """The simulator's expected run of ``profile_name`` in the run's shape (see the module docstring)."""
    from tokenwatch.base.yaml_schema import SchemaError
    from tokenwatch.inputs.sim.profile import load_profile
    from tokenwatch.inputs.sim.rack_sim import RackSimulation, SimSettings

    if not profile_name:
        raise RunLoadError("sim: names no profile (e.g. sim:gb300-nvl72; see `tokenwatch profiles`)")
    try:
        profile = load_profile(profile_name)
    except SchemaError as exc:
        raise RunLoadError(f"{SIM_PREFIX}{profile_name}: {exc}") from None
    scenario = run.scenario or "Offline"
    if scenario not in _SIM_SCENARIOS:
        raise RunLoadError(
            f"{SIM_PREFIX}{profile_name}: the simulator runs Offline and Server, not {scenario}"
        )
    spec = profile.node_tokens_per_s
    profile = dataclasses.replace(
        profile, node_tokens_per_s=dataclasses.replace(spec, min=spec.mean, max=spec.mean, spread_pct=None)
    )
    settings = SimSettings(
        profile,
        scenario="Server" if scenario == "Server" else "Offline",
        seed=0,
        duration_s=run.duration_s,
        latency_interval_s=_SIM_LATENCY_INTERVAL_S,
    )
    core = RackCore()
    length = settings.run_duration_s
    for count, event in enumerate(RackSimulation(settings).events()):
        if not isinstance(event, GpuBatch | GpuSample):  # telemetry is not compared
            core.ingest(event)
        if progress is not None and count % 1024 == 0:
            progress(event.t / length if length else 0.0)
    # Every simulated node is the profile's expected node: the run's nodes are each held against one.
    return dataclasses.replace(core.as_baseline(f"{SIM_PREFIX}{profile_name}", "simulator"), uniform=True)
