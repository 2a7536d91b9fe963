"""The nodes a watch run covers, and per-node expansion of ``{name}`` / ``{host}`` in paths and URLs."""

from __future__ import annotations

import socket
from dataclasses import dataclass

from tokenwatch.inputs.config import HostEntry, WatchConfig
from tokenwatch.inputs.hostlist import expand_hostlist, slurm_job_hosts


@dataclass(frozen=True, slots=True)
class NodeTarget:
    """``name`` labels the node everywhere; ``host``/``port``/``user`` are what SSH dials (None: from
    ~/.ssh/config or the defaults). A local target is this machine itself."""

    name: str
    host: str
    port: int | None = None
    user: str | None = None
    local: bool = False

    def expand(self, template: str) -> str:
        """``{name}`` and ``{host}`` filled in; every other brace is left alone (regexes, JSON)."""
        return template.replace("{name}", self.name).replace("{host}", self.host)


def local_target() -> NodeTarget:
    return NodeTarget(name=socket.gethostname().split(".")[0] or "localhost", host="localhost", local=True)


def resolve_targets(config: WatchConfig, slurm_job: str | None = None) -> list[NodeTarget]:
    """The run's nodes in order. ``slurm_job`` (``--slurm-job``) overrides the config's hosts."""
    nodes = config.nodes
    if slurm_job is None and config.local:
        return [local_target()]
    assert nodes is not None or slurm_job is not None
    user = config.ssh.user
    job = slurm_job or (nodes.slurm_job if nodes else None)
    if job is not None:
        return [NodeTarget(name, name, user=user) for name in slurm_job_hosts(job)]
    assert nodes is not None
    hosts = nodes.hosts
    if isinstance(hosts, str):
        return [NodeTarget(name, name, user=user) for name in expand_hostlist(hosts)]
    targets = []
    for entry in hosts or []:
        if isinstance(entry, HostEntry):
            targets.append(NodeTarget(entry.name, entry.host or entry.name, entry.port, entry.user or user))
        else:
            targets.append(NodeTarget(entry, entry, user=user))
    return targets


_RACK_SEPARATORS = "-_."


def rack_name(config: WatchConfig) -> str | None:
    """The rack the watched nodes make up, for the ``rack`` label on /metrics: ``nodes.rack``, else what
    a one-rack host range names (``rack07-node[01-18]`` -> ``rack07``: the text before the range, up to
    its last ``-``, ``_`` or ``.``), else None (the run's name is used)."""
    nodes = config.nodes
    if nodes is None:
        return None
    if nodes.rack is not None:
        return nodes.rack
    hosts = nodes.hosts
    if not isinstance(hosts, str) or "," in hosts or hosts.count("[") != 1:
        return None
    head = hosts.split("[", 1)[0]
    cut = max(head.rfind(sep) for sep in _RACK_SEPARATORS)
    return head[:cut] if cut > 0 else None
