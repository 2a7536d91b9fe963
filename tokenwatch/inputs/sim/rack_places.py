"""Where a simulated fleet's racks stand: ``sim --racks N --sites S --rows K`` puts them in sites and rows.

A real fleet's racks' series carry ``site`` and ``row`` labels (a data hall, an aisle), which the fleet
board groups by; a simulated one gets them here, so its board groups the same way and its
``--prometheus-port`` exporter serves them for a fleet watch to find. The racks are dealt out in order:
``S`` sites of consecutive racks (their sizes differ by one at most), and each site's racks (or the
whole fleet's, without sites) into ``K`` rows the same way. Rows are named within their site
(``site02``'s rows are ``row01`` .. too), as aisles are.
"""

from __future__ import annotations

import numpy as np

from tokenwatch.core.fleet.rack_groups import rack_label


def place_name(kind: str, i: int, count: int) -> str:
    """``site01`` .. ``site12``, ``row01`` ..: zero-padded to the widest number, at least two digits."""
    return f"{kind}{i + 1:0{max(2, len(str(count)))}d}"


def _deal(items: int, parts: int) -> list[int]:
    """Each of ``items`` consecutive items' part number, ``parts`` parts whose sizes differ by one at most."""
    return [
        int(p)
        for p in np.repeat(np.arange(parts), np.diff(np.linspace(0, items, parts + 1).round()).astype(int))
    ]


def sim_rack_places(racks: int, sites: int, rows: int) -> dict[str, list[str]]:
    """``meta["rack_places"]``: rack name -> [site, row] ("" where not asked for); {} with neither."""
    if not sites and not rows:
        return {}
    site_of = _deal(racks, sites) if sites else [0] * racks
    places: dict[str, list[str]] = {}
    for s in range(max(1, sites)):
        members = [r for r in range(racks) if site_of[r] == s]
        row_of = _deal(len(members), rows) if rows else [0] * len(members)
        for k, r in enumerate(members):
            site = place_name("site", s, sites) if sites else ""
            row = place_name("row", row_of[k], rows) if rows else ""
            places[rack_label(r, racks)] = [site, row]
    return places


def places_problem(racks: int, sites: int, rows: int) -> str:
    """Why ``--sites`` / ``--rows`` cannot place ``racks`` racks ("" when they can)."""
    if sites < 0 or rows < 0:
        return "--sites and --rows count sites and rows: 1 or more (0: none)"
    if (sites or rows) and racks < 2:
        return "--sites and --rows place the racks of a fleet: give --racks 2 or more"
    if sites > racks:
        return f"--sites {sites} is more sites than racks ({racks})"
    smallest_site = racks // max(1, sites)
    if rows > smallest_site:
        where = "in its smallest site" if sites else "in the fleet"
        return f"--rows {rows} is more rows than racks {where} ({smallest_site})"
    return ""
