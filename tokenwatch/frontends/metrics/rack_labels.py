"""Which rack each served series belongs to: the ``rack`` label that lets one Prometheus scrape many
racks' tokenwatch exporters and still tell them apart (and aggregate them: ``sum by (rack)``).

A run of one rack names it once: ``meta["rack"]`` (a watch's ``nodes.rack``, or the rack its host range
names), else the run's name; every series carries it, the rack-wide ones too. A run of many racks (a
fleet table whose racks know their nodes) labels each node's and GPU's series with its own rack; its
rack-wide series describe the whole fleet and carry none. The label's name is ``meta["rack_label"]``
(a watch's ``nodes.rack_label``), ``rack`` by default. Where the run places its racks in sites and rows
(``meta["rack_places"]``, ``sim --sites/--rows``), each node's series carry its rack's ``site`` and
``row`` too: the labels a fleet watch groups the board by.
"""

from __future__ import annotations

import re

from tokenwatch.core.fleet.groups import rack_places
from tokenwatch.core.snapshot import RackSnapshot

DEFAULT_RACK_LABEL = "rack"
PLACE_LABELS = ("site", "row")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")


def rack_label_name(snap: RackSnapshot) -> str:
    name = snap.run.meta.get("rack_label") if snap.run.meta else None
    return name if isinstance(name, str) and _LABEL_NAME.fullmatch(name) else DEFAULT_RACK_LABEL


def run_rack_name(snap: RackSnapshot) -> str:
    """The rack a one-rack run is: what its source named, else the run's name."""
    name = snap.run.meta.get("rack") if snap.run.meta else None
    return name if isinstance(name, str) and name else snap.run.name


def node_racks(snap: RackSnapshot) -> tuple[str, ...] | None:
    """Each node's rack in a run of several racks whose fleet table places the nodes; None for a run
    of one rack (its nodes are all the run's rack)."""
    fleet = snap.fleet
    nodes = len(snap.run.nodes)
    if fleet is None or len(fleet) < 2 or not int(fleet.node_count.sum()):
        return None
    default = run_rack_name(snap)
    racks = [default] * nodes
    for i, rack in enumerate(fleet.racks):
        for node in fleet.nodes_of(i):
            if 0 <= node < nodes:
                racks[node] = rack
    return tuple(racks)


def node_places(snap: RackSnapshot) -> tuple[tuple[str, str], ...] | None:
    """Each node's rack's (site, row) in a run of several racks that places them; None otherwise."""
    fleet = snap.fleet
    if fleet is None or len(fleet) < 2 or not int(fleet.node_count.sum()):
        return None
    placed = rack_places(snap.run.meta, fleet.racks)
    if placed is None:
        return None
    sites, rows = placed
    places = [("", "")] * len(snap.run.nodes)
    for i in range(len(fleet)):
        for node in fleet.nodes_of(i):
            if 0 <= node < len(places):
                places[node] = (sites[i], rows[i])
    return tuple(places)
