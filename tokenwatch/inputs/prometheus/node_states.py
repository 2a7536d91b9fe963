"""Each fleet node's state as its own rack's watch judged it (``tokenwatch_node_status``), for the
drill-down: a node down in its rack is down on the rack's screen too, not a slow node with its last GPU
readings, and the board's "nodes up" (the sum of ``tokenwatch_node_up``, the same judgement) and the
drill-down's agree. A state is sent when it changes, so a fleet of 1,000 nodes sends nothing on a
quiet round."""

from __future__ import annotations

from collections.abc import Sequence

from tokenwatch.base.events import NODE_STATES, NodeStatus
from tokenwatch.inputs.prometheus.api import Sample


class NodeStates:
    """The last state sent per node (``nodes``: the run's node names, ``node_label`` the joined label
    that names one)."""

    def __init__(self, nodes: Sequence[str], node_label: str) -> None:
        self.nodes = frozenset(nodes)
        self.node_label = node_label
        self.sent: dict[str, str] = {}

    def events(self, t: float, samples: list[Sample]) -> list[NodeStatus]:
        out = []
        for labels, _ in samples:
            node, state = labels.get(self.node_label, ""), labels.get("status", "")
            if node not in self.nodes or state not in NODE_STATES or self.sent.get(node) == state:
                continue
            self.sent[node] = state
            reason = "" if state in ("up", "finished") else f"{state} in its rack's own watch"
            out.append(NodeStatus(t, node, state, reason))
        return out
