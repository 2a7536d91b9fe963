"""``watch`` of a fleet config in the dashboard, end to end through a real Prometheus (and again through
a real VictoriaMetrics): three
simulated racks, each served by its own tokenwatch exporter (as one headless watch per rack serves it),
scraped every second. The app is built as ``tokenwatch watch CONFIG`` builds it (the
config loaded, :func:`build_collector`, the fleet focus handed to the session) and driven by Pilot.

The board leads, each rack's row equal to that rack's own core; Enter on a rack points the watch's
focus at it, so its nodes (and only its) are fetched every interval and its dashboard shows them fresh;
Escape clears the focus; a rack whose exporter dies is down on the board while the others go on.

Cost: 3 racks of 4 nodes x 4 GPUs, simulated to t = 60 s once and then held still (what the server
aggregates is exactly what each core says); about 20 s in all, most of it Prometheus starting and the
watch's 1-s intervals, per engine. An engine whose binary is missing is skipped.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from textual.pilot import Pilot

from tests.conftest import PATIENCE_S, refusing_port, wait_until_async
from tests.live.fleet_support import (
    ENGINES,
    HeldFleet,
    expected,
    held_fleet,
    rack_name,
    serve,
)
from tokenwatch.core import RackCore
from tokenwatch.core.fleet.table import FleetTable
from tokenwatch.frontends.tui.app import TokenwatchApp
from tokenwatch.frontends.tui.screens.dashboard import DashboardScreen
from tokenwatch.frontends.tui.screens.fleet_screen import FleetScreen
from tokenwatch.frontends.tui.theme_loader import shipped_dir
from tokenwatch.frontends.tui.widgets.alerts_panel import AlertsPanel
from tokenwatch.frontends.tui.widgets.fleet_board import FleetBoard
from tokenwatch.frontends.tui.widgets.node_table import NodeTable
from tokenwatch.inputs.config import load_watch_config
from tokenwatch.inputs.live.supervisor import LiveOptions
from tokenwatch.inputs.prometheus.fleet import FleetFocus
from tokenwatch.inputs.watch import build_collector, core_config, fleet_focus
from tokenwatch.session import Session

pytestmark = [pytest.mark.timeout(120)]

RACKS, NODES, GPUS = 3, 4, 4
HELD_AT_S = 60.0
# rack02: a node that throttles (its worst, with a cause); rack03: a node down since 0:30.
FAULTS = {1: "node02:throttle@20s", 2: "node03:down@30s"}
SIZE = (120, 40)


@pytest.fixture(scope="module", params=ENGINES)
def fleet(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HeldFleet]:
    tmp = tmp_path_factory.mktemp(f"fleet-{request.param}")
    with held_fleet(request.param, tmp, RACKS, NODES, FAULTS, HELD_AT_S) as held:
        yield held


def watch_app(url: str, tmp_path: Path) -> TokenwatchApp:
    """The dashboard ``tokenwatch watch fleet.yaml`` runs (cli/watch_cmd.py, cli/running.py): the real
    live collector and session, the fleet focus handed over. The alerting pass (every node) comes only
    at the first round, so a rack's nodes are read again only while the focus fetches them."""
    config_path = tmp_path / "fleet.yaml"
    config_path.write_text(
        "run: {name: fleet, scenario: Offline}\n"
        "nodes: {rack_label: rack}\n"
        f"fleet: {{url: '{url}', interval: 1s, detail_interval: 1h, lookback: 0s}}\n"
        "alerts: {stale_after: 2s}\n"
    )
    config = load_watch_config(str(config_path))
    collector = build_collector(config, options=LiveOptions())
    session = Session(RackCore(core_config(config)), [collector], flush_interval_s=None)
    session.fleet_focus = fleet_focus(collector)
    return TokenwatchApp(session, mode="live", theme_dirs=[shipped_dir()])


async def until(
    pilot: Pilot[None], what: str, done: Callable[[], bool], timeout_s: float = PATIENCE_S
) -> None:
    """Let the app run until ``done()``; fail naming ``what``."""
    await wait_until_async(done, what, timeout_s=timeout_s, pause=pilot.pause)


