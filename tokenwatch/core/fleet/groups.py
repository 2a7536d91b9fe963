"""The fleet's racks grouped by where they stand: one row per site, and per row within a site.

A fleet of 1,000 racks is too many rows to read; its racks' series often carry a ``site`` and a
``row`` label (a data hall, an aisle). The run says where each rack stands in ``meta["rack_places"]``
(rack name -> ``[site, row]``, "" where a label is absent): a fleet watch reads the labels off the
racks' series, ``sim --sites/--rows`` makes them up. Each group's figures are its racks' figures summed
the way the fleet's header sums every rack (:func:`tokenwatch.core.fleet._snapshot.with_fleet`): the
tokens/s and power of the racks that have a figure, nodes and GPUs counted, tokens per joule and per
GPU as ratios of those sums; its projection is the sum of its racks' projections (none while one has
none), VALID when each projects VALID, INVALID when one does, and stale while one of its racks has no
data now (as the fleet's own projection is). One numpy pass per level (``bincount`` over the racks'
group numbers): 1,000 racks cost well under a millisecond.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tokenwatch.base.events import FloatArray, IntArray
from tokenwatch.base.formatting import json_number, natural_key
from tokenwatch.core.fleet.table import FleetTable

LEVELS: tuple[str, ...] = ("site", "row")
NO_LABEL = "(none)"  # the group of racks whose series carry no such label, where others do


@dataclass(frozen=True, slots=True, eq=False)
class GroupTable:
    """One entry per group of a level (``level``: "site" or "row"), in natural name order.

    ``keys`` are unique over the level (a row's is ``site/row``, rows of two sites may share a name);
    ``parent`` is a row's site ("" at the site level and where there are no sites). ``rack_group``:
    each of the fleet table's racks' group number. Racks up / stale / down as the board's rack states;
    the figures as the module docstring says, NaN where not known. ``projection_stale``: a rack of the
    group has no data now, so the group's projection is not a figure; ``slowest_rack``: its up rack
    with the fewest tokens/s per GPU ("" with none)."""

    level: str
    names: tuple[str, ...]
    keys: tuple[str, ...]
    parent: tuple[str, ...]
    rack_group: IntArray
    racks_total: IntArray
    racks_up: IntArray
    racks_stale: IntArray
    racks_down: IntArray
    nodes_total: IntArray
    nodes_up: IntArray
    gpus: IntArray
    tokens_per_s: FloatArray
    per_gpu_tokens_per_s: FloatArray
    power_w: FloatArray
    tokens_per_joule: FloatArray
    projected_valid: FloatArray
    projected_tokens_per_s: FloatArray
    projection_stale: np.ndarray
    slowest_rack: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.keys)

    def index(self, key: str) -> int:
        return self.keys.index(key)

    def state(self, i: int) -> str:
        """up while one of its racks is; down when all are down; else stale."""
        if self.racks_up[i] > 0:
            return "up"
        return "down" if self.racks_down[i] == self.racks_total[i] else "stale"

    def racks_of(self, i: int) -> IntArray:
        """The fleet table's rack indexes of group ``i``."""
        return np.flatnonzero(self.rack_group == i).astype(np.int64)


@dataclass(frozen=True, slots=True, eq=False)
class FleetGroups:
    """The fleet's levels above its racks: ``site`` and ``row`` (either None where no rack has that
    label). The board's top level is the sites, or the rows where there are no sites."""

    site: GroupTable | None
    row: GroupTable | None

    @property
    def top(self) -> GroupTable:
        top = self.site if self.site is not None else self.row
        assert top is not None
        return top

    def rows_of(self, site_key: str) -> IntArray:
        """The row groups of site ``site_key`` (empty where there are no rows)."""
        if self.row is None:
            return np.zeros(0, np.int64)
        return np.array([i for i, p in enumerate(self.row.parent) if p == site_key], np.int64)


def rack_places(
    meta: Mapping[str, Any] | None,
    racks: tuple[str, ...],
    later: Mapping[str, tuple[str, str]] | None = None,
) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """Each rack's (site, row) from ``meta["rack_places"]``, or for a rack that appeared since the start
    from ``later`` ("" where neither says); None where no rack has either (the board is as without
    groups). Entries that are not two strings are left out: a recording is input like any other."""
    places = meta.get("rack_places") if meta else None
    if not isinstance(places, Mapping):
        places = {}
    if not places and not later:
        return None
    sites, rows = [], []
    for rack in racks:
        entry = places.get(rack)
        if entry is None and later:
            entry = later.get(rack)
        ok = isinstance(entry, list | tuple) and len(entry) == 2 and all(isinstance(v, str) for v in entry)
        site, row = (entry[0], entry[1]) if ok else ("", "")  # type: ignore[index]
        sites.append(site)
        rows.append(row)
    return None if not any(sites) and not any(rows) else (tuple(sites), tuple(rows))


@dataclass(frozen=True, slots=True, eq=False)
class _Layout:
    """A level's groups: each rack's group number, and the groups' keys, names and parents."""

    of: IntArray
    keys: tuple[str, ...]
    names: tuple[str, ...]
    parents: tuple[str, ...]


@dataclass(slots=True, eq=False)
class RackPlaces:
    """Where a run's racks stand, and the groups that makes, kept by the fleet's state (the core's
    :class:`~tokenwatch.core.fleet._memo.FleetMemo` or :class:`~tokenwatch.core.fleet._state.FleetState`)
    from one snapshot to the next: reading 1,000 racks' places and numbering their groups at every
    snapshot cost more than summing the groups. Made again only when the fleet's racks change. A rack
    that appeared since the start stands where its first rack figures said (:meth:`learn`; a fleet
    watch asks the server when it appears), else where ``meta`` says, in "(none)" where neither does."""

    meta: Mapping[str, Any] | None
    racks: tuple[str, ...] | None = None
    levels: tuple[_Layout | None, _Layout | None] = (None, None)
    later: dict[str, tuple[str, str]] = field(default_factory=dict)  # rack -> (site, row), said later

    def learn(self, places: Iterable[tuple[str, str, str]]) -> None:
        """Where racks that appeared since the start stand: (rack, site, row) each."""
        for rack, site, row in places:
            if self.later.get(rack) != (site, row):
                self.later[rack] = (site, row)
                self.racks = None  # the groups are made again at the next snapshot

    def groups(self, table: FleetTable) -> FleetGroups | None:
        """The fleet table's racks grouped by site and row; None where the run places none of them."""
        if table.racks != self.racks:
            self.racks = table.racks
            self.levels = _layouts(rack_places(self.meta, table.racks, self.later))
        site, row = self.levels
        if site is None and row is None:
            return None
        return FleetGroups(
            _level(table, "site", site) if site is not None else None,
            _level(table, "row", row) if row is not None else None,
        )


def fleet_groups(table: FleetTable, meta: Mapping[str, Any] | None) -> FleetGroups | None:
    """The fleet table's racks grouped by site and row; None where the run places none of them (made
    afresh: the core keeps a :class:`RackPlaces` between snapshots)."""
    return RackPlaces(meta).groups(table)


def _layouts(
    placed: tuple[tuple[str, ...], tuple[str, ...]] | None,
) -> tuple[_Layout | None, _Layout | None]:
    if placed is None:
        return None, None
    sites, rows = placed
    nowhere = ("",) * len(sites)
    return (
        _layout(sites, nowhere) if any(sites) else None,
        _layout(rows, sites if any(sites) else nowhere) if any(rows) else None,
    )


def _layout(names: tuple[str, ...], parents: tuple[str, ...]) -> _Layout:
    labels = [name or NO_LABEL for name in names]
    nested = any(parents)  # rows within sites: a row's key and parent name its site
    owners = [parent or NO_LABEL for parent in parents] if nested else [""] * len(parents)
    keys = [f"{p}/{n}" for p, n in zip(owners, labels, strict=True)] if nested else labels
    first = dict(zip(keys, range(len(keys)), strict=False))  # each key's last rack: any will do
    unique = sorted(first, key=natural_key)
    number = {key: g for g, key in enumerate(unique)}
    of = np.array([number[k] for k in keys], np.int64)
    of.flags.writeable = False
    names_of = tuple(labels[first[k]] for k in unique)
    return _Layout(of, tuple(unique), names_of, tuple(owners[first[k]] for k in unique))


def _level(table: FleetTable, level: str, layout: _Layout) -> GroupTable:
    of, unique, group_names, group_parent = layout.of, layout.keys, layout.names, layout.parents
    count = len(unique)

    def total(values: np.ndarray) -> np.ndarray:
        return np.bincount(of, weights=np.asarray(values, np.float64), minlength=count)

    def known_sum(values: FloatArray) -> FloatArray:
        known = np.isfinite(values)
        sums = total(np.where(known, values, 0.0))
        return np.where(total(known) > 0, sums, np.nan)

    state = np.array(table.state, dtype=object)
    up, stale, down = (state == "up"), (state == "stale"), (state == "down")
    tokens, power = known_sum(table.tokens_per_s), known_sum(table.power_w)
    gpus = total(table.gpus)
    projected = np.asarray(table.projected_tokens_per_s, np.float64)
    valid = np.asarray(table.projected_valid, np.float64)
    racks_total = total(np.ones(len(of)))
    unprojected = total(~np.isfinite(projected)) > 0
    invalid = total(valid == 0) > 0
    all_valid = total(valid == 1) == racks_total
    with np.errstate(invalid="ignore", divide="ignore"):
        per_gpu = np.where(gpus > 0, tokens / np.maximum(gpus, 1), np.nan)
        per_joule = np.where(power > 0, tokens / np.where(power > 0, power, 1.0), np.nan)
    return GroupTable(
        level=level,
        names=tuple(group_names),
        keys=tuple(unique),
        parent=tuple(group_parent),
        rack_group=of,
        racks_total=racks_total.astype(np.int64),
        racks_up=total(up).astype(np.int64),
        racks_stale=total(stale).astype(np.int64),
        racks_down=total(down).astype(np.int64),
        nodes_total=total(table.nodes_total).astype(np.int64),
        nodes_up=total(table.nodes_up).astype(np.int64),
        gpus=gpus.astype(np.int64),
        tokens_per_s=tokens,
        per_gpu_tokens_per_s=per_gpu,
        power_w=power,
        tokens_per_joule=per_joule,
        projected_valid=np.where(invalid, 0.0, np.where(all_valid, 1.0, np.nan)),
        projected_tokens_per_s=np.where(
            unprojected, np.nan, total(np.where(np.isfinite(projected), projected, 0))
        ),
        projection_stale=total(~up) > 0,
        slowest_rack=_slowest(table, of, count, up),
    )


def _slowest(table: FleetTable, of: IntArray, count: int, up: np.ndarray) -> tuple[str, ...]:
    """Per group, its up rack with the fewest tokens/s per GPU ("" with none)."""
    rate = np.asarray(table.per_gpu_tokens_per_s, np.float64)
    ok = up & np.isfinite(rate)
    order = np.lexsort((rate, of))  # by group, then by rate
    order = order[ok[order]]
    out = [""] * count
    ends = of[order]
    firsts = np.flatnonzero(np.r_[True, ends[1:] != ends[:-1]]) if len(order) else np.zeros(0, np.int64)
    for k in firsts:
        r = int(order[k])
        out[int(of[r])] = table.racks[r]
    return tuple(out)


def groups_json(groups: FleetGroups) -> list[dict[str, Any]]:
    """The groups as JSONL rows (``"kind": "group"``): the sites, then the rows, each with its level,
    name, site and row, its racks up / stale / down, nodes and figures, and its projection (``"stale"``
    while one of its racks has no data now)."""
    out: list[dict[str, Any]] = []
    for level in (groups.site, groups.row):
        if level is None:
            continue
        for g, name in enumerate(level.names):
            valid = float(level.projected_valid[g])
            site = name if level.level == "site" else (level.parent[g] or None)
            out.append(
                {
                    "kind": "group",
                    "level": level.level,
                    "group": level.keys[g],
                    "site": site,
                    "row": name if level.level == "row" else None,
                    "state": level.state(g),
                    "racks": int(level.racks_total[g]),
                    "racks_up": int(level.racks_up[g]),
                    "racks_stale": int(level.racks_stale[g]),
                    "racks_down": int(level.racks_down[g]),
                    "nodes": int(level.nodes_total[g]),
                    "nodes_up": int(level.nodes_up[g]),
                    "gpus": int(level.gpus[g]),
                    "tokens_per_s": json_number(level.tokens_per_s[g]),
                    "per_gpu_tokens_per_s": json_number(level.per_gpu_tokens_per_s[g]),
                    "power_w": json_number(level.power_w[g]),
                    "tokens_per_joule": json_number(level.tokens_per_joule[g]),
                    "projection": "stale"
                    if level.projection_stale[g]
                    else {
                        "tokens_per_s": json_number(level.projected_tokens_per_s[g]),
                        "valid": None if math.isnan(valid) else bool(valid),
                    },
                    "slowest_rack": level.slowest_rack[g] or None,
                }
            )
    return out
