"""The core's fleet wing: a run of more than one rack, one row per rack on the fleet board.

Public: :mod:`.table` (the :class:`~.table.FleetTable` a snapshot carries) and :mod:`.rack_groups` (which of
a run's nodes make up each rack). The rest is the core's own: what the fleet keeps between ticks (``_memo``,
and ``_state`` for a fleet known rack by rack through Prometheus), one rack seen as a run of its own
(``_rack_view``), the board's rows and forecasts (``_board``, ``_forecast``) and the fleet's snapshot and
summary figures (``_snapshot``, ``_summary``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tokenwatch.base.lazy_names import lazy_names
from tokenwatch.core.fleet.rack_groups import rack_groups
from tokenwatch.core.fleet.table import FleetTable

if TYPE_CHECKING:
    from tokenwatch.core.fleet._board import fleet_tick

# The board's rows read the core's state, whose module holds the fleet's part of it (``_memo``,
# ``_state``):
# loaded on first use, so importing the wing's types never starts the state's import over again.
_LAZY = {
    "fleet_tick": "tokenwatch.core.fleet._board",
}

__all__ = ["FleetTable", "fleet_tick", "rack_groups"]

__getattr__ = lazy_names(__name__, _LAZY)
