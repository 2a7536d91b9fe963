"""Alert bookkeeping: edge-triggered conditions and one-off events, newest first, bounded."""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Alert:
    """Something the engineer should see, stamped with run time ``t`` (s)."""

    t: float
    node: str | None
    kind: str  # down, stale, up, finished, throttle, straggler, sla_ttft, sla_tpot, warning, error
    message: str
    severity: str = "warning"  # info | warning | critical
    active: bool = True


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

    def _append(self, alert: Alert) -> None:
        self.log.append(alert)
        self.total += 1

    def since(self, total: int) -> tuple[Alert, ...]:
        """The alerts appended after the first ``total`` ever appended, oldest first (those still in the
        bounded log: more than its size at once keeps the newest)."""
        new = min(self.total - total, len(self.log))
        if new <= 0:
            return ()
        return tuple(self.log[i] for i in range(len(self.log) - new, len(self.log)))

    def newest_first(self, limit: int | None = None) -> tuple[Alert, ...]:
        items = list(self.log)[::-1]
        return tuple(items if limit is None else items[:limit])

    def active_newest_first(self) -> tuple[Alert, ...]:
        return tuple(sorted(self.active.values(), key=lambda a: a.t, reverse=True))


@dataclass(frozen=True, slots=True)
class AlertSpan:
    """A condition alert from when it started to when it cleared (``end`` None: still active at the
    end), or a one-off event (``end == start``). Times in seconds since run start."""

    node: str | None
    kind: str
    start: float
    end: float | None
    message: str
    severity: str

    @property
    def instant(self) -> bool:
        return self.end == self.start


def alert_spans(alerts_oldest_first: Sequence[Alert]) -> tuple[AlertSpan, ...]:
    """Pairs each condition's start with its clearing; one-off events become instant spans."""
    open_spans: dict[tuple[str | None, str], Alert] = {}
    spans: list[AlertSpan] = []
    for alert in alerts_oldest_first:
        key = (alert.node, alert.kind)
        if alert.active:
            open_spans[key] = alert
        elif key in open_spans:
            start = open_spans.pop(key)
            spans.append(AlertSpan(start.node, start.kind, start.t, alert.t, start.message, start.severity))
        else:
            spans.append(AlertSpan(alert.node, alert.kind, alert.t, alert.t, alert.message, alert.severity))
    spans.extend(AlertSpan(a.node, a.kind, a.t, None, a.message, a.severity) for a in open_spans.values())
    return tuple(sorted(spans, key=lambda s: s.start))
