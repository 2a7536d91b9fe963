"""The sub-commands: sim, replay, summarize, profiles (and the small doors to report, watch, serve)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import orjson

from tokenwatch.cli.usage import UsageError, print_warnings

if TYPE_CHECKING:
    from tokenwatch.core.baseline.compare import BaselineComparison
    from tokenwatch.core.summary import RunSummary

# Commands import what only they need: `summarize` must not pay for asyncio, YAML or the simulator.


def cmd_sim(args: argparse.Namespace) -> int:
    from tokenwatch.cli.baseline_option import start_identity, with_baseline
    from tokenwatch.cli.options import RunOptions
    from tokenwatch.cli.running import run_session
    from tokenwatch.cli.sim_settings import sim_settings
    from tokenwatch.inputs.sim.collector import SIM_EPOCH, SimulatorCollector
    from tokenwatch.inputs.sim.rack_sim import RackSimulation

    settings = sim_settings(args)
    collector = SimulatorCollector(settings, speed=args.speed)
    options = with_baseline(
        RunOptions.from_args(args, "sim", inputs=(args.profile,) if Path(args.profile).is_file() else ()),
        args,
        lambda: start_identity(RackSimulation(settings).run_started(), args.benchmark),
    )
    # The demo (`tokenwatch` alone) is a run nobody asked to finish: quitting it is not an interruption.
    quit_stops = "demo" if getattr(args, "demo", False) else None
    return run_session(options, [collector], created_epoch=SIM_EPOCH, quit_stops=quit_stops)


def cmd_replay(args: argparse.Namespace) -> int:
    from tokenwatch.cli.baseline_option import recording_identity, with_baseline
    from tokenwatch.cli.options import RunOptions
    from tokenwatch.cli.running import run_session
    from tokenwatch.inputs.replay.index import wants_index
    from tokenwatch.inputs.replay.player import ReplayPlayer

    _refuse_a_recording_without_a_run(args.file)
    # One player: the dashboard binds it to its session (pause, speed, seek; a large recording's keyframes
    # in an index of this user's); headless just plays.
    source = ReplayPlayer(args.file, speed=args.speed, start_s=args.start, index=wants_index(args.file))
    options = with_baseline(
        RunOptions.from_args(args, "replay", inputs=(args.file,)),
        args,
        lambda: recording_identity(args.file, args.benchmark),
    )
    return run_session(
        options,
        [source],
        after=lambda _: print_warnings(source.warnings),
        player=source,
        quit_stops="replay",
    )


def _refuse_a_recording_without_a_run(path: str) -> None:
    """As summarize, report and export refuse it: a recording with no run start (a header only) is one
    line and exit 2, not an empty replay that exits 0. Reads only up to the run start (its second line)."""
    from tokenwatch.base.events import RunStarted
    from tokenwatch.recording import RecordingReader
    from tokenwatch.runs.errors import RunLoadError

    reader = RecordingReader(path)
    try:
        if any(isinstance(event, RunStarted) for event in reader.events()):
            return
    finally:
        reader.close()
    # The run start may have been there but refused: then its warning says why.
    why = next((w for w in reader.warnings if "run_started" in w), None)
    raise RunLoadError(why or f"{path}: the recording holds no run start")


def cmd_summarize(args: argparse.Namespace) -> int:
    if _printed_from_trailer(args):
        return 0
    from tokenwatch.runs.client_side import read_clients, side_by_side
    from tokenwatch.runs.result_folders import find_summary_folders
    from tokenwatch.sources.client_results import exports_in, looks_like_client_result

    clients = [p for p in args.paths if Path(p).is_file() and looks_like_client_result(Path(p))]
    # A client benchmark's artifact folder (no LoadGen summary in it) stands for the exports it holds.
    artifact_dirs = {
        p: found
        for p in args.paths
        if Path(p).is_dir() and not find_summary_folders(Path(p)) and (found := exports_in(Path(p)))
    }
    runs = [p for p in args.paths if p not in clients and p not in artifact_dirs]
    exports = [Path(p) for p in clients] + [f for found in artifact_dirs.values() for f in found]
    results, client_warnings = read_clients(exports)
    summary = _server_summary(args, runs) if runs else None
    if summary is None and args.baseline is not None:
        raise UsageError(
            "tokenwatch summarize: --baseline compares a recording or result folders, not client results"
        )
    print_warnings(client_warnings)
    table = side_by_side(summary, results) if results else None
    if summary is None:
        assert table is not None
        if args.json:
            sys.stdout.buffer.write(orjson.dumps(table.to_json(), option=orjson.OPT_INDENT_2) + b"\n")
        else:
            from tokenwatch.frontends.headless.client_table import render_side_by_side

            sys.stdout.write(render_side_by_side(table) + "\n")
        return 0
    comparison = _baseline_comparison(args, summary, None if Path(runs[0]).is_dir() else runs[0])
    if args.json:
        out = summary.to_json()
        if comparison is not None:
            out["baseline"] = comparison.to_json()
        if table is not None:
            out["client_side"] = table.to_json()
        sys.stdout.buffer.write(orjson.dumps(out, option=orjson.OPT_INDENT_2) + b"\n")
    else:
        from tokenwatch.frontends.headless.summary_table import render_summary

        sys.stdout.write(render_summary(summary) + "\n")
        if comparison is not None:
            from tokenwatch.frontends.headless.baseline_table import render_baseline

            sys.stdout.write("\n" + render_baseline(comparison) + "\n")
        if table is not None:
            from tokenwatch.frontends.headless.client_table import render_side_by_side

            sys.stdout.write("\n" + render_side_by_side(table) + "\n")
    return 0


def _printed_from_trailer(args: argparse.Namespace) -> bool:
    """One recording, no --baseline: its summary trailer, where it has a usable one, is what the full
    pass would print (cli/summary_trailer.py); otherwise the full pass, after one line saying why."""
    from tokenwatch.cli.summary_trailer import summary_from_trailer

    if len(args.paths) != 1 or args.baseline is not None or not Path(args.paths[0]).is_file():
        return False
    found, why = summary_from_trailer(args.paths[0])
    if why is not None:
        print_warnings([why])
    if found is None:
        return False
    if args.json:
        sys.stdout.buffer.write(orjson.dumps(found.json, option=orjson.OPT_INDENT_2) + b"\n")
    else:
        sys.stdout.write(found.text + "\n")
    return True


def _server_summary(args: argparse.Namespace, paths: list[str]) -> RunSummary:
    """The run's own summary: of result folders, or of one recording (its warnings printed first)."""
    from tokenwatch.runs.from_core import summarize_recording
    from tokenwatch.runs.result_folders import summarize_result_dirs

    dirs = [p for p in paths if Path(p).is_dir()]
    if dirs:
        if len(dirs) != len(paths):
            raise UsageError("tokenwatch summarize: give either one recording or result folders, not both")
        summary, warnings = summarize_result_dirs([Path(p) for p in dirs], gpus_per_node=args.gpus_per_node)
    else:
        if len(paths) != 1:
            raise UsageError("tokenwatch summarize: give one recording at a time")
        summary, warnings = summarize_recording(paths[0])
    print_warnings(warnings)
    return summary


