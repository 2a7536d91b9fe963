"""``--notify [KIND=]URL`` or ``--notify FILE.yaml`` (repeatable), joined to a watch config's ``notify:``."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tokenwatch.cli.usage import UsageError
from tokenwatch.inputs.notify_config import NotifyConfig, load_notify_file, receiver_from_arg


def notify_from_args(values: Sequence[str] | None, base: NotifyConfig | None = None) -> NotifyConfig | None:
    """``base`` (a watch config's section) with the receivers ``--notify`` adds. A notify file brings
    its filters too (the first such file's, where ``base`` has none)."""
    config = base
    extra = []
    for value in values or ():
        if value.endswith((".yaml", ".yml")) and Path(value).is_file():
            loaded = load_notify_file(value)
            config = loaded if config is None else config.with_receivers(loaded.receivers)
        else:
            extra.append(receiver_from_arg(value))
    if extra:
        config = (config or NotifyConfig()).with_receivers(tuple(extra))
    if config is not None and not config.receivers:
        raise UsageError(
            "notify: no receiver: give one (alertmanager, webhook, slack or command) in the notify section "
            "or with --notify [KIND=]URL"
        )
    return config
