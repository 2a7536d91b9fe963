"""The ``watch`` config: YAML into frozen dataclasses, checked before anything connects.

Every problem is one line naming the file, line and key (``rack.yaml:14: ssh.max_concurrent: ...``).
Passwords have no place in it: SSH authenticates with keys or the agent, and a URL carrying
``user:password@`` is refused, so neither the config nor a recording of the run holds a secret.

The dataclasses are :mod:`._schema`'s; :mod:`._load` reads a file into them and refuses secrets; the
checks are :mod:`._checks`' (the run, nodes, ssh, fleet, alerts) and :mod:`._source_checks`' (the GPU
source and each progress source).
"""

from __future__ import annotations

from tokenwatch.inputs.config._load import is_rules_file, load_watch_config
from tokenwatch.inputs.config._schema import (
    DEFAULT_DCGM_URL,
    AlertsConfig,
    FleetConfig,
    GpuConfig,
    GpuSourceKind,
    HostEntry,
    NodesConfig,
    ProgressKind,
    ProgressSourceConfig,
    RunConfig,
    SshConfig,
    WatchConfig,
    rack_label,
)

__all__ = [
    "DEFAULT_DCGM_URL",
    "AlertsConfig",
    "FleetConfig",
    "GpuConfig",
    "GpuSourceKind",
    "HostEntry",
    "NodesConfig",
    "ProgressKind",
    "ProgressSourceConfig",
    "RunConfig",
    "SshConfig",
    "WatchConfig",
    "is_rules_file",
    "load_watch_config",
    "rack_label",
]
