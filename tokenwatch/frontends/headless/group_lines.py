"""Headless lines of a fleet grouped by site or row: after the fleet's line, one line per group of the
board's top level (the sites, or the rows where there are no sites), with the board's group figures.

    site01  racks 3/3  nodes 54/54   2,856,258 tok/s  9,918 tok/s/GPU  280.7 kW  10.17 tok/J  proj ...

The JSONL carries every level (``fleet_groups``); a line per row of every site would bury the fleet's.
"""

from __future__ import annotations

import math

from tokenwatch.base.formatting import group, kilowatts, part_of, printable, verdict_word
from tokenwatch.core.fleet.groups import GroupTable
from tokenwatch.core.snapshot import RackSnapshot

INDENT = "  "


def group_lines(snap: RackSnapshot) -> list[str]:
    """The top level's group lines ([] for a run whose racks are not placed)."""
    if snap.fleet_groups is None:
        return []
    level = snap.fleet_groups.top
    width = max(len(printable(name)) for name in level.names)
    return [INDENT + group_line(level, g, width) for g in range(len(level))]


def group_line(level: GroupTable, g: int, width: int = 0) -> str:
    """Group ``g``'s figures in one line; ``width`` pads the name so the figures line up."""
    racks = f"racks {part_of(int(level.racks_up[g]), int(level.racks_total[g]))}"
    stopped = []
    if level.racks_stale[g]:
        stopped.append(f"{level.racks_stale[g]} stale")
    if level.racks_down[g]:
        stopped.append(f"{level.racks_down[g]} down")
    if stopped:
        racks += f" ({', '.join(stopped)})"
    tpj = float(level.tokens_per_joule[g])
    valid = float(level.projected_valid[g])
    if level.projection_stale[g]:
        projected = "proj stale"
    else:
        verdict = verdict_word(None if math.isnan(valid) else bool(valid))
        projected = f"proj {group(level.projected_tokens_per_s[g])} {verdict}"
    parts = [
        printable(level.names[g]).ljust(width),
        racks,
        f"nodes {part_of(int(level.nodes_up[g]), int(level.nodes_total[g]))}",
        f"{group(level.tokens_per_s[g]):>10} tok/s",
        f"{group(level.per_gpu_tokens_per_s[g]):>7} tok/s/GPU",
        f"{kilowatts(level.power_w[g]):>9}",
        f"{tpj:.2f} tok/J" if math.isfinite(tpj) else "— tok/J",
        projected,
    ]
    return "  ".join(parts)
