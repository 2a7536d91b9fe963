"""The flags several commands share: where a run's snapshots go (sim, replay, watch), ``--baseline``
(those and summarize, report), and what their help says about stopping a run."""

from __future__ import annotations

import argparse

from tokenwatch.cli.arg_types import benchmark_arg, port_arg, positive_duration_arg

STOP_NOTE = (
    "Ctrl-C, SIGTERM or SIGHUP (or quitting the dashboard) before the run has ended ends it as interrupted: "
    "the recording says so, the partial summary is printed marked INTERRUPTED, exit status 130."
)
REPLAY_QUIT_NOTE = (
    "Quitting the dashboard (q, or Ctrl-C in it) stops the replay, not the run: the summary up to there "
    "is printed marked REPLAY STOPPED, exit status 0; Ctrl-C, SIGTERM or SIGHUP headless, or a signal to "
    "the dashboard, end it as interrupted: the partial summary is printed marked INTERRUPTED, exit 130."
)


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
