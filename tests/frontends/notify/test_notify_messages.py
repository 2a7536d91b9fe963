"""What receivers are sent by a real run (``tokenwatch sim --notify``): the core's own alerts, labelled,
filtered, grouped and held back as configured, to a webhook, a Slack-compatible hook and a command."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import orjson

from tests.conftest import SAMPLE_RUNS, run_tokenwatch
from tests.frontends.notify.notify_support import receiving
from tokenwatch.core import RackCore
from tokenwatch.core.alerts import Alert
from tokenwatch.recording import read_events

RUN = ("sim", "--speed", "0", "--headless", "--duration", "20m")


def notify_file(tmp_path: Path, body: str, name: str = "notify.yaml") -> Path:
    path = tmp_path / name
    path.write_text("notify:\n" + body)
    return path


def core_alerts(recording: Path) -> tuple[str, tuple[Alert, ...]]:
    """The run's name and every alert its core raised, oldest first, from the recording alone."""
    events, warnings = read_events(recording)
    assert not warnings
    core = RackCore()
    for event in events:
        core.ingest(event)
    assert core.run is not None
    return core.run.name, core.history().alerts


def pushed_conditions(alerts: tuple[Alert, ...], kinds: set[str]) -> list[tuple[str, str, str]]:
    """(status, node, message) the receivers should get for condition alerts of ``kinds`` of warning
    severity or more: each start, and the clearing that ends it (paired by node and kind)."""
    started: dict[tuple[str | None, str], Alert] = {}
    out = []
    for alert in alerts:
        key = (alert.node, alert.kind)
        if alert.active and alert.kind in kinds and alert.severity != "info":
            started[key] = alert
            out.append(("firing", alert.node or "", alert.message))
        elif not alert.active and key in started:
            del started[key]
            out.append(("resolved", alert.node or "", alert.message))
    return out


def test_a_webhook_gets_each_alert_the_core_raised_with_its_labels_and_the_verdicts_reason(
    tmp_path: Path,
) -> None:
    config = notify_file(tmp_path, "  hold: 0s\n  group_wait: 0s\n")
    recording = tmp_path / "run.jsonl"
    with receiving() as hook:
        result = run_tokenwatch(
            *RUN,
            "--faults",
            "node07:down@5m-9m,node03:slow@3m-12m",
            "--record",
            str(recording),
            "--notify",
            f"{hook.url}/hook",
            "--notify",
            str(config),
        )
        assert result.returncode == 0, result.stderr
        bodies: list[dict[str, Any]] = hook.bodies("/hook")
    run_name, alerts = core_alerts(recording)
    # A message may group several alerts (those that arrived together): each is in its "alerts".
    conditions = [a for b in bodies if b["kind"] in ("node-down", "straggler") for a in b["alerts"]]
    expected = pushed_conditions(alerts, {"down", "straggler"})
    assert sorted((b["status"], b["node"], b["message"]) for b in conditions) == sorted(expected)
    assert ("firing", "node07", "node07 down: simulated fault: node down") in expected
    down = next(a for a in conditions if a["alertname"] == "TokenwatchNodeDown" and a["status"] == "firing")
    assert (down["node"], down["run"], down["rack"]) == ("node07", run_name, run_name)
    assert (down["severity"], down["rule"], down["kind"]) == ("critical", "down", "node-down")
    # The verdict's reason: the sentence of the latest verdict alert the core raised before it.
    at = next(i for i, a in enumerate(alerts) if a.kind == "down" and a.active)
    before = [a for a in alerts[:at] if a.kind.startswith("verdict")]
    assert before, "a verdict was projected before 05:00"
    assert down["reason"] == before[-1].message
    end = bodies[-1]
    assert end["alertname"] == "TokenwatchRunEnded"
    assert end["message"].startswith("ended: 18 of 18 nodes finished")
    assert not [b for b in bodies if b["severity"] == "info" and b["kind"] != "run-end"]  # min_severity