def last_round_t(app: TokenwatchApp) -> float:
    """The run time of the latest rack figures the core took in (one batch a round)."""
    figures = app.session.core.state.fleet_figures
    assert figures is not None
    return figures.last_batch_t


async def rounds_later(pilot: Pilot[None], app: TokenwatchApp, rounds: int) -> None:
    """Wait until the watch's rounds have brought ``rounds`` more batches of rack figures (1-s interval)."""
    start = last_round_t(app)
    await until(pilot, f"{rounds} more rounds", lambda: last_round_t(app) > start + rounds - 0.5)


def board_table(app: TokenwatchApp) -> FleetTable | None:
    """The board's table, once the board is on screen and mounted (it takes the dashboard's place when
    the run starts)."""
    screen = app.screen
    boards = screen.query(FleetBoard) if isinstance(screen, FleetScreen) else ()
    return next((board.table for board in boards), None)


def every_rack_reported(app: TokenwatchApp) -> bool:
    table = board_table(app)
    return table is not None and len(table) == RACKS and bool(np.isfinite(table.tokens_per_s).all())


def rows_as_their_cores(app: TokenwatchApp, fleet: HeldFleet, racks: range) -> bool:
    """The board's rows of ``racks`` up, with the nodes and tokens/s their own cores have. A server's
    scrape that missed its timeout on the loaded machine leaves its rack out of a round or two (and on
    VictoriaMetrics, whose stale markers become visible one series at a time, counts 3 of its 4 nodes):
    the server's own answer at that instant, not the one these tests check."""
    table = board_table(app)
    if table is None or len(table) != RACKS:
        return False
    for r in racks:
        want = expected(fleet.cores[r])
        if table.state[r] != "up" or table.nodes_up[r] != want.nodes_up:
            return False
        if not math.isclose(table.tokens_per_s[r], want.tokens_per_s, rel_tol=1e-9):
            return False
    return True


def unread_and_said(app: TokenwatchApp) -> str:
    """For a failed wait: the nodes the core never read, and what the watch said meanwhile."""
    core = app.session.core
    state = core.state
    unread = [name for name, i in state.index.items() if not np.isfinite(state.last_seen[i])]
    said = [a.message for a in core.alerts_since(0)]
    return f"never read: {unread}; said: {said}"


def focus_of(app: TokenwatchApp) -> FleetFocus:
    focus = app.session.fleet_focus
    assert isinstance(focus, FleetFocus), "a fleet watch hands its focus to the session"
    return focus


def fresh_nodes(app: TokenwatchApp, rack: str) -> list[str]:
    """The rack's nodes that are up with fresh GPU readings now, as the core has them."""
    snap = app.session.core.rack_snapshot(rack)
    assert snap is not None
    fresh = (snap.gpus.freshness == 0).all(axis=1)
    return [name for i, name in enumerate(snap.nodes.names) if snap.nodes.state[i] == "up" and fresh[i]]


def shown_node_table(app: TokenwatchApp) -> NodeTable | None:
    screen = app.screen
    tables = screen.query(NodeTable) if isinstance(screen, DashboardScreen) else ()
    return next(iter(tables), None)


