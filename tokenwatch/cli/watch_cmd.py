"""``tokenwatch watch CONFIG`` (live collection from real nodes) and ``tokenwatch check CONFIG``."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import TextIO

from tokenwatch.base.durations import format_duration
from tokenwatch.base.formatting import printable
from tokenwatch.cli.notify_option import notify_from_args
from tokenwatch.cli.options import RunOptions
from tokenwatch.cli.running import check_run_outputs, run_session
from tokenwatch.cli.usage import stderr_line
from tokenwatch.inputs.config import WatchConfig, load_watch_config, rack_label
from tokenwatch.inputs.fleet_access import server_access
from tokenwatch.inputs.live.supervisor import LiveOptions
from tokenwatch.inputs.watch import build_collector, core_config, fleet_focus, plan_watch


def cmd_watch(args: argparse.Namespace) -> int:
    from tokenwatch.cli.baseline_option import with_baseline
    from tokenwatch.core.baseline import RunIdentity

    options = RunOptions.from_args(args, "live", inputs=(args.config,))
    check_run_outputs(options)  # before connecting to anything
    config = load_watch_config(args.config)
    if config.notify is not None:  # the config's receivers, and --notify's beside them
        options = dataclasses.replace(options, notify=notify_from_args(args.notify, config.notify))
    # The baseline first: a bad one is refused before anything is connected.
    options = with_baseline(
        options,
        args,
        RunIdentity(
            scenario=config.run.scenario,
            benchmark=args.benchmark or config.run.benchmark,
            gpus_per_node=config.nodes.gpus_per_node if config.nodes else None,
            duration_s=config.run.duration_s,
        ),
    )
    collector = build_collector(
        config,
        slurm_job=args.slurm_job,
        accept_new_host_keys=args.accept_new_host_keys,
        options=LiveOptions(stop_after_s=args.stop_after),
        warn=lambda message: stderr_line(f"tokenwatch: warning: {message}"),
    )
    return run_session(
        options, [collector], core_config=core_config(config), fleet_focus=fleet_focus(collector)
    )


class _PrintableLines:
    """Writes what the config says (names, paths) with control characters escaped."""

    def __init__(self, out: TextIO) -> None:
        self.out = out

    def write(self, text: str) -> None:
        self.out.write("\n".join(printable(line) for line in text.split("\n")))


def cmd_check(args: argparse.Namespace) -> int:
    """Everything ``watch`` checks before it connects (the same :func:`plan_watch`), nothing more: a
    config ``check`` passes is one ``watch`` starts on, from this machine."""
    config = load_watch_config(args.config)
    out = _PrintableLines(sys.stdout)
    plan = plan_watch(config, warn=lambda message: stderr_line(f"tokenwatch: warning: {message}"))
    if config.fleet is not None:
        fleet = config.fleet
        where = (
            f"a fleet through Prometheus at {fleet.url} ({fleet.preset} series, racks by label "
            f"{rack_label(config)!r}, nodes by {fleet.node_label!r}; found when the watch starts)"
        )
    elif config.local:
        where = "local mode: this machine is the node"
    else:
        names = [t.name for t in plan.targets]
        shown = ", ".join(names[:3]) + (f", ... {names[-1]}" if len(names) > 3 else "")
        where = f"{len(names)} node{'s' * (len(names) != 1)} ({shown})"
        if config.nodes and config.nodes.slurm_job:
            where += f" of Slurm job {config.nodes.slurm_job}"
    gpus = config.nodes.gpus_per_node if config.nodes and config.nodes.gpus_per_node else None
    out.write(f"{config.path}: ok\n")
    rules = f", judged by {config.run.benchmark}'s rules" if config.run.benchmark else ""
    out.write(f"  run       {config.run.name} ({config.run.scenario}{rules})\n")
    out.write(f"  nodes     {where}" + (f", {gpus} GPUs each" if gpus else "") + "\n")
    gpu = config.gpu
    if config.fleet is not None:
        f = config.fleet
        sent = server_access(f.auth, f.headers).describe()  # never a secret, only where it is
        # As a config writes it (10m, 3h), not in fractions of an hour (0.166667 h)
        history = f"history up to {format_duration(f.lookback_s)} back" if f.lookback_s else "no history"
        out.write(
            f"  fleet     rack figures every {f.interval_s:g} s, every node every {f.detail_interval_s:g} s "
            f"(alerts), {history}\n"
        )
        if sent:
            out.write(f"  access    {sent}\n")
    else:
        out.write(
            f"  gpu       {gpu.source}"
            + (f" every {gpu.interval_s:g} s" if gpu.source != "none" else "")
            + "\n"
        )
    for p in config.progress:
        detail = p.path or p.url or ""
        extra = f"rules {p.rules}" if p.rules else p.preset or ("patterns" if p.patterns else "")
        out.write(f"  progress  {p.kind:<16} {detail}" + (f" ({extra})" if extra else "") + "\n")
    a = config.alerts
    out.write(
        f"  alerts    straggler {a.straggler_pct:g}%, stale after {a.stale_after_s:g} s "
        "(or 3 of a source's intervals, if longer), "
        f"TTFT SLA {a.ttft_sla_s:g} s, TPOT SLA {a.tpot_sla_s * 1000:g} ms\n"
    )
    if config.notify is not None:
        out.write(f"  notify    {_checked_notify(config)}\n")
    return 0


def _checked_notify(config: WatchConfig) -> str:
    """The notify section in a line, once every HTTP receiver answers a TCP connection (a receiver that
    cannot be reached is an error naming its key, as a bad URL is)."""
    from tokenwatch.base.yaml_schema import Reader, load_yaml
    from tokenwatch.frontends.notify import unreachable_receivers
    from tokenwatch.frontends.notify.receivers import describe, runtime_receivers

    notify = config.notify
    assert notify is not None
    problems = unreachable_receivers(notify)
    if problems:
        _, lines = load_yaml(config.path)
        at, why = problems[0]
        raise Reader(config.path, lines).error(("notify", *at), why)
    kinds = ", ".join(sorted(notify.wanted_kinds))
    receivers = describe(runtime_receivers(notify)) or "no receiver here (watch --notify gives them)"
    return f"{receivers}; {kinds}; {notify.min_severity} and up; hold {notify.hold_s:g} s"