def test_twelve_nodes_going_stale_together_are_one_message_not_twelve(tmp_path: Path) -> None:
    stale = ",".join(f"node{n:02d}:stale@4m" for n in range(1, 13))
    config = notify_file(tmp_path, "  kinds: [node-down]\n  group_wait: 1s\n")
    with receiving() as hook:
        result = run_tokenwatch(
            *RUN, "--faults", stale, "--notify", f"{hook.url}/hook", "--notify", str(config)
        )
        assert result.returncode == 0, result.stderr
        bodies = hook.bodies()
    firing = [b for b in bodies if b["alertname"] == "TokenwatchNodeStale" and b["status"] == "firing"]
    assert len(firing) == 1, [b["message"] for b in firing]
    group = firing[0]
    assert group["count"] == 12
    assert group["message"].startswith("12 nodes stale: node01, node02")
    assert sorted(a["node"] for a in group["alerts"]) == [f"node{n:02d}" for n in range(1, 13)]


def test_a_flapping_node_pages_once_within_the_hold_and_twice_without_it(tmp_path: Path) -> None:
    flaps = "node05:stale@4m-5m,node05:stale@6m-7m"

    def stale_messages(hold: str) -> list[tuple[str, str]]:
        config = notify_file(
            tmp_path, f"  kinds: [node-down]\n  hold: {hold}\n  group_wait: 0s\n", f"{hold}.yaml"
        )
        with receiving() as hook:
            result = run_tokenwatch(
                *RUN, "--faults", flaps, "--notify", f"{hook.url}/hook", "--notify", str(config)
            )
            assert result.returncode == 0, result.stderr
            bodies = hook.bodies()
        return [
            (a["status"], a["node"])
            for b in bodies
            if b["alertname"] == "TokenwatchNodeStale"
            for a in b["alerts"]
        ]

    assert stale_messages("0s") == [("firing", "node05"), ("resolved", "node05")] * 2
    # Within a 5-minute hold the second stale spell is the first one going on: one page, one clearing
    # (held back its five minutes after the last clearing, 12:00 of run time, before the run's end).
    assert stale_messages("5m") == [("firing", "node05"), ("resolved", "node05")]


def test_min_severity_and_kinds_choose_what_goes_out(tmp_path: Path) -> None:
    config = notify_file(
        tmp_path, "  min_severity: critical\n  kinds: [node-down, run-end]\n  group_wait: 0s\n"
    )
    with receiving() as hook:
        result = run_tokenwatch(
            *RUN,
            "--faults",
            "node07:down@5m,node03:slow@3m-12m,node02:stale@8m",
            "--notify",
            f"{hook.url}/hook",
            "--notify",
            str(config),
        )
        assert result.returncode == 0, result.stderr
        names = [b["alertname"] for b in hook.bodies()]
    # node02's stale spell is a warning: below critical. The straggler is not a chosen kind.
    assert names == ["TokenwatchNodeDown", "TokenwatchRunEnded"]


def test_slack_gets_text_and_a_command_gets_the_json_on_stdin_with_its_own_argv(tmp_path: Path) -> None:
    script = tmp_path / "page-me.sh"
    out = tmp_path / "paged.jsonl"
    script.write_text(f'#!/bin/sh\necho "$@" >> {tmp_path}/argv.txt\ncat >> {out}\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    config = notify_file(
        tmp_path,
        "  kinds: [node-down, run-end]\n  group_wait: 0s\n"
        "  to:\n    - command: [./page-me.sh, --team, 'infra; rm -rf /']\n",
    )
    with receiving() as hook:
        result = run_tokenwatch(
            *RUN,
            "--faults",
            "node07:down@5m",
            "--notify",
            f"slack={hook.url}/slack",
            "--notify",
            str(config),
            cwd=Path(os.sep),  # the command is found beside its file, not in the working folder
        )
        assert result.returncode == 0, result.stderr
        texts = [b["text"] for b in hook.bodies("/slack")]
    assert set(texts[0].splitlines()[0].split(": ", 1)[1:]) == {"node07 down: simulated fault: node down"}
    assert texts[0].startswith("[CRITICAL] ")
    assert texts[-1].splitlines()[0].endswith("ended: 17 of 18 nodes finished, node07 down since 05:00")
    paged = [orjson.loads(line) for line in out.read_text().splitlines()]
    assert [p["alertname"] for p in paged] == ["TokenwatchNodeDown", "TokenwatchRunEnded"]
    assert paged[0]["node"] == "node07"
    # argv as given, no shell: the ';' is part of an argument, not a second command.
    assert (tmp_path / "argv.txt").read_text().splitlines() == ["--team infra; rm -rf /"] * 2


