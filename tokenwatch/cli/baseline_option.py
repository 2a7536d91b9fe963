"""``--baseline RUN`` for sim, replay, watch, summarize and report: every check in one function.

Loaded before the run starts, so a bad baseline is one line and exit status 2 before anything is recorded
or connected: a path that is neither a recording nor a folder of results, an unknown ``sim:`` profile, a
baseline that is one of the command's output files (it would be written over while it is read), a
baseline of another scenario or benchmark (refused: see :mod:`tokenwatch.core.baseline.reference`).
Another node count, GPU count or other node names are a warning on stderr, and the run goes on.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Sequence

from tokenwatch.base.events import RunStarted
from tokenwatch.cli.options import RunOptions
from tokenwatch.cli.output_paths import same_file
from tokenwatch.cli.usage import UsageError, print_warnings, stderr_line
from tokenwatch.core.baseline import Baseline, RunIdentity, judge_fit
from tokenwatch.core.summary import RunSummary

SIM_PREFIX = "sim:"


def load_checked_baseline(
    args: argparse.Namespace, run: RunIdentity, outputs: Sequence[tuple[str, str | None]] = ()
) -> Baseline | None:
    """The ``--baseline`` of ``args`` for a run like ``run`` (None when none was given). ``outputs``: the
    command's output files as (flag, path); the baseline may be none of them."""
    spec: str | None = getattr(args, "baseline", None)
    if spec is None:
        return None
    if not spec.startswith(SIM_PREFIX):
        for flag, path in outputs:
            if path and path != "-" and same_file(spec, path):
                raise UsageError(f"--baseline {spec}: is the output of {flag}; refusing to read and write it")
    from tokenwatch.cli.loading_note import LoadingNote
    from tokenwatch.runs.baseline import load_baseline
    from tokenwatch.runs.errors import RunLoadError

    # Read before the dashboard opens: a rack's recording takes seconds, which the terminal says.
    loading = LoadingNote(f"loading baseline {spec}")
    try:
        baseline, warnings = load_baseline(spec, run, loading)
    except RunLoadError as exc:
        loading.stop()
        message = str(exc)
        raise UsageError(
            f"--baseline {message if message.startswith(spec) else f'{spec}: {message}'}"
        ) from None
    loading.done()
    print_warnings([f"--baseline {spec}: {warning}" for warning in warnings])
    fit = judge_fit(baseline, run)
    if fit.refusal is not None:
        raise UsageError(f"--baseline: {fit.refusal}")
    for note in fit.notes:
        stderr_line(f"warning: --baseline: {note}")
    return baseline


def start_identity(start: RunStarted, benchmark: str | None) -> RunIdentity:
    """A run as its ``RunStarted`` says (``benchmark``: --benchmark, else the run's own)."""
    named = benchmark or start.meta.get("benchmark")
    return RunIdentity(
        scenario=start.scenario,
        benchmark=str(named) if named else None,
        nodes=start.nodes,
        gpus_per_node=start.gpus_per_node,
        duration_s=start.nominal_duration_s,
    )


def recording_identity(path: str, benchmark: str | None) -> RunIdentity:
    """The run a recording holds, from its run start (read only when a baseline is to be judged)."""
    from tokenwatch.recording import RecordingReader

    for event in RecordingReader(path).events():
        if isinstance(event, RunStarted):
            return start_identity(event, benchmark)
        break
    return RunIdentity(scenario=None, benchmark=benchmark)


def run_identity_of(summary: RunSummary, recording: str | None) -> RunIdentity:
    """A finished run (summarize, report) as a baseline is judged against; a recording's nominal duration
    (a ``sim:`` baseline is simulated at it) rather than the time its last node took."""
    from tokenwatch.core.baseline.compare import summary_identity

    identity = summary_identity(summary)
    if recording is None:
        return identity
    nominal = recording_identity(recording, None).duration_s
    return dataclasses.replace(identity, duration_s=nominal) if nominal else identity


def with_baseline(
    options: RunOptions, args: argparse.Namespace, run: RunIdentity | Callable[[], RunIdentity]
) -> RunOptions:
    """``options`` with the checked ``--baseline`` (``run``: the run's identity, or how to read it: only
    read when a baseline was given). Its outputs are --record and --jsonl."""
    if getattr(args, "baseline", None) is None:
        return options
    identity = run() if callable(run) else run
    outputs = (("--record", options.record), ("--jsonl", options.jsonl))
    return dataclasses.replace(options, baseline=load_checked_baseline(args, identity, outputs))
