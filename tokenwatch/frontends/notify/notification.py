"""What goes out: one :class:`Notification` per core alert that matters, named as Alertmanager names it.

The core already raises every alert (edge-triggered: one when a condition starts, one when it clears);
this turns each into a notification with the labels a receiver routes on (``alertname``, ``run``,
``rack``, ``node``, ``severity``, ``rule``) and the sentence the screen shows. Which kind an alert is
(verdict, node-down, ...) decides whether it is sent at all (``notify.kinds``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from tokenwatch.core.alerts import Alert

# Core alert kind -> (notify kind, Alertmanager alertname). Prefixed kinds (margin_*, setting_*, sla_*)
# are looked up by their prefix; anything else is a notice (a skipped line, a reconnect, an error).
_KINDS: dict[str, tuple[str, str]] = {
    "verdict_invalid": ("verdict", "TokenwatchProjectedInvalid"),
    "verdict_decided": ("verdict", "TokenwatchDecidedInvalid"),
    "verdict": ("verdict", "TokenwatchProjectedValid"),
    "margin_": ("verdict", "TokenwatchVerdictMargin"),
    "setting_": ("verdict", "TokenwatchLoadgenSetting"),
    "down": ("node-down", "TokenwatchNodeDown"),
    "stale": ("node-down", "TokenwatchNodeStale"),
    "straggler": ("straggler", "TokenwatchStraggler"),
    "cause": ("cause", "TokenwatchStragglerCause"),
    "power_limit": ("power-limit", "TokenwatchPowerLimit"),
    "throttle": ("throttle", "TokenwatchThrottling"),
    "sla_": ("sla", "TokenwatchSlaBreach"),
    "finished": ("notice", "TokenwatchNodeFinished"),
}
_PREFIXES = tuple(k for k in _KINDS if k.endswith("_"))
RUN_END_ALERTNAME = "TokenwatchRunEnded"
SEVERITY_RANK: Mapping[str, int] = {"info": 0, "warning": 1, "critical": 2}


@dataclass(frozen=True, slots=True)
class Notification:
    """One alert as receivers get it.

    ``key`` names the condition (``rack/node/core kind``): its start and its clearing share it, and a
    flapping condition is recognised by it. ``firing`` False is the clearing (Alertmanager: resolved).
    ``t`` is run time (s); ``message`` the sentence on screen; ``reason`` the verdict's at that moment.
    ``instant``: a one-off event (a cause found, a power-limit change), which never clears.
    """

    key: str
    kind: str  # notify kind: verdict, node-down, straggler, cause, power-limit, run-end, ...
    alertname: str
    rule: str
    run: str
    rack: str
    node: str
    severity: str
    message: str
    reason: str
    t: float
    firing: bool
    instant: bool

    @property
    def labels(self) -> dict[str, str]:
        """Alertmanager's identity of the alert (``node`` empty for rack-wide ones)."""
        return {
            "alertname": self.alertname,
            "run": self.run,
            "rack": self.rack,
            "node": self.node,
            "severity": self.severity,
            "rule": self.rule,
        }

    def to_json(self) -> dict[str, object]:
        """The fields every receiver gets (webhook body, command stdin)."""
        return {
            **self.labels,
            "kind": self.kind,
            "status": "firing" if self.firing else "resolved",
            "message": self.message,
            "reason": self.reason,
            "run_time_s": round(self.t, 3),
        }


def kind_of(core_kind: str) -> tuple[str, str, str]:
    """(notify kind, alertname, rule) of a core alert kind. ``rule`` is what the alert is about: the
    MLPerf rule of a margin or setting alert, the metric of an SLA breach, else the core's kind."""
    if core_kind in _KINDS:
        kind, name = _KINDS[core_kind]
        return kind, name, core_kind
    for prefix in _PREFIXES:
        if core_kind.startswith(prefix):
            kind, name = _KINDS[prefix]
            return kind, name, core_kind.removeprefix(prefix)
    return "notice", "TokenwatchNotice", core_kind


@dataclass(frozen=True, slots=True)
class RunLabels:
    """What every notification of a run carries: the run's name and the rack of each node."""

    run: str
    rack: str  # the run's rack (a fleet: the whole fleet's name, for fleet-wide alerts)
    node_racks: Mapping[str, str]

    def rack_of(self, node: str | None) -> str:
        return self.rack if node is None else self.node_racks.get(node, self.rack)


def from_alert(alert: Alert, labels: RunLabels, reason: str, cleared: Alert | None = None) -> Notification:
    """The notification of ``alert``: a condition's start (``alert.active``), a one-off event, or, with
    ``cleared`` (the start it ends), a clearing, which keeps the condition's kind and severity (the core
    logs the clearing itself as info)."""
    start = cleared or alert
    kind, alertname, rule = kind_of(start.kind)
    rack = labels.rack_of(alert.node)
    node = alert.node or ""
    return Notification(
        key=f"{rack}/{node}/{start.kind}",
        kind=kind,
        alertname=alertname,
        rule=rule,
        run=labels.run,
        rack=rack,
        node=node,
        severity=start.severity,
        message=alert.message,
        reason=reason,
        t=alert.t,
        firing=cleared is None,
        instant=not alert.active and cleared is None,
    )


def run_end(labels: RunLabels, t: float, message: str, reason: str, severity: str) -> Notification:
    """The run's end: what happened and its final verdict (never clears: it is the last word)."""
    return Notification(
        key=f"{labels.rack}//run_end",
        kind="run-end",
        alertname=RUN_END_ALERTNAME,
        rule="run_end",
        run=labels.run,
        rack=labels.rack,
        node="",
        severity=severity,
        message=message,
        reason=reason,
        t=t,
        firing=True,
        instant=True,
    )