def _baseline_comparison(
    args: argparse.Namespace, summary: RunSummary, recording: str | None
) -> BaselineComparison | None:
    """``--baseline``: the summary against the baseline's final figures (checked as a run's would be)."""
    if args.baseline is None:
        return None
    from tokenwatch.cli.baseline_option import load_checked_baseline, run_identity_of

    baseline = load_checked_baseline(args, run_identity_of(summary, recording))
    assert baseline is not None
    from tokenwatch.core.baseline.compare import compare_summary

    return compare_summary(summary, baseline)


def cmd_profiles(_args: argparse.Namespace) -> int:
    from tokenwatch.inputs.sim.profile import builtin_profiles, load_profile

    rows = []
    for name in sorted(builtin_profiles()):
        p = load_profile(name)
        rows.append(
            (
                name,
                f"{p.nodes} x {p.gpus_per_node} GPUs",
                f"{p.duration_s / 60:g} min",
                f"{p.node_tokens_per_s.mean * p.nodes:,.0f} tok/s",
                f"{p.gpu.power_limit_w:g} W",
                p.description,
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    for row in rows:
        sys.stdout.write(
            "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=False)) + "  " + row[5] + "\n"
        )
    sys.stdout.write(
        "\nA profile file of your own: tokenwatch sim --profile my-rack.yaml (same keys as the built-ins).\n"
    )
    return 0


COMMANDS = {"sim": cmd_sim, "replay": cmd_replay, "summarize": cmd_summarize, "profiles": cmd_profiles}


def cmd_report(args: argparse.Namespace) -> int:
    from tokenwatch.cli.report_cmd import cmd_report as report

    return report(args)


def cmd_export(args: argparse.Namespace) -> int:
    from tokenwatch.cli.report_cmd import cmd_export as export

    return export(args)


COMMANDS.update({"report": cmd_report, "export": cmd_export})


def cmd_watch(args: argparse.Namespace) -> int:
    from tokenwatch.cli.watch_cmd import cmd_watch as watch

    return watch(args)


def cmd_check(args: argparse.Namespace) -> int:
    from tokenwatch.cli.watch_cmd import cmd_check as check

    return check(args)


COMMANDS.update({"watch": cmd_watch, "check": cmd_check})


def cmd_serve(args: argparse.Namespace) -> int:
    from tokenwatch.cli.serve_cmd import cmd_serve as serve

    return serve(args)


COMMANDS["serve"] = cmd_serve


def cmd_rules(args: argparse.Namespace) -> int:
    from tokenwatch.cli.rules_cmd import cmd_rules as rules

    return rules(args)


COMMANDS["rules"] = cmd_rules
