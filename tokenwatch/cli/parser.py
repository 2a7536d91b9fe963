"""The argument parser: one-line errors (exit 2), durations parsed at the edge."""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

from tokenwatch import __version__
from tokenwatch.base.durations import DurationError, parse_duration

STOP_NOTE = (
    "Ctrl-C, SIGTERM or SIGHUP (or quitting the dashboard) before the run has ended ends it as interrupted: "
    "the recording says so, the partial summary is printed marked INTERRUPTED, exit status 130."
)
REPLAY_QUIT_NOTE = (
    "Quitting the dashboard (q, or Ctrl-C in it) stops the replay, not the run: the summary up to there "
    "is printed marked REPLAY STOPPED, exit status 0; Ctrl-C, SIGTERM or SIGHUP headless, or a signal to "
    "the dashboard, end it as interrupted: the partial summary is printed marked INTERRUPTED, exit 130."
)


class UsageError(Exception):
    """A user error: printed as one line, exit status 2."""


class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message} (see {self.prog} --help)")


def duration_arg(text: str) -> float:
    try:
        return parse_duration(text)
    except DurationError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def positive_duration_arg(text: str) -> float:
    value = duration_arg(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be longer than zero")
    return value


def speed_arg(text: str) -> float:
    try:
        value = float(text.lower().removeprefix("x").removesuffix("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad speed {text!r}: use a number such as 1, 60 or 0") from None
    if not 0 <= value <= 1e6:
        raise argparse.ArgumentTypeError(
            f"bad speed {text!r}: must be between 0 (as fast as possible) and 1e6"
        )
    return value


def port_arg(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad port {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"bad port {text!r}: must be 0..65535")
    return value


def viewers_arg(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad number of viewers {text!r}") from None
    if not 1 <= value <= 10_000:
        raise argparse.ArgumentTypeError(f"bad number of viewers {text!r}: must be 1..10000")
    return value


def tdp_arg(text: str) -> float:
    try:
        value = float(text.lower().removesuffix("w"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad TDP {text!r}: watts per GPU, e.g. 1400") from None
    if not 1 <= value <= 100_000:
        raise argparse.ArgumentTypeError(f"bad TDP {text!r}: must be between 1 and 100000 W")
    return value


def benchmark_arg(text: str) -> str:
    """An MLPerf benchmark name (``llama2-70b``, ``llama3.1-405b``, ``llama2-70b-interactive``...)."""
    from tokenwatch.mlperf.rules import BENCHMARKS, normalize_benchmark

    if normalize_benchmark(text) is None:
        known = ", ".join([*BENCHMARKS, "llama2-70b", "<name>-interactive"])
        raise argparse.ArgumentTypeError(f"unknown MLPerf benchmark {text!r} (known: {known})")
    return text


def add_baseline_option(p: argparse.ArgumentParser) -> None:
    """``--baseline RUN`` (loaded and checked by cli/baseline_option.py)."""
    p.add_argument(
        "--baseline",
        metavar="RUN",
        help="a reference run to compare with: a recording, a folder of MLPerf results, or sim:PROFILE "
        "(the simulator's expected run of a profile's published figures, e.g. sim:gb300-nvl72); another "
        "scenario or benchmark is refused, another node count, GPU count or node names a warning; nodes "
        "are matched by name, or by rank when the runs share no names (the dashboard and summary say which); "
        "a node down or stale in either run is marked with what it did (down from 30:00, 35 %% of its "
        "samples) and the aggregate says what it covers",
    )


def add_output_options(p: argparse.ArgumentParser) -> None:
    """What every run command (sim, replay, watch) shares: where the snapshots go."""
    p.add_argument("--headless", action="store_true", help="no dashboard: one line per --interval on stdout")
    p.add_argument(
        "--interval",
        type=positive_duration_arg,
        default=10.0,
        metavar="DURATION",
        help="headless: run time between lines and JSONL snapshots (default 10s)",
    )
    p.add_argument(
        "--jsonl",
        metavar="PATH",
        help="headless: write one JSON snapshot per interval ('-' = stdout; an existing file needs --force)",
    )
    p.add_argument(
        "--record",
        metavar="FILE",
        help="record every event to FILE (.jsonl, or .jsonl.zst compressed; never overwrites a file)",
    )
    p.add_argument(
        "--force", action="store_true", help="let --jsonl overwrite an existing file (never an input)"
    )
    p.add_argument("--theme", metavar="NAME", help="dashboard theme (see themes/; `t` cycles them)")
    p.add_argument(
        "--rack",
        metavar="NAME",
        help="headless, a run of several racks (a fleet watch, sim --racks, their replays): the lines and "
        "JSONL of rack NAME alone, what Enter on its row of the fleet board shows, whose figures are "
        "the board's row (a name the run does not have: one line, exit 2); the summary stays the run's",
    )
    p.add_argument(
        "--ttft-sla",
        type=positive_duration_arg,
        metavar="DURATION",
        help=(
            "time-to-first-token SLA for alerts and the latency panel (default: the verdict's limit where "
            "it knows one, LoadGen's detail log or --benchmark, else 2s, MLPerf Llama-2-70B); a value "
            "given here is alerted on and shown, while the verdict still judges by LoadGen's"
        ),
    )
    p.add_argument(
        "--tpot-sla",
        type=positive_duration_arg,
        metavar="DURATION",
        help="time-per-output-token SLA (default: the verdict's limit where known, else 200ms; as above)",
    )
    p.add_argument(
        "--prometheus-port",
        type=port_arg,
        metavar="N",
        help="serve /metrics on port N of 127.0.0.1, or of --prometheus-host (0: a free port); the "
        "address is printed on stderr. A scrape serves the last snapshot taken (after the scrape "
        "before it), never waiting on the run",
    )
    p.add_argument(
        "--prometheus-host",
        metavar="H",
        help="with --prometheus-port: the address /metrics listens on (default 127.0.0.1, this machine "
        "only; 0.0.0.0 or another address lets anyone who can reach it read the run's figures, node "
        "names and rack: there is no authentication)",
    )
    p.add_argument(
        "--benchmark",
        type=benchmark_arg,
        metavar="NAME",
        help="MLPerf benchmark whose rules the verdict applies, e.g. llama2-70b, llama3.1-405b, "
        "llama2-70b-interactive (default: the run's own: a sim profile's, a watch config's run.benchmark)",
    )
    p.add_argument(
        "--notify",
        action="append",
        metavar="[KIND=]URL|FILE.yaml",
        help="push alerts as they happen (repeatable): KIND alertmanager (its API v2), webhook (JSON per "
        'message; the default), slack ({"text": ...}) or command (a program that gets the JSON on stdin, '
        "no shell), e.g. alertmanager=http://127.0.0.1:9093; or a YAML file with a notify: section (kinds, "
        "min_severity, hold, headers: see docs/notify.md). Write secrets as '${VAR}' (single-quoted): they "
        "are read from the environment and never printed",
    )
    add_baseline_option(p)


def build_parser() -> OneLineParser:
    from tokenwatch.inputs.sim import DEFAULT_PROFILE

    parser = OneLineParser(
        prog="tokenwatch",
        description="Watch rack-scale LLM inference benchmarks live, replay them, log them headless. "
        "With no command: the dashboard on the gb300-nvl72 simulator at x10 (the demo: quitting it "
        "stops the demo, exit status 0, where quitting `tokenwatch sim` interrupts the run).",
    )
    parser.add_argument("--version", action="version", version=f"tokenwatch {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineParser)

    sim = sub.add_parser(
        "sim",
        help="simulate a rack run (the dashboard, or --headless)",
        description="Simulate a rack run, deterministically from --seed. " + STOP_NOTE,
    )
    sim.add_argument(
        "--profile",
        default=DEFAULT_PROFILE,
        help=f"built-in profile name or a YAML file (default {DEFAULT_PROFILE}; see `tokenwatch profiles`)",
    )
    sim.add_argument("--scenario", choices=("Offline", "Server"), default="Offline", type=str.title)
    sim.add_argument("--seed", type=int, default=0, help="random seed (same seed, same run)")
    sim.add_argument(
        "--duration",
        type=positive_duration_arg,
        metavar="DURATION",
        help="nominal run length (default: the profile's, e.g. 80m)",
    )
    sim.add_argument(
        "--faults",
        default="",
        metavar="SPEC",
        help="NODE[/gpuN]:KIND[=VALUE]@START[-END], comma-separated; kinds: down, stale, slow (the node), "
        "throttle, hot, powercap=W (all its GPUs, or GPU N), e.g. "
        '"node07:down@30m,node03:throttle@10m-20m,node11:slow@5m-15m,node05:powercap=1200@20m-30m,'
        'node12/gpu2:hot@40m"',
    )
    sim.add_argument(
        "--speed",
        type=speed_arg,
        default=1.0,
        help="run seconds per wall second: 1 real time, 60 accelerated, 0 as fast as possible (a speed this "
        "machine cannot keep is dropped to the one it can, and the dashboard's badge says so: "
        "SIM x60 · behind, x20)",
    )
    sim.add_argument("--racks", type=int, default=1, metavar="N", help="simulate N racks of the profile")
    sim.add_argument(
        "--sites",
        type=int,
        default=0,
        metavar="S",
        help="with --racks: deal the racks out to S sites (site01 ..., consecutive racks); the fleet board "
        "shows a row per site (enter goes down to its rows, then its racks) and --prometheus-port labels "
        "the racks' series site=...",
    )
    sim.add_argument(
        "--rows",
        type=int,
        default=0,
        metavar="K",
        help="with --racks: K rows (row01 ...) in each site, or in the fleet without --sites; the series "
        "carry row=...",
    )
    add_output_options(sim)

    replay = sub.add_parser(
        "replay",
        help="replay a recording through the same core",
        description="Replay a recording (.jsonl or .jsonl.zst). The dashboard's first pass over a large one "
        "(32 MiB or more) writes an index of keyframes, so later seeks are quick: yours alone, in your cache "
        "folder (~/.cache/tokenwatch/replay-index), never beside the recording. " + REPLAY_QUIT_NOTE,
    )
    replay.add_argument("file", metavar="FILE")
    replay.add_argument(
        "--speed", type=speed_arg, default=1.0, help="1 real time, 30 = x30, 0 as fast as possible"
    )
    replay.add_argument(
        "--start", type=duration_arg, default=0.0, metavar="DURATION", help="start at this run time, e.g. 30m"
    )
    add_output_options(replay)

    summarize = sub.add_parser(
        "summarize",
        help="the rack summary table of a recording or MLPerf result folders, and client benchmark results",
        description="Summarise a recording, or MLPerf LoadGen result folders (each result named by its "
        "path relative to the folder the DIRs have in common; a result that states samples/s and no tokens "
        "is summarised in samples/s). Client-side benchmark results given among the paths (AIPerf's "
        "profile_export_aiperf.json or its per-interval _timeslices.json, GenAI-Perf's "
        "profile_export_genai_perf.json, vllm bench serve's result JSON, SGLang bench_serving's JSONL; "
        "recognised by their content; a folder with no LoadGen summary stands for the AIPerf and GenAI-Perf "
        "exports under it) are shown side by side with the server's own figures, or alone. A .zst "
        "recording that tokenwatch finished holds its summary in a trailer at its end, read instead of "
        "every line (a trailer that does not fit the file: one warning, then the whole recording).",
    )
    summarize.add_argument("paths", nargs="+", metavar="FILE_OR_DIR")
    summarize.add_argument("--json", action="store_true", help="print the JSON contract instead of the table")
    summarize.add_argument(
        "--gpus-per-node",
        type=int,
        default=None,
        metavar="N",
        help="result folders: GPUs behind each LoadGen summary where the submission's systems/*.json "
        "does not say (default: unknown, never assumed)",
    )
    add_baseline_option(summarize)

    sub.add_parser("profiles", help="list the simulator profiles")

    add_report_parsers(sub)
    add_watch_parsers(sub)
    add_serve_parser(sub)
    add_rules_parser(sub)
    return parser


def add_rules_parser(sub: argparse._SubParsersAction[OneLineParser]) -> None:
    """``rules``: Prometheus alerting and recording rules for the series tokenwatch's /metrics serves."""
    rules = sub.add_parser(
        "rules",
        help="print Prometheus alerting and recording rules for tokenwatch's /metrics",
        description="Print a Prometheus rule file (load it with rule_files: in prometheus.yml) over the "
        "series `--prometheus-port` serves. Alerting rules (group tokenwatch): TokenwatchProjectedInvalid (a "
        "rack's projected MLPerf verdict is INVALID), TokenwatchNodeDown (a node down or stale), "
        "TokenwatchStraggler (a node's tokens/s below the median node's by more than --straggler-pct) and "
        "TokenwatchRackStale (a rack that was reporting has stopped); the alert names are those tokenwatch's "
        "own --notify uses. Recording rules (group tokenwatch-rack-figures): each rack figure the fleet "
        "watch asks every interval (nodes up and running, GPUs, tokens/s, power, the spread, the worst and "
        "median node, the projection), recorded as tokenwatch_rack:FIELD with the watch's own PromQL; a "
        "fleet watch reads them where the server holds them for every rack, so its rounds do not grow "
        "with the fleet's nodes and GPUs. Neither --alerting nor --recording: both groups.",
    )
    rules.add_argument(
        "--alerting", action="store_true", help="the alerting rules (alone, unless --recording)"
    )
    rules.add_argument(
        "--recording",
        action="store_true",
        help="the recording rules of the fleet's rack figures (alone, unless --alerting)",
    )
    rules.add_argument(
        "--for",
        dest="for_s",
        type=duration_arg,
        default=60.0,
        metavar="DURATION",
        help="how long a condition holds before its alert fires (default 1m; 0s: at once)",
    )
    rules.add_argument(
        "--straggler-pct",
        type=float,
        default=5.0,
        metavar="PCT",
        help="TokenwatchStraggler: how far below the median node, in %% (default 5, the core's)",
    )
    rules.add_argument(
        "--stale-after",
        type=positive_duration_arg,
        default=60.0,
        metavar="DURATION",
        help="TokenwatchRackStale: how long a rack may be silent (default 1m)",
    )
    rules.add_argument(
        "--rack-label",
        default="rack",
        metavar="NAME",
        help="the label that names a series' rack (default rack; the fleet config's nodes.rack_label)",
    )
    rules.add_argument(
        "--node-label",
        default="node",
        metavar="NAME",
        help="recording rules: the label that names a series' node (default node; fleet.node_label)",
    )
    rules.add_argument(
        "--preset",
        default="tokenwatch",
        metavar="NAME",
        help="recording rules: the fleet preset whose queries are recorded: tokenwatch (default), vllm, "
        "sglang (fleet.preset)",
    )
    rules.add_argument(
        "--rate-window",
        type=positive_duration_arg,
        default=60.0,
        metavar="DURATION",
        help="recording rules: the rate() window of the vllm / sglang presets (default 60s; "
        "fleet.rate_window)",
    )
    rules.add_argument(
        "--interval",
        type=positive_duration_arg,
        default=5.0,
        metavar="DURATION",
        help="recording rules: how often the server evaluates them (default 5s; the fleet's interval, so a "
        "recorded figure is at most that much older than the raw query's)",
    )


def _add_run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--tdp-w", type=tdp_arg, metavar="W", help="GPU TDP in W (default: the power limit the GPUs report)"
    )
    p.add_argument(
        "--gpus-per-node",
        type=int,
        default=None,
        metavar="N",
        help="result folders: GPUs behind each LoadGen summary where the submission's systems/*.json "
        "does not say (default: unknown, never assumed)",
    )


def add_report_parsers(sub: argparse._SubParsersAction[OneLineParser]) -> None:
    """``report`` (HTML of one run, or two compared) and ``export`` (tidy CSV / Parquet)."""
    report = sub.add_parser(
        "report",
        help="one self-contained HTML report of a run, or two runs side by side",
        description="Write the HTML report of RUN (a recording or a folder of MLPerf results); "
        "with two RUNs, compare them (B / A).",
    )
    report.add_argument("runs", nargs="+", metavar="RUN")
    report.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="FILE.html",
        help="where to write the report (an existing file needs --force; an input is never overwritten)",
    )
    report.add_argument("--force", action="store_true", help="overwrite an existing -o file")
    report.add_argument(
        "--workload",
        action="append",
        metavar="NAME=TOKENS",
        help="capacity table profile (repeatable; replaces the defaults), e.g. 'RAG query=2500'",
    )
    _add_run_options(report)
    add_baseline_option(report)

    export = sub.add_parser(
        "export",
        help="tidy CSV (or Parquet) of a run: node and GPU series, alerts, summary",
        description="Export RUN (a recording or a folder of MLPerf results) as tidy tables.",
    )
    export.add_argument("run", metavar="RUN")
    export.add_argument("--csv", metavar="DIR", help="write CSV files into DIR (created if missing)")
    export.add_argument("--parquet", metavar="DIR", help="write Parquet files into DIR (needs pyarrow)")
    export.add_argument(
        "--every",
        type=positive_duration_arg,
        metavar="DURATION",
        help="gpu_series: one row per GPU per DURATION of run time, each figure the mean of its readings "
        "(default: every reading, at the cadence the recording has)",
    )
    _add_run_options(export)


def add_watch_parsers(sub: argparse._SubParsersAction[OneLineParser]) -> None:
    """``watch`` (live collection from real nodes) and ``check`` (validate a watch config)."""
    watch = sub.add_parser(
        "watch",
        help="watch a live run on real nodes (over SSH, or this machine)",
        description="Watch a live run: GPU telemetry and progress from every node of CONFIG.yaml. "
        + STOP_NOTE,
    )
    watch.add_argument("config", metavar="CONFIG.yaml")
    watch.add_argument(
        "--stop-after",
        type=positive_duration_arg,
        metavar="DURATION",
        help="stop watching after this much wall time (default: when every node has finished, or Ctrl-C)",
    )
    watch.add_argument(
        "--slurm-job", metavar="ID", help="watch the nodes of this Slurm job (overrides nodes.hosts)"
    )
    watch.add_argument(
        "--accept-new-host-keys",
        action="store_true",
        help="record unknown host keys in known_hosts (a changed key is always refused)",
    )
    add_output_options(watch)
    check = sub.add_parser(
        "check",
        help="validate a watch config without connecting",
        description="Validate CONFIG.yaml: every check `watch` makes before it connects (host ranges, a "
        "Slurm job's nodes, SSH keys, the GPU source here in local mode, the notify section's receivers: "
        "each HTTP receiver's host and port must answer a TCP connection, nothing is sent); exit status 2 "
        "where `watch` would refuse it.",
    )
    check.add_argument("config", metavar="CONFIG.yaml")


def add_serve_parser(sub: argparse._SubParsersAction[OneLineParser]) -> None:
    """``serve``: the dashboard of a run command in a browser (textual-serve)."""
    serve = sub.add_parser(
        "serve",
        usage="tokenwatch serve [-h] [--host H] [--port N] [--max-viewers N] [-- RUN_COMMAND [OPTION ...]]",
        help="serve the dashboard of a run command to a browser",
        description="Serve the dashboard of RUN_COMMAND (sim, replay or watch with their own options; "
        "default: sim --speed 10) to a browser. Open the address it prints: it holds a token made at each "
        "start (http://127.0.0.1:8000/?token=...), which the page and its websocket require; the page keeps "
        "it in a cookie, so a reload works. Only the page's own origin may open the websocket, and only this "
        "server's names (the --host address, localhost, with the port) are answered, so no other web site "
        "can read or drive the dashboard. The first page starts one `python -m tokenwatch RUN_COMMAND`; "
        "later pages join that run read-only (the page connected longest has the keys; when it leaves, "
        "the next one does), and when the last page leaves the run ends (the next page starts it again).",
        epilog="example: tokenwatch serve --port 8000 -- sim --speed 10",
    )
    serve.add_argument(
        "--host",
        default="127.0.0.1",
        metavar="H",
        help="address to listen on (default 127.0.0.1, this machine only; another address sends the page "
        "and its token over the network unencrypted: prefer an SSH tunnel to 127.0.0.1)",
    )
    serve.add_argument("--port", type=port_arg, default=8000, metavar="N", help="port (default 8000)")
    serve.add_argument(
        "--max-viewers",
        type=viewers_arg,
        default=8,
        metavar="N",
        help="pages open at once (default 8); one more is refused with the reason in its close frame",
    )
    serve.add_argument(
        "run_command",
        nargs=argparse.REMAINDER,
        metavar="-- RUN_COMMAND",
        help="sim, replay or watch and their options (not --headless, --jsonl, --interval, --record, "
        "--prometheus-port: the run lives only while a page is open)",
    )


def parse(argv: list[str]) -> argparse.Namespace:
    if not argv or (argv[0].startswith("-") and argv[0] not in ("-h", "--help", "--version")):
        # `tokenwatch` alone: the dashboard on the default simulator, accelerated so it visibly moves.
        argv = ["sim", "--speed", "10", *argv]
        demo = True
    else:
        demo = False
    args, extra = build_parser().parse_known_args(argv)
    args.demo = demo
    if extra:  # named by the command they were given to, as its other errors are
        prog = f"tokenwatch {args.command}" if args.command else "tokenwatch"
        raise UsageError(f"{prog}: unrecognized arguments: {' '.join(extra)} (see {prog} --help)")
    return args


def stderr_line(message: str) -> None:
    """One line on stderr; what it quotes from files and nodes cannot drive the terminal."""
    from tokenwatch.base.formatting import printable

    sys.stderr.write(printable(message.rstrip("\n")) + "\n")


def print_warnings(warnings: list[str], limit: int = 20) -> None:
    """Skipped input lines, one per line on stderr, at most ``limit`` of them."""
    for warning in warnings[:limit]:
        stderr_line(f"warning: {warning}")
    if len(warnings) > limit:
        stderr_line(f"warning: ... and {len(warnings) - limit} more skipped lines")
