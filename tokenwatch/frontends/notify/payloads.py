"""The bodies each receiver gets: Alertmanager's API v2 alert list, a webhook's JSON, Slack's ``{"text"}``.

Webhooks, Slack and commands get one message per group: notifications of one alert (say, node stale) and
state (firing or resolved) that arrive together are one message ("12 nodes stale: node01, node02, ..."),
not twelve. Alertmanager gets each alert on its own (it groups by its own routes) in one POST.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Sequence
from dataclasses import dataclass

from tokenwatch.base.formatting import printable
from tokenwatch.frontends.notify.notification import SEVERITY_RANK, Notification

# How a group of one core kind reads: "12 nodes stale", "3 stragglers".
_PLURALS: dict[str, str] = {
    "stale": "nodes stale",
    "down": "nodes down",
    "straggler": "stragglers",
    "throttle": "nodes throttling",
    "cause": "straggler causes found",
    "power_limit": "power-limit changes",
    "finished": "nodes finished",
}
_NAMES_SHOWN = 8
# Set by `tokenwatch serve` for the run it starts: the pages' address, without the start's token.
SERVE_URL_VARIABLE = "TOKENWATCH_SERVE_URL"


def dashboard_url() -> str:
    """The dashboard's pages when the run is shown by ``serve`` (empty otherwise)."""
    url = os.environ.get(SERVE_URL_VARIABLE, "")
    return url if url.startswith(("http://", "https://")) and "token=" not in url else ""


# An active alert Alertmanager has not heard again within this many re-sends expires by itself (a
# tokenwatch that died leaves nothing firing for ever).
EXPIRE_AFTER_RESENDS = 4


@dataclass(frozen=True, slots=True)
class Group:
    """Notifications sent as one message (one or more of one alert and state)."""

    notes: tuple[Notification, ...]

    @property
    def first(self) -> Notification:
        return self.notes[0]

    @property
    def text(self) -> str:
        """The message's sentence: the alert's own for one, a count and the nodes for several."""
        first = self.first
        if len(self.notes) == 1:
            return first.message
        core_kind = first.key.rsplit("/", 1)[-1]
        what = _PLURALS.get(core_kind, f"{first.alertname} alerts")
        if not first.firing:
            what += ", cleared"
        names = [n.node or n.rack for n in self.notes]
        shown = ", ".join(names[:_NAMES_SHOWN]) + (", ..." if len(names) > _NAMES_SHOWN else "")
        return f"{len(self.notes)} {what}: {shown} (first: {first.message})"

    def to_json(self) -> dict[str, object]:
        """The webhook body and a command's stdin: the group's fields and each notification's."""
        first = self.first
        severity = max((n.severity for n in self.notes), key=lambda s: SEVERITY_RANK.get(s, 1))
        racks = sorted({n.rack for n in self.notes})
        return {
            "version": 1,
            **first.to_json(),
            "severity": severity,
            "rack": racks[0] if len(racks) == 1 else ",".join(racks),
            "node": first.node if len(self.notes) == 1 else "",
            "message": self.text,
            "count": len(self.notes),
            "alerts": [n.to_json() for n in self.notes],
            **({"dashboard": url} if (url := dashboard_url()) else {}),
        }

    def slack_text(self) -> str:
        first = self.first
        state = "" if first.firing else "resolved: "
        where = f"{first.run}" + (f" / {first.rack}" if first.rack and first.rack != first.run else "")
        text = printable(f"[{first.severity.upper()}] {where}: {state}{self.text}")
        text += f"\nverdict: {printable(first.reason)}" if first.reason else ""
        return text + (f"\ndashboard: {url}" if (url := dashboard_url()) else "")


def grouped(notes: Sequence[Notification]) -> list[Group]:
    """``notes`` in groups of one alert and state, in the order each group first appears. A group never
    holds one condition twice: a node that went stale, recovered and went stale again within one batch
    is two groups' worth, in order, not one message that loses the recovery in between."""
    open_groups: dict[tuple[str, str, bool], list[Notification]] = {}
    groups: list[list[Notification]] = []
    for note in notes:
        core_kind = note.key.rsplit("/", 1)[-1]
        kind = (note.alertname, core_kind, note.firing)
        members = open_groups.get(kind)
        if members is None or any(m.key == note.key for m in members):
            members = open_groups[kind] = []
            groups.append(members)
        members.append(note)
    return [Group(tuple(members)) for members in groups]


def rfc3339(epoch_s: float) -> str:
    return (
        dt.datetime.fromtimestamp(epoch_s, dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    )


def alertmanager_alert(
    note: Notification, starts_epoch: float, now_epoch: float, resend_s: float
) -> dict[str, object]:
    """One alert of Alertmanager's API v2: labels (empty ones left out, as Prometheus treats an empty
    label as absent), the sentence and the verdict's reason as annotations; a firing alert ends
    ``EXPIRE_AFTER_RESENDS`` re-sends from now unless heard again, a resolved one ends now."""
    ends = now_epoch if not note.firing else now_epoch + EXPIRE_AFTER_RESENDS * resend_s
    annotations = {"summary": note.message, "run_time_s": f"{note.t:.1f}"}
    if note.reason:
        annotations["verdict"] = note.reason
    if url := dashboard_url():
        annotations["dashboard"] = url
    return {
        "labels": {k: v for k, v in note.labels.items() if v},
        "annotations": annotations,
        "startsAt": rfc3339(min(starts_epoch, ends)),
        "endsAt": rfc3339(ends),
    }
