"""With the dashboard: notifications go out while it runs, and what is queued when it quits still goes out
after (the screen's event loop is gone; a fresh one finishes), with no traceback or stray warning."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import PATIENCE_S, dashboard_in_pty, wait_until
from tests.frontends.notify.notify_support import receiving

pytestmark = pytest.mark.timeout(180)


def test_the_dashboard_notifies_while_it_runs_and_exits_cleanly(tmp_path: Path) -> None:
    config = tmp_path / "notify.yaml"
    config.write_text("notify:\n  kinds: [node-down, run-end]\n  group_wait: 0s\n")
    args = ("sim", "--speed", "60", "--duration", "10m", "--faults", "node07:down@1m")
    with (
        receiving() as hook,
        dashboard_in_pty((*args, "--notify", hook.url, "--notify", str(config)), tmp_path) as dash,
    ):
        wait_until(
            lambda: any(b["alertname"] == "TokenwatchNodeDown" for b in hook.bodies()),
            "node07's alert delivered while the dashboard runs",
        )
        os.write(dash.master, b"q")  # quitting sim interrupts the run: its end is the last message
        status = dash.proc.wait(timeout=PATIENCE_S)
        names = [b["alertname"] for b in hook.bodies()]
    screen = dash.screen.decode(errors="replace")
    assert status == 130, screen[-2000:]
    assert names == ["TokenwatchNodeDown", "TokenwatchRunEnded"]
    assert "Traceback" not in screen
    assert "Unclosed" not in screen  # no HTTP session outlived its loop
    assert "was destroyed" not in screen  # no sending task left behind on the screen's loop
