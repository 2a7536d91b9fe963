"""Prometheus /metrics for sim, watch and replay: rack aggregates, nodes, GPUs and latency histograms."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from tokenwatch.frontends.metrics.server import PUBLISH_EVERY_S, MetricsServer

if TYPE_CHECKING:
    from tokenwatch.core.rack import RackCore

__all__ = ["MetricsServer", "serve_metrics"]


def serve_metrics(
    core: RackCore | Callable[[], RackCore],
    port: int,
    *,
    host: str = "127.0.0.1",
    publish_every_s: float = PUBLISH_EVERY_S,
) -> MetricsServer:
    """Serve ``core`` on http://host:port/metrics from a process of its own; ``.close()`` stops it.

    Called from inside a running event loop, it attaches to it at once; otherwise call
    ``attach_loop(loop)`` once the loop that feeds the core runs (the CLI does).
    """
    import asyncio
    import contextlib

    server = MetricsServer(core, port, host=host, publish_every_s=publish_every_s)
    with contextlib.suppress(RuntimeError):  # no running loop here: the caller attaches one later
        server.attach_loop(asyncio.get_running_loop())
    return server
