"""Alert bookkeeping: edge-triggered conditions and one-off events, newest first, bounded."""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable

from tokenwatch.core.snapshot import Alert


class AlertLog:
    """Turns conditions that hold over time into one alert when they start and one when they end.

    ``condition`` is called every tick with the current truth of (node, kind); only the edges
    are logged, so a straggler that stays slow for an hour is one line, not 3,600.
    """

    def __init__(self, size: int = 500) -> None:
        self.log: deque[Alert] = deque(maxlen=size)
        self.active: dict[Hashable, Alert] = {}
        self.total = 0

    def event(self, t: float, node: str | None, kind: str, message: str, severity: str = "warning") -> None:
        self._append(Alert(t, node, kind, message, severity, active=False))

    def condition(
        self,
        t: float,
        node: str | None,
        kind: str,
        holds: bool,
        message: str = "",
        severity: str = "warning",
        cleared_message: str = "",
    ) -> None:
        key = (node, kind)
        if holds and key not in self.active:
            alert = Alert(t, node, kind, message, severity, active=True)
            self.active[key] = alert
            self._append(alert)
        elif not holds and key in self.active:
            del self.active[key]
            self._append(Alert(t, node, kind, cleared_message or f"{kind} cleared", "info", active=False))

    def is_active(self, node: str | None, kind: str) -> bool:
        return (node, kind) in self.active

    def _append(self, alert: Alert) -> None:
        self.log.append(alert)
        self.total += 1

    def newest_first(self, limit: int | None = None) -> tuple[Alert, ...]:
        items = list(self.log)[::-1]
        return tuple(items if limit is None else items[:limit])

    def active_newest_first(self) -> tuple[Alert, ...]:
        return tuple(sorted(self.active.values(), key=lambda a: a.t, reverse=True))
