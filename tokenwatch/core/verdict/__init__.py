"""The core's verdict wing: the run's live MLPerf verdict, from the latency and query counts the state keeps.

Public: :mod:`.view` (what a snapshot carries: :class:`~.view.VerdictView`, the forecast's accuracy and the
rule lines the front ends write; types and pure readers) and :mod:`.final` (the verdict at a run's end, also
read from a result folder). The rest is the core's own: the verdict's part of the state (``_state``), its
handling of events (``_ingest``), the inputs a tick reads (``_inputs``, ``_node_quantiles``,
``_pace_memo``), the forecast, the view and the tick over the state (``_tick``), a fleet's racks
projected together (``_together``), the decided verdict (``_decided``, ``_beyond``, ``_loadgen``) and its
JSON (``_json``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tokenwatch.base.lazy_names import lazy_names
from tokenwatch.core.verdict.view import HISTORY_COLUMNS, VerdictHistory, VerdictView

if TYPE_CHECKING:
    from tokenwatch.core.verdict._decided import LOST_AFTER_DOWN_S
    from tokenwatch.core.verdict._inputs import prime_latency_quantiles
    from tokenwatch.core.verdict._state import VerdictState
    from tokenwatch.core.verdict._tick import current_forecast, verdict_tick
    from tokenwatch.core.verdict._together import project_racks_together

# The decided verdict and the tick read the core's state, whose module holds the verdict's part of it
# (``_state``):
# loaded on first use, so importing the wing's types never starts the state's import over again. The
# verdict's part of the state, its history's columns and the latency quantiles' priming are here for the
# fleet wing, which reads each rack's verdict through this face, never the verdict's private modules.
_LAZY = {
    "LOST_AFTER_DOWN_S": "tokenwatch.core.verdict._decided",
    "VerdictState": "tokenwatch.core.verdict._state",
    "prime_latency_quantiles": "tokenwatch.core.verdict._inputs",
    "current_forecast": "tokenwatch.core.verdict._tick",
    "verdict_tick": "tokenwatch.core.verdict._tick",
    "project_racks_together": "tokenwatch.core.verdict._together",
}

__all__ = [
    "HISTORY_COLUMNS",
    "LOST_AFTER_DOWN_S",
    "VerdictHistory",
    "VerdictState",
    "VerdictView",
    "current_forecast",
    "prime_latency_quantiles",
    "project_racks_together",
    "verdict_tick",
]

__getattr__ = lazy_names(__name__, _LAZY)
