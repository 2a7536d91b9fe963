"""Fixtures for live collection: loopback sshd nodes (module-scoped) and their healthy state."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from live_support import N_NODES
from sshd_cluster import LoopbackCluster, missing_binaries

from tokenwatch.base.wakeup_batching import new_event_loop


def pytest_asyncio_loop_factories() -> Mapping[str, Any]:
    """The live tests run on the loop a headless watch runs on: once every node was tried, its wake-ups
    are spaced (tokenwatch.base.wakeup_batching), so a node that drops, a refusal or a stall is seen
    through the same loop as in a watch."""
    return {"watch_loop": new_event_loop}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoopbackCluster]:
    reason = missing_binaries()
    if reason:
        pytest.skip(reason)
    c = LoopbackCluster(tmp_path_factory.mktemp("nodes"), N_NODES)
    c.start()
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture
def healthy(cluster: LoopbackCluster) -> Iterator[LoopbackCluster]:
    """The cluster with every node running and no fault switched on, before and after the test."""

    def heal() -> None:
        for node in cluster.nodes:
            for name in ("stall", "fail", "lost", "garbage"):
                (node.control / name).unlink(missing_ok=True)
            if not node.running:
                node.start()

    heal()
    yield cluster
    heal()
