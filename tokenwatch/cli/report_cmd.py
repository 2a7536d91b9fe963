"""``tokenwatch report`` (one run, or two side by side) and ``tokenwatch export`` (CSV / Parquet)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from tokenwatch.cli.output_paths import Output, check_outputs
from tokenwatch.cli.usage import UsageError, print_warnings
from tokenwatch.runs.loading import load_run
from tokenwatch.runs.run_data import RunData

if TYPE_CHECKING:
    from tokenwatch.core.baseline import Baseline
    from tokenwatch.core.baseline.compare import BaselineComparison


def _load(path: str, args: argparse.Namespace) -> RunData:
    return load_run(path, tdp_w=args.tdp_w, gpus_per_node=args.gpus_per_node)


def _write_atomically(path: Path, text: str) -> None:
    """Write beside the target and rename, so a reader never sees half a report."""
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise UsageError(f"-o {path}: cannot write: {exc.strerror}") from None


def cmd_report(args: argparse.Namespace) -> int:
    from tokenwatch.core.capacity import DEFAULT_WORKLOADS, WorkloadError, parse_workload

    if len(args.runs) > 2:
        raise UsageError("tokenwatch report: give one RUN, or two to compare (A B)")
    try:
        workloads = tuple(parse_workload(w) for w in args.workload) if args.workload else DEFAULT_WORKLOADS
    except WorkloadError as exc:
        raise UsageError(f"--workload: {exc}") from None
    if args.baseline is not None and len(args.runs) != 1:
        raise UsageError("tokenwatch report: --baseline goes with one RUN (two RUNs are compared B / A)")
    out = Path(args.output)
    # An input (a run, or the baseline) as the output: refused before loading anything.
    baseline_file = [args.baseline] if args.baseline and not args.baseline.startswith("sim:") else []
    check_outputs([*args.runs, *baseline_file], [Output("-o", args.output)], force=True)
    runs = [_load(p, args) for p in args.runs]
    check_outputs([*args.runs, *baseline_file], [Output("-o", args.output)], force=args.force)
    for run in runs:
        print_warnings(list(run.warnings))
    if len(runs) == 1:
        from tokenwatch.frontends.report.run_report import render_run_report

        html = render_run_report(runs[0], workloads, _baseline(args, runs[0]))
    else:
        from tokenwatch.frontends.report.compare_report import comparability_warnings, render_comparison

        print_warnings(comparability_warnings(runs[0], runs[1]))
        html = render_comparison(runs[0], runs[1])
    _write_atomically(out, html)
    sys.stdout.write(f"wrote {out} ({len(html.encode()):,} bytes)\n")
    return 0


def _baseline(args: argparse.Namespace, run: RunData) -> tuple[Baseline, BaselineComparison] | None:
    """``--baseline``: loaded and checked as for a run (it may not be the -o file), and the comparison."""
    if args.baseline is None:
        return None
    from tokenwatch.cli.baseline_option import load_checked_baseline, run_identity_of
    from tokenwatch.core.baseline.compare import compare_summary

    recording = run.provenance.path if run.provenance.kind == "recording" else None
    baseline = load_checked_baseline(args, run_identity_of(run.summary, recording), [("-o", args.output)])
    assert baseline is not None
    return baseline, compare_summary(run.summary, baseline)


def cmd_export(args: argparse.Namespace) -> int:
    if not args.csv and not args.parquet:
        raise UsageError("tokenwatch export: say where: --csv DIR and/or --parquet DIR")
    from tokenwatch.frontends.tables import TABLE_NAMES, ExportError, write_csv, write_parquet

    tables = [Output("--csv", str(Path(args.csv) / f"{n}.csv")) for n in TABLE_NAMES if args.csv]
    tables += [
        Output("--parquet", str(Path(args.parquet) / f"{n}.parquet")) for n in TABLE_NAMES if args.parquet
    ]
    check_outputs([args.run], tables, force=True)  # exports replace their own tables, never the input
    run = _load(args.run, args)
    print_warnings(list(run.warnings))

    try:
        written = []
        if args.csv:
            written += write_csv(run, Path(args.csv), args.every)
        if args.parquet:
            written += write_parquet(run, Path(args.parquet), args.every)
    except ExportError as exc:
        raise UsageError(str(exc)) from None
    for path in written:
        sys.stdout.write(f"wrote {path}\n")
    return 0
