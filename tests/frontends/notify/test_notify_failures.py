"""Receivers that misbehave on purpose: down, answering 500, answering 500 then recovering, never
answering. The run never waits for them, loses nothing from its recording or its lines, and says so in
ONE warning line (never a traceback); secrets in a receiver's URL or headers are never shown."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.conftest import PATIENCE_S, run_tokenwatch, wait_until_async
from tests.frontends.notify.notify_support import closed_url, receiving
from tokenwatch.core import RackCore
from tokenwatch.frontends.notify import start_notifier
from tokenwatch.inputs.notify_config import NotifyConfig, ReceiverConfig
from tokenwatch.inputs.sim.collector import SimulatorCollector
from tokenwatch.inputs.sim.faults import parse_faults
from tokenwatch.inputs.sim.profile import load_profile
from tokenwatch.inputs.sim.rack_sim import SimSettings
from tokenwatch.session import Session

RUN = ("sim", "--speed", "0", "--headless", "--duration", "15m", "--faults", "node07:down@4m-8m")
QUICK = "notify:\n  retry_for: 2s\n  timeout: 1s\n  group_wait: 0s\n"


def quick_retries(tmp_path: Path) -> str:
    path = tmp_path / "quick.yaml"
    path.write_text(QUICK)
    return str(path)


def baseline_run(tmp_path: Path) -> tuple[str, bytes]:
    """The same run without --notify: its headless lines and its recording."""
    recording = tmp_path / "plain.jsonl"
    result = run_tokenwatch(*RUN, "--record", str(recording))
    assert result.returncode == 0, result.stderr
    return result.stdout, recording.read_bytes()


def notify_warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "notify:" in line]


def test_a_receiver_that_is_down_costs_one_warning_and_nothing_else(tmp_path: Path) -> None:
    lines, recorded = baseline_run(tmp_path)
    recording = tmp_path / "notified.jsonl"
    result = run_tokenwatch(
        *RUN, "--record", str(recording), "--notify", closed_url(), "--notify", quick_retries(tmp_path)
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    (warning,) = notify_warnings(result.stderr)
    assert warning.startswith("tokenwatch: warning: notify: webhook http://127.0.0.1:")
    assert "cannot connect" in warning
    assert "the run and its recording go on" in warning
    # Every headless line and every recorded byte as without the receiver (a run at speed 0 is
    # deterministic, its recording byte for byte).
    assert result.stdout == lines
    assert recording.read_bytes() == recorded


def test_a_receiver_answering_500_is_retried_then_one_warning(tmp_path: Path) -> None:
    config = tmp_path / "no-timeout.yaml"
    config.write_text("notify:\n  retry_for: 2s\n  group_wait: 0s\n")  # the default 10-s answer time
    with receiving("fail") as hook:
        result = run_tokenwatch(*RUN, "--notify", hook.url, "--notify", str(config))
        attempts = hook.attempts
    assert result.returncode == 0, result.stderr
    (warning,) = notify_warnings(result.stderr)
    assert "HTTP 500" in warning
    assert attempts >= 2  # retried, not dropped at the first answer
    assert "Traceback" not in result.stderr


def test_a_receiver_that_recovers_gets_everything_and_no_warning_is_shown(tmp_path: Path) -> None:
    config = tmp_path / "patient.yaml"
    config.write_text("notify:\n  retry_for: 1m\n  group_wait: 0s\n")
    with receiving("fail_first", failures=2) as hook:
        result = run_tokenwatch(*RUN, "--notify", hook.url, "--notify", str(config))
        names = [b["alertname"] for b in hook.bodies()]
        attempts = hook.attempts
    assert result.returncode == 0, result.stderr
    assert notify_warnings(result.stderr) == []
    assert attempts == len(names) + 2
    assert "TokenwatchNodeDown" in names
    assert names[-1] == "TokenwatchRunEnded"


def test_a_receiver_that_never_answers_holds_up_nothing(tmp_path: Path) -> None:
    lines, _ = baseline_run(tmp_path)
    with receiving("hang") as hook:
        result = run_tokenwatch(*RUN, "--notify", hook.url, "--notify", quick_retries(tmp_path))
        received = hook.bodies()
    # Every request hung: nothing arrived, yet every line of the run was written and the run ended.
    assert received == []
    assert result.returncode == 0, result.stderr
    assert result.stdout == lines
    (warning,) = notify_warnings(result.stderr)
    assert "no answer within 1 s" in warning


SECRET_PATH = "T0TALLY/B00SECRET/x9y8z7w6v5"
SECRET_TOKEN = "tok-5ecret-4f1c9e"


def test_secrets_in_a_url_or_header_never_appear_in_output_recording_or_report(tmp_path: Path) -> None:
    config = tmp_path / "secret.yaml"
    config.write_text(
        QUICK
        + "  to:\n    - webhook: 'http://127.0.0.1:{port}/hooks/${TW_HOOK_PATH}'\n"
        + "      headers: {Authorization: 'Bearer ${TW_HOOK_TOKEN}'}\n"
    )
    with receiving() as hook:
        config.write_text(config.read_text().replace("{port}", str(hook.port)))
        result = run_tokenwatch(
            *RUN, "--notify", str(config), TW_HOOK_PATH=SECRET_PATH, TW_HOOK_TOKEN=SECRET_TOKEN
        )
        assert result.returncode == 0, result.stderr
        (first, *_) = hook.requests
    # The receiver gets them: they work.
    assert first.path == f"/hooks/{SECRET_PATH}"
    assert first.headers["Authorization"] == f"Bearer {SECRET_TOKEN}"
    # Down, the receiver is named in the warning, its secrets are not.
    recording = tmp_path / "run.jsonl"
    jsonl = tmp_path / "snapshots.jsonl"
    down = config.read_text().replace(f"127.0.0.1:{hook.port}", closed_url().removeprefix("http://"))
    config.write_text(down)
    failed = run_tokenwatch(
        *RUN,
        "--notify",
        str(config),
        "--record",
        str(recording),
        "--jsonl",
        str(jsonl),
        TW_HOOK_PATH=SECRET_PATH,
        TW_HOOK_TOKEN=SECRET_TOKEN,
    )
    assert failed.returncode == 0, failed.stderr
    (warning,) = notify_warnings(failed.stderr)
    assert "webhook http://127.0.0.1:" in warning
    assert "/..." in warning
    report = tmp_path / "report.html"
    assert run_tokenwatch("report", str(recording), "-o", str(report)).returncode == 0
    for secret in (SECRET_PATH, SECRET_TOKEN, "B00SECRET", "5ecret"):
        assert secret not in failed.stdout + failed.stderr
        for path in (recording, jsonl, report):
            assert secret.encode() not in path.read_bytes(), path


async def test_on_the_dashboard_an_outage_is_one_alert_in_the_core_not_in_the_recording() -> None:
    """What the dashboard's alert panel shows: the warning arrives as a notice in the core (recorded
    nowhere: a receiver's outage is not a fact of the run), once however many messages were lost."""
    profile = load_profile("gb300-nvl72")
    settings = SimSettings(
        profile, duration_s=600.0, faults=parse_faults("node07:down@2m-4m", profile.node_names())
    )
    session = Session(RackCore(), [SimulatorCollector(settings, speed=0)], flush_interval_s=None)
    config = NotifyConfig(
        to=[ReceiverConfig(webhook=closed_url())], retry_for_s=0.5, timeout_s=1.0, group_wait_s=0
    )
    printed: list[str] = []
    notifier = start_notifier(config, session, printed.append, on_screen=True)
    await session.run()

    def outage_alerts() -> list[str]:
        return [a.message for a in session.core.history().alerts if "notify:" in a.message]

    await wait_until_async(lambda: len(outage_alerts()) > 0, "the outage's alert", timeout_s=PATIENCE_S)
    await notifier.close(wait_s=1.0)
    await asyncio.sleep(0)
    assert notifier.sent >= 3  # node07 down, back up, the run's end: several messages lost ...
    assert len(outage_alerts()) == 1  # ... one alert
    assert printed == []  # on the screen, not on stderr
