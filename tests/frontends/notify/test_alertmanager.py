"""tokenwatch's alerts in the real Alertmanager (Debian's prometheus-alertmanager, API v2), which routes
them to a local webhook: labels and annotations as documented, resolved when the condition clears, heard
again before they expire while active, and resolved when the run that raised them stops."""

from __future__ import annotations

import datetime as dt
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import PATIENCE_S, start_tokenwatch, wait_until
from tests.frontends.notify.notify_support import ALERTMANAGER, Alertmanager, alertmanager, receiving

pytestmark = pytest.mark.skipif(
    ALERTMANAGER is None, reason="alertmanager is not installed (apt-get install prometheus-alertmanager)"
)


def node_down(am: Alertmanager, node: str) -> list[dict[str, Any]]:
    return [
        a
        for a in am.alerts()
        if a["labels"].get("alertname") == "TokenwatchNodeDown" and a["labels"].get("node") == node
    ]


def routed(hook_bodies: list[Any], status: str, node: str) -> list[dict[str, Any]]:
    """The alerts Alertmanager's webhook delivered with ``status`` for ``node``."""
    return [
        a
        for body in hook_bodies
        for a in body["alerts"]
        if a["status"] == status
        and a["labels"].get("alertname") == "TokenwatchNodeDown"
        and a["labels"].get("node") == node
    ]


def stop(proc: Any) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.communicate(timeout=PATIENCE_S)


def test_a_node_down_fires_in_alertmanager_with_its_labels_and_resolves_when_it_is_back(
    tmp_path: Path,
) -> None:
    config = tmp_path / "notify.yaml"
    config.write_text("notify:\n  hold: 0s\n  group_wait: 0s\n  kinds: [node-down, run-end]\n")
    with receiving() as hook, alertmanager(tmp_path, hook.url) as am:
        proc = start_tokenwatch(
            "sim",
            "--speed",
            "30",
            "--headless",
            "--duration",
            "10m",
            "--faults",
            "node07:down@1m-4m",
            "--notify",
            f"alertmanager={am.url}",
            "--notify",
            str(config),
        )
        try:
            wait_until(lambda: bool(node_down(am, "node07")), "node07's alert active in Alertmanager")
            (alert,) = node_down(am, "node07")
            wait_until(
                lambda: bool(routed(hook.bodies("/am"), "resolved", "node07")), "node07's resolution routed"
            )
            _, err = proc.communicate(timeout=PATIENCE_S * 2)
        finally:
            stop(proc)
        assert proc.returncode == 0, err
        firing = routed(hook.bodies("/am"), "firing", "node07")
    labels = alert["labels"]
    run = "gb300-nvl72 offline (simulated)"
    assert labels == {
        "alertname": "TokenwatchNodeDown",
        "run": run,
        "rack": run,
        "node": "node07",
        "severity": "critical",
        "rule": "down",
    }
    assert alert["annotations"]["summary"] == "node07 down: simulated fault: node down"
    # the verdict's reason at that moment: projected, or already decided (a short run's samples fall short)
    assert alert["annotations"]["verdict"].startswith(("projected ", "DECIDED INVALID: cannot be VALID"))
    assert alert["status"]["state"] == "active"
    assert firing, "Alertmanager routed the firing alert to its webhook"
    assert firing[0]["annotations"]["summary"] == "node07 down: simulated fault: node down"


def test_an_active_alert_is_sent_again_before_it_expires_and_resolves_when_the_run_stops(
    tmp_path: Path,
) -> None:
    config = tmp_path / "notify.yaml"
    config.write_text("notify:\n  resend: 1s\n  group_wait: 0s\n  kinds: [node-down]\n")
    with receiving() as hook, alertmanager(tmp_path, hook.url) as am:
        proc = start_tokenwatch(
            "sim",
            "--speed",
            "5",
            "--headless",
            "--duration",
            "60m",
            "--faults",
            "node07:down@20s",
            "--notify",
            f"alertmanager={am.url}",
            "--notify",
            str(config),
        )
        try:
            wait_until(lambda: bool(node_down(am, "node07")), "node07's alert active in Alertmanager")
            first_ends = _when(node_down(am, "node07")[0]["endsAt"])
            # Sent with an end four re-sends ahead; heard again, its end moves on past the first one.
            wait_until(
                lambda: any(_when(a["endsAt"]) > first_ends for a in node_down(am, "node07")),
                "the alert heard again, its end moved on",
            )
            proc.send_signal(signal.SIGTERM)  # the run stops (interrupted): what it raised ends with it
            _, err = proc.communicate(timeout=PATIENCE_S * 2)
        finally:
            stop(proc)
        assert proc.returncode == 130, err
        wait_until(lambda: not node_down(am, "node07"), "node07's alert resolved in Alertmanager")
        wait_until(lambda: bool(routed(hook.bodies("/am"), "resolved", "node07")), "the resolution routed")


def _when(stamp: str) -> dt.datetime:
    return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
