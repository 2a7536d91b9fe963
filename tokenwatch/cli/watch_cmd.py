"""``tokenwatch watch CONFIG`` (live collection from real nodes) and ``tokenwatch check CONFIG``."""

from __future__ import annotations

import argparse
import sys

from tokenwatch.cli.options import RunOptions
from tokenwatch.cli.parser import stderr_line
from tokenwatch.cli.running import run_session
from tokenwatch.live.build import build_collector, core_config, plan_watch
from tokenwatch.live.config import load_watch_config
from tokenwatch.live.supervisor import LiveOptions


def cmd_watch(args: argparse.Namespace) -> int:
    from tokenwatch.cli.baseline_option import with_baseline
    from tokenwatch.core.baseline import RunIdentity

    config = load_watch_config(args.config)
    # The baseline first: a bad one is refused before anything is connected.
    options = with_baseline(
        RunOptions.from_args(args, "live"),
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
    return run_session(options, [collector], core_config=core_config(config))


def cmd_check(args: argparse.Namespace) -> int:
    """Everything ``watch`` checks before it connects (the same :func:`plan_watch`), nothing more: a
    config ``check`` passes is one ``watch`` starts on, from this machine."""
    config = load_watch_config(args.config)
    out = sys.stdout
    plan = plan_watch(config, warn=lambda message: stderr_line(f"tokenwatch: warning: {message}"))
    if config.local:
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
    out.write(
        f"  gpu       {gpu.source}" + (f" every {gpu.interval_s:g} s" if gpu.source != "none" else "") + "\n"
    )
    for p in config.progress:
        detail = p.path or p.url or ""
        extra = p.preset or ("patterns" if p.patterns else "")
        out.write(f"  progress  {p.kind:<16} {detail}" + (f" ({extra})" if extra else "") + "\n")
    a = config.alerts
    out.write(
        f"  alerts    straggler {a.straggler_pct:g}%, stale after {a.stale_after_s:g} s "
        "(or 3 of a source's intervals, if longer), "
        f"TTFT SLA {a.ttft_sla_s:g} s, TPOT SLA {a.tpot_sla_s * 1000:g} ms\n"
    )
    return 0
