"""The node screen's log lines, and the CLI options the dashboard adds (--ttft-sla, --tpot-sla, --theme)."""

from __future__ import annotations

from textual.widgets import Log

from tests.conftest import RunCli, wait_until_async
from tokenwatch.base.events import Emit, Event, LogLine, Progress, RunStarted
from tokenwatch.cli.options import RunOptions
from tokenwatch.cli.parser import parse
from tokenwatch.core import CoreConfig, RackCore
from tokenwatch.frontends.tui.app import TokenwatchApp
from tokenwatch.frontends.tui.screens.node_screen import NodeScreen
from tokenwatch.frontends.tui.theme_loader import shipped_dir
from tokenwatch.session import Session


class ScriptedCollector:
    """A fixed list of events, as a source with a harness log would send them."""

    name = "scripted"

    def __init__(self, events: list[Event]) -> None:
        self.events = events

    async def run(self, emit: Emit) -> None:
        for event in self.events:
            await emit(event)


async def test_node_screen_shows_the_nodes_log_lines() -> None:
    nodes = ("a01", "a02")
    events: list[Event] = [RunStarted(0.0, "logged", "Offline", nodes, 1, 600.0, None, "live", 0.0)]
    for t in range(1, 30):
        events += [Progress(float(t), n, t * 10, t * 1000) for n in nodes]
        events.append(LogLine(float(t), "a02", f"step {t}: batch done"))
    events.append(LogLine(29.5, "a01", "only line of a01"))
    session = Session(RackCore(), [ScriptedCollector(events)], flush_interval_s=None)
    app = TokenwatchApp(session, mode="live", theme_dirs=[shipped_dir()])
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until_async(
            lambda: session.events_seen == len(events), "every event seen", pause=pilot.pause
        )
        assert app.badge() == "LIVE"
        await pilot.press("down", "enter")
        app.refresh_data(force=True)
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, NodeScreen)
        assert screen.node == "a02"
        lines = list(screen.query_one(Log).lines)
        assert len(lines) == 29
        assert lines[0].endswith("step 1: batch done")
        assert lines[-1] == "00:29  step 29: batch done"
        await pilot.press("left_square_bracket")
        app.refresh_data(force=True)
        await pilot.pause()
        assert list(screen.query_one(Log).lines) == ["00:29  only line of a01"]


def test_sla_options_reach_the_core() -> None:
    def options(*argv: str) -> RunOptions:
        return RunOptions.from_args(parse(["replay", "x.jsonl", *argv]), "replay")

    given = options("--ttft-sla", "1.5s", "--tpot-sla", "150ms", "--theme", "light")
    config = given.core_config()
    assert config.ttft_sla_s == 1.5
    assert config.tpot_sla_s == 0.15
    assert given.theme == "light"
    base = CoreConfig(window_s=30.0)
    assert options().core_config(base) is base
    kept = options("--tpot-sla", "0.1").core_config(base)
    assert (kept.window_s, kept.ttft_sla_s, kept.tpot_sla_s) == (30.0, 2.0, 0.1)


def test_bad_sla_is_a_one_line_error(run_cli: RunCli) -> None:
    result = run_cli("sim", "--headless", "--ttft-sla", "soon")
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert "--ttft-sla" in result.stderr


def test_a_tighter_sla_raises_breach_alerts_headless(run_cli: RunCli) -> None:
    from tests.frontends.tui.apps import SERVER

    loose = run_cli("replay", str(SERVER), "--speed", "0", "--headless", "--interval", "10m")
    tight = run_cli(
        "replay", str(SERVER), "--speed", "0", "--headless", "--interval", "10m", "--ttft-sla", "300ms"
    )
    assert loose.returncode == tight.returncode == 0
    assert "SLA breach: TTFT" not in loose.stdout + loose.stderr
    assert "SLA breach: TTFT" in tight.stdout + tight.stderr


def test_no_terminal_means_no_dashboard() -> None:
    assert not RunOptions("sim").wants_dashboard()  # pytest's stdout is not a terminal
    assert RunOptions("sim", force_dashboard=True).wants_dashboard()
    assert not RunOptions("sim", headless=True).wants_dashboard()