@pytest.mark.timeout(300)  # the alerting pass's longer wait
async def test_watch_of_a_fleet_leads_with_the_board_and_drills_into_a_rack(
    fleet: HeldFleet, tmp_path: Path
) -> None:
    app = watch_app(fleet.url, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await until(
            pilot,
            "the board with every rack's figures",
            lambda: rows_as_their_cores(app, fleet, range(RACKS)),
        )
        table = board_table(app)
        assert table is not None
        assert table.racks == tuple(rack_name(r) for r in range(RACKS))
        # Each row is its rack's own core, as the server aggregated that rack's exporter.
        for r, own_core in enumerate(fleet.cores):
            want = expected(own_core)
            assert table.state[r] == "up"
            assert (table.nodes_total[r], table.nodes_up[r], table.gpus[r]) == (
                want.nodes_total,
                want.nodes_up,
                want.gpus,
            )
            assert table.tokens_per_s[r] == pytest.approx(want.tokens_per_s, rel=1e-9)
            assert table.per_gpu_tokens_per_s[r] == pytest.approx(want.per_gpu, rel=1e-9)
            assert table.power_w[r] == pytest.approx(want.power_w, rel=1e-9)
            assert table.tokens_per_joule[r] == pytest.approx(want.tokens_per_joule, rel=1e-9)
            assert table.spread_pct[r] == pytest.approx(want.spread_pct, rel=1e-9)
            assert table.worst_node[r] == want.worst_node.split("/")[-1]
            assert table.worst_delta_pct[r] == pytest.approx(want.worst_delta_pct, rel=1e-9)
        assert table.nodes_up.tolist() == [NODES, NODES, NODES - 1]  # rack03's node03 is down
        assert expected(fleet.cores[1]).throttling  # rack02's worst is its throttling node
        assert focus_of(app).racks == frozenset()

        # The first round's alerting pass read every node (a rack the server held no samples of at its
        # instant, a round or more later); with none on screen none is read again (a node read through
        # the server is judged by its reading plan: no stale alert between passes).
        state = app.session.core.state
        # A pass the loaded server left unanswered in part is asked again after 1, 2, 4... s (up to the
        # alerting interval): a minute holds only about six tries, so this waits for more.
        try:
            await until(
                pilot,
                "every node read by the alerting pass",
                lambda: bool(np.isfinite(state.last_seen).all()),
                timeout_s=2 * PATIENCE_S,
            )
        except AssertionError as e:
            raise AssertionError(f"{e}; {unread_and_said(app)}") from None
        # A pass whose queries failed in part (a loaded server) is asked again a round later: past it.
        await rounds_later(pilot, app, 2)
        first_pass = state.last_seen.copy()
        await rounds_later(pilot, app, 2)
        np.testing.assert_array_equal(state.last_seen, first_pass)
        assert not [a for a in app.session.core.active_alerts() if a.kind == "stale"]

        await pilot.press("down", "enter")  # rack02
        screen = app.screen
        assert isinstance(screen, DashboardScreen)
        assert screen.rack == "rack02"
        await until(pilot, "the focus on rack02", lambda: focus_of(app).racks == frozenset({"rack02"}))
        names = [f"rack02/node{i + 1:02d}" for i in range(NODES)]

        seen: list[str] = []  # what the last look found, for the message if it never comes

        def rack02_read_again() -> bool:
            rows = shown_node_table(app)
            rows_of = [state.index[name] for name in names]
            read, before = state.last_seen[rows_of], first_pass[rows_of]
            fresh = fresh_nodes(app, "rack02")
            again = bool((read > before).all())
            seen[:] = [
                f"table shown: {rows is not None and rows.snapshot is not None}, fresh: {fresh}, "
                f"read at {read.tolist()} after the first pass's {before.tolist()}"
            ]
            return rows is not None and rows.snapshot is not None and fresh == names and again

        try:
            await until(pilot, "rack02's nodes read again and fresh in its dashboard", rack02_read_again)
        except AssertionError as e:
            raise AssertionError(f"{e}; {seen[0] if seen else 'never looked'}") from None
        app.refresh_data(force=True)
        await pilot.pause()
        node_table = shown_node_table(app)
        assert node_table is not None
        shown = node_table.snapshot
        assert shown is not None
        assert list(shown.nodes.names) == names  # exactly that rack's nodes
        own = fleet.cores[1].snapshot()
        assert shown.nodes.tokens_done.tolist() == own.nodes.tokens_done.tolist()
        np.testing.assert_allclose(shown.nodes.power_w, own.nodes.power_w, rtol=1e-9)
        assert np.isfinite(shown.nodes.power_w).all()
        # Fetched because of the focus: the racks not on screen are not read again.
        focused = state.last_seen[[state.index[name] for name in names]].min()
        for rack in ("rack01", "rack03"):
            rows = [state.index[f"{rack}/node{i + 1:02d}"] for i in range(NODES)]
            np.testing.assert_array_equal(state.last_seen[rows], first_pass[rows])
            assert (state.last_seen[rows] < focused).all()

        await pilot.press("escape")
        assert isinstance(app.screen, FleetScreen)
        await until(pilot, "the focus cleared", lambda: focus_of(app).racks == frozenset())
        # Two rounds on (the one in flight may have asked with the focus still set), rack02's nodes are
        # no longer fetched: their last readings stand while the rack figures go on.
        await rounds_later(pilot, app, 2)
        state = app.session.core.state
        rows = [state.index[name] for name in names]
        last = state.last_seen[rows].copy()
        await rounds_later(pilot, app, 2)
        np.testing.assert_array_equal(state.last_seen[rows], last)
        assert every_rack_reported(app)  # the board goes on
        await app.action_quit()


async def test_a_rack_whose_exporter_dies_is_down_on_the_board_the_others_go_on(
    fleet: HeldFleet, tmp_path: Path
) -> None:
    dead = 0  # rack01
    app = watch_app(fleet.url, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await until(
            pilot,
            "the board with every rack's figures",
            lambda: rows_as_their_cores(app, fleet, range(RACKS)),
        )
        before = board_table(app)
        assert before is not None
        port = fleet.servers[dead].port
        fleet.servers[dead].close()
        try:

            def dead_down() -> bool:
                table = board_table(app)
                return table is not None and table.state[dead] == "down"

            await until(
                pilot,
                "rack01 down on the board, the others as their cores",
                lambda: dead_down() and rows_as_their_cores(app, fleet, range(1, RACKS)),
            )
            after = board_table(app)
            assert after is not None
            assert list(after.state) == ["down", "up", "up"]
            assert after.nodes_up[dead] == 0
            assert after.nodes_total[dead] == NODES  # its size is still known
            assert math.isnan(after.tokens_per_s[dead])
            # How old its figures are, on its row: since the last round that had them.
            assert after.data_age_s is not None
            assert after.data_age_s[dead] >= 0.0
            assert FleetBoard.cells(after, dead)["cause"].startswith("no data for ")
            assert max(after.data_age_s[1:]) <= 3.0  # the others' are within the 3 intervals of being up
            for r in range(1, RACKS):
                want = expected(fleet.cores[r])
                assert after.tokens_per_s[r] == pytest.approx(want.tokens_per_s, rel=1e-9)
                assert after.nodes_up[r] == before.nodes_up[r] == want.nodes_up
            # The header is the fleet's sum: the live racks' alone now.
            header = app.latest.aggregate
            live = sum(expected(fleet.cores[r]).tokens_per_s for r in range(1, RACKS))
            assert header.tokens_per_s == pytest.approx(live, rel=1e-9)
        finally:
            fleet.servers[dead] = serve(fleet.cores[dead], port)
        await app.action_quit()


async def test_a_fleet_watch_that_cannot_reach_its_server_says_so_on_screen(tmp_path: Path) -> None:
    """No server at the URL: the screen's alert panel says so in one line (and keeps saying nothing
    else), as stderr does headless."""
    url = f"http://127.0.0.1:{refusing_port()}"
    app = watch_app(url, tmp_path)
    async with app.run_test(size=SIZE) as pilot:

        def said() -> list[str]:
            panels = app.screen.query(AlertsPanel)
            return [a.message for panel in panels for a in panel.alerts]

        why = f"prometheus fleet: cannot list the fleet's nodes: cannot reach {url}"
        await until(pilot, "the alert panel saying why", lambda: any(m.startswith(why) for m in said()))
        assert all("\n" not in m for m in said())
        # No run could start (no nodes listed): nothing else is said beside the server's trouble.
        assert all(m.startswith("prometheus fleet: ") and f"cannot reach {url}" in m for m in said())
        await app.action_quit()
