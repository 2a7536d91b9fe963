"""Which notifications go out: the configured kinds and minimum severity, and no page twice for a flap.

A condition that clears and comes back within ``hold_s`` of run time was never cleared: its clearing is
held back that long and dropped if the condition returns, so a node flapping between up and stale pages
once, and Alertmanager never sees it resolve in between. Held clearings go out once their hold has
passed, or at the run's end.
"""

from __future__ import annotations

from tokenwatch.frontends.notify.notification import SEVERITY_RANK, Notification
from tokenwatch.inputs.notify_config import NotifyConfig


class NotifyPolicy:
    def __init__(self, config: NotifyConfig) -> None:
        self.kinds = config.wanted_kinds
        self.min_rank = SEVERITY_RANK[config.min_severity]
        self.hold_s = config.hold_s
        self._firing: set[str] = set()  # conditions whose start went out and whose clearing did not
        self._held: dict[str, Notification] = {}  # clearings waiting out the hold, by key
        self.suppressed_flaps = 0  # conditions that came back within the hold (one page, not two)

    def wanted(self, note: Notification) -> bool:
        """The run's end goes out whatever the minimum severity: it is the message everyone waits for."""
        if note.kind not in self.kinds:
            return False
        return note.kind == "run-end" or SEVERITY_RANK.get(note.severity, 1) >= self.min_rank

    def admit(self, note: Notification) -> list[Notification]:
        """What to send now for ``note`` (nothing, or ``note``)."""
        if not self.wanted(note):
            return []
        if note.instant:
            return [note]
        if note.firing:
            if self._held.pop(note.key, None) is not None:
                self.suppressed_flaps += 1
                return []  # back within the hold: still the first page's condition
            if note.key in self._firing:
                return []
            self._firing.add(note.key)
            return [note]
        if note.key not in self._firing:
            return []  # its start was never sent
        if self.hold_s <= 0:
            self._firing.discard(note.key)
            return [note]
        self._held[note.key] = note
        return []

    def due(self, now_t: float) -> list[Notification]:
        """Held clearings whose hold has passed by run time ``now_t``."""
        if not self._held:
            return []
        ready = [n for n in self._held.values() if now_t - n.t >= self.hold_s]
        for note in ready:
            del self._held[note.key]
            self._firing.discard(note.key)
        return ready

    def release_all(self) -> list[Notification]:
        """Every held clearing (the run has ended: nothing can come back)."""
        ready = list(self._held.values())
        self._held.clear()
        for note in ready:
            self._firing.discard(note.key)
        return ready
