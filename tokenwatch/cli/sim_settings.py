"""``sim``'s arguments as the simulator's settings (shared by ``sim`` and ``serve``'s check of a sim)."""

from __future__ import annotations

import argparse
import dataclasses

from tokenwatch.cli.usage import UsageError, stderr_line
from tokenwatch.inputs.sim.faults import faults_after, parse_faults
from tokenwatch.inputs.sim.profile import load_profile
from tokenwatch.inputs.sim.rack_places import places_problem, sim_rack_places
from tokenwatch.inputs.sim.rack_sim import SimSettings


def sim_settings(args: argparse.Namespace) -> SimSettings:
    """A bad profile, rack count or fault is a user error (one line, exit 2); a fault after the run's
    nominal end is one warning line on stderr."""
    profile = load_profile(args.profile)
    if not 1 <= args.racks <= 256:
        raise UsageError("tokenwatch sim: --racks must be between 1 and 256")
    # A fleet's racks are the profile's rack repeated: say so, whatever its GPUs per node.
    extra_meta: dict[str, object] = {"nodes_per_rack": profile.nodes} if args.racks > 1 else {}
    sites, rows = getattr(args, "sites", 0), getattr(args, "rows", 0)
    problem = places_problem(args.racks, sites, rows)
    if problem:
        raise UsageError(f"tokenwatch sim: {problem}")
    places = sim_rack_places(args.racks, sites, rows)
    if places:  # the fleet board groups by them; the exporter labels the racks' series with them
        extra_meta["rack_places"] = places
    if args.racks > 1:
        profile = dataclasses.replace(
            profile,
            name=f"{profile.name} x{args.racks}",
            nodes=profile.nodes * args.racks,
            total_samples=profile.total_samples * args.racks,
        )
    if args.benchmark is not None:  # the simulated LoadGen runs the benchmark asked for
        profile = dataclasses.replace(profile, benchmark=args.benchmark)
    faults = parse_faults(args.faults, profile.node_names(), profile.gpus_per_node)
    for warning in faults_after(faults, args.duration or profile.duration_s):
        stderr_line(f"tokenwatch sim: warning: {warning}")
    return SimSettings(
        profile,
        scenario=args.scenario,
        seed=args.seed,
        duration_s=args.duration,
        faults=faults,
        extra_meta=extra_meta,
    )
