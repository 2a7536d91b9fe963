"""The session's notifier: the core's new alerts after each event, through the policy, to the courier.

It reads only what the core already raised (:meth:`RackCore.alerts_since`), so what is pushed is what
the screen, the headless lines and the JSONL say. Per event it costs one comparison of two counts; the
work happens only when an alert was raised. A replay's seek swaps the core: the alerts of the new core
up to there are not news and are skipped.
"""

from __future__ import annotations

from collections.abc import Callable

from tokenwatch.base.events import Event, Notice, RunEnded
from tokenwatch.base.formatting import verdict_word
from tokenwatch.core import RackCore
from tokenwatch.core.alerts import Alert
from tokenwatch.core.fleet.rack_groups import rack_groups
from tokenwatch.frontends.notify.delivery import EXIT_WAIT_S, Courier
from tokenwatch.frontends.notify.notification import Notification, RunLabels, from_alert, run_end
from tokenwatch.frontends.notify.policy import NotifyPolicy
from tokenwatch.frontends.notify.receivers import runtime_receivers
from tokenwatch.inputs.notify_config import NotifyConfig
from tokenwatch.session import Session

# The verdict's alerts, whose sentence is the verdict's reason for every notification that follows.
_VERDICT_KINDS = ("verdict_invalid", "verdict_decided", "verdict")
NOTIFY_SOURCE = "notify"


class Notifier:
    def __init__(self, config: NotifyConfig, courier: Courier) -> None:
        self.config = config
        self.courier = courier
        self.policy = NotifyPolicy(config)
        self._core: RackCore | None = None
        self._seen = 0
        self._labels: RunLabels | None = None
        self._open: dict[tuple[str | None, str], Alert] = {}  # conditions started, not yet cleared
        self._reason = ""
        self._ended = False
        self.sent = 0  # notifications handed to the courier
        self.closed = False

    def attach(self, session: Session) -> None:
        self.follow(session.core)
        session.on_event(lambda event: self.observe(session.core, event))

    def follow(self, core: RackCore) -> None:
        """Notify what ``core`` raises from now on (every alert of a run it has not started yet)."""
        self._core, self._seen = core, core.alerts_raised
        self._open = {(a.node, a.kind): a for a in core.active_alerts()}

    def observe(self, core: RackCore, event: Event) -> None:
        """After ``event`` was ingested by ``core``."""
        if core is not self._core:
            self.follow(core)  # a new core (a replay's seek): what it holds already is not news
        if core.alerts_raised != self._seen:
            self._take(core)
        elif self.policy.hold_s > 0:
            self._send(self.policy.due(core.now))
        if isinstance(event, RunEnded) and not self._ended and core.started:
            self._end(core, event)

    def _take(self, core: RackCore) -> None:
        new = core.alerts_since(self._seen)
        self._seen = core.alerts_raised
        labels = self._run_labels(core)
        out: list[Notification] = []
        for alert in new:
            key = (alert.node, alert.kind)
            cleared = None
            if alert.active:
                self._open[key] = alert
            else:
                cleared = self._open.pop(key, None)
            if alert.kind in _VERDICT_KINDS:
                self._reason = alert.message
            out += self.policy.admit(from_alert(alert, labels, self._reason, cleared))
        out += self.policy.due(core.now)
        self._send(out)

    def _end(self, core: RackCore, event: RunEnded) -> None:
        self._ended = True
        snap = core.snapshot()
        verdict = snap.summary.verdict if snap.summary is not None else None
        valid = verdict.valid if verdict is not None else None
        failing = [c.name for c in verdict.checks if c.ok is False] if verdict is not None else []
        reason = f"FINAL {verdict_word(valid)}" + (f": {', '.join(failing)} failed" if failing else "")
        interrupted = event.reason != "completed"
        severity = "critical" if valid is False else "warning" if interrupted else "info"
        message = snap.banner or f"run ended: {event.reason}"
        note = run_end(self._run_labels(core), event.t, message, reason, severity)
        self._send([*self.policy.release_all(), *self.policy.admit(note)])

    def _send(self, notes: list[Notification]) -> None:
        if notes:
            self.sent += len(notes)
            self.courier.put(notes)

    def _run_labels(self, core: RackCore) -> RunLabels:
        if self._labels is None:
            run = core.run
            assert run is not None
            rack = run.meta.get("rack") if run.meta else None
            rack_name = rack if isinstance(rack, str) and rack else run.name
            node_racks: dict[str, str] = {}
            if core.racks:  # a fleet: each node's own rack
                groups = rack_groups(run)
                for r, name in enumerate(groups.names):
                    for node in run.nodes[groups.nodes(r)]:
                        node_racks[node] = name
            self._labels = RunLabels(run.name, rack_name, node_racks)
        return self._labels

    async def close(self, wait_s: float = EXIT_WAIT_S) -> None:
        """Held clearings and what is queued go out (bounded), Alertmanager's firing alerts resolve."""
        self._send(self.policy.release_all())
        await self.courier.close(wait_s)
        self.closed = True


def start_notifier(
    config: NotifyConfig, session: Session, warn: Callable[[str], None], *, on_screen: bool
) -> Notifier:
    """A notifier on ``session``; a receiver's outage is one ``warn`` line and, with ``on_screen``, one
    alert on the dashboard (a notice in the core, not in the recording: it is not a fact of the run)."""

    def warned(message: str) -> None:
        core = session.core
        if on_screen and core.started:
            core.ingest(Notice(core.now, "warning", message, source=NOTIFY_SOURCE))
        else:
            warn(message)

    notifier = Notifier(config, Courier(config, runtime_receivers(config), warned))
    notifier.attach(session)
    return notifier
