"""The numpy core: events in, immutable snapshots out. Never imports Textual or Rich.

Front ends use :class:`RackCore` (the facade) and the immutable things it answers with.
"""

from tokenwatch.core._run_info import RunInfo
from tokenwatch.core.alerts import Alert
from tokenwatch.core.config import CoreConfig
from tokenwatch.core.node_spread import NodeSpread
from tokenwatch.core.rack import RackCore
from tokenwatch.core.snapshot import (
    Aggregate,
    GpuTable,
    LatencyStats,
    NodeTable,
    RackSnapshot,
)
from tokenwatch.core.summary import NodeResult, RunSummary, summarize_nodes

__all__ = [
    "Aggregate",
    "Alert",
    "CoreConfig",
    "GpuTable",
    "LatencyStats",
    "NodeResult",
    "NodeSpread",
    "NodeTable",
    "RackCore",
    "RackSnapshot",
    "RunInfo",
    "RunSummary",
    "summarize_nodes",
]
