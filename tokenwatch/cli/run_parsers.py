"""The run commands' parsers: ``sim`` and ``replay``, ``watch`` and ``check``."""

from __future__ import annotations

import argparse

from tokenwatch.cli.arg_types import duration_arg, positive_duration_arg, speed_arg
from tokenwatch.cli.shared_flags import REPLAY_QUIT_NOTE, STOP_NOTE, add_output_options
from tokenwatch.cli.usage import OneLineParser


def add_sim_replay_parsers(sub: argparse._SubParsersAction[OneLineParser]) -> None:
    """``sim`` (a simulated rack run) and ``replay`` (a recording through the same core)."""
    from tokenwatch.inputs.sim import DEFAULT_PROFILE

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