def test_a_fleets_alerts_carry_each_nodes_own_rack(tmp_path: Path) -> None:
    config = notify_file(tmp_path, "  kinds: [node-down]\n  group_wait: 0s\n")
    with receiving() as hook:
        result = run_tokenwatch(
            "sim",
            "--racks",
            "3",
            "--speed",
            "0",
            "--headless",
            "--duration",
            "8m",
            "--faults",
            "node20:down@3m,node40:down@4m",
            "--notify",
            f"{hook.url}/hook",
            "--notify",
            str(config),
        )
        assert result.returncode == 0, result.stderr
        downs = [
            (a["node"], a["rack"]) for b in hook.bodies() for a in b["alerts"] if a["status"] == "firing"
        ]
    # 18 nodes a rack: node20 is rack02's second node, node40 rack03's fourth.
    assert downs == [("node20", "rack02"), ("node40", "rack03")]


def test_a_replay_notifies_what_its_recording_raised(tmp_path: Path) -> None:
    config = notify_file(tmp_path, "  kinds: [node-down, run-end]\n  group_wait: 0s\n")
    with receiving() as hook:
        result = run_tokenwatch(
            "replay",
            str(SAMPLE_RUNS / "gb300-nvl72-node-failure.jsonl.zst"),
            "--speed",
            "0",
            "--headless",
            "--notify",
            f"{hook.url}/hook",
            "--notify",
            str(config),
        )
        assert result.returncode == 0, result.stderr
        sent = [(b["alertname"], b["node"], b["status"]) for b in hook.bodies()]
    # The sample's node07 goes down at 30:00 for good; the run then ends.
    assert sent == [("TokenwatchNodeDown", "node07", "firing"), ("TokenwatchRunEnded", "", "firing")]


def test_a_run_shown_by_serve_links_its_dashboard_and_never_its_token() -> None:
    """`serve` hands the run the pages' address without the start's token; every receiver gets the link.
    An address that carries a token is never passed on (a page's cookie is the key, not a message)."""
    page = "http://127.0.0.1:8123/"
    with receiving() as hook:
        result = run_tokenwatch(
            *RUN,
            "--faults",
            "node07:down@5m",
            "--notify",
            f"slack={hook.url}/slack",
            "--notify",
            f"webhook={hook.url}/hook",
            TOKENWATCH_SERVE_URL=page,
        )
        assert result.returncode == 0, result.stderr
        texts = [b["text"] for b in hook.bodies("/slack")]
        hooks = hook.bodies("/hook")
    assert texts
    assert all(text.splitlines()[-1] == f"dashboard: {page}" for text in texts)
    assert hooks
    assert all(body["dashboard"] == page for body in hooks)
    with receiving() as hook:
        leaked = run_tokenwatch(
            *RUN, "--notify", f"webhook={hook.url}/hook", TOKENWATCH_SERVE_URL=page + "?token=s3cret"
        )
        assert leaked.returncode == 0, leaked.stderr
        bodies = hook.bodies("/hook")
    assert bodies
    assert all("dashboard" not in body and "s3cret" not in orjson.dumps(body).decode() for body in bodies)


def test_serve_gives_its_run_the_pages_address_without_the_token() -> None:
    from tokenwatch.cli.shared_run import SharedRun
    from tokenwatch.frontends.notify.payloads import SERVE_URL_VARIABLE

    run = SharedRun(["sim"], None, 1, lambda _run: None, page_url="http://127.0.0.1:8123/")  # type: ignore[arg-type]
    assert run._build_environment()[SERVE_URL_VARIABLE] == "http://127.0.0.1:8123/"
