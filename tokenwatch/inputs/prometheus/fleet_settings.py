"""What a fleet watch is told: where its server is and how to read it (:class:`FleetSettings`, from the
fleet config), and which racks are on screen (:class:`FleetFocus`, set by the dashboard)."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterable
from dataclasses import dataclass

from tokenwatch.base.server_access import ServerAccess


class FleetFocus:
    """The racks on screen, whose nodes and GPUs are fetched every interval. The dashboard sets it from
    its own thread or loop (a frozenset is swapped whole, so a reader never sees half a change)."""

    def __init__(self) -> None:
        self._racks: frozenset[str] = frozenset()
        self._lock = threading.Lock()

    @property
    def racks(self) -> frozenset[str]:
        return self._racks

    def show(self, racks: Iterable[str]) -> None:
        with self._lock:
            self._racks = frozenset(racks)

    def clear(self) -> None:
        self.show(())


@dataclass(frozen=True, slots=True)
class FleetSettings:
    """``rack_label`` / ``node_label``: the labels naming a series' rack and node; ``window_s`` the
    rate window of server presets; ``settle_s`` how long after a grid instant it is asked (scrapes
    stamped before it are in by then; the engine's latency offset is added); ``gpus_per_node`` where the
    config says (else discovered); ``access`` the headers, credentials and TLS settings the server wants."""

    url: str
    preset: str = "tokenwatch"
    rack_label: str = "rack"
    node_label: str = "node"
    interval_s: float = 5.0
    detail_interval_s: float = 30.0
    lookback_s: float = 3 * 3600.0
    window_s: float = 60.0
    timeout_s: float = 5.0
    settle_s: float = 0.5
    gpus_per_node: int | None = None
    access: ServerAccess = dataclasses.field(default_factory=ServerAccess)
    latency_offset_s: float | None = None  # None: what the server's flags say, else 0
    site_label: str = "site"  # the labels naming where a rack stands: the board groups by them
    row_label: str = "row"
