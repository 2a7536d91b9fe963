"""The dashboard app: runs the session inside its own event loop and redraws from the core's snapshots.

Redraws are coalesced: a timer at :data:`REFRESH_HZ` (4 Hz) takes the core's latest snapshot when
anything changed since the last one, however many events arrived in between (latest wins), and hands
it to the visible screen. No widget ever sees an event, and nothing here blocks the loop: the
collectors are async, recordings are read in threads.

While a key is on its way (the session's input hold, :class:`tokenwatch.base.loop_share.InputHold`) the
timer draws no new data: the key's frame comes first, and a refresh's frame (every panel, ~25 ms of
CPU at 64 racks) does not stand in front of it. The hold ends when the frame after the key's action is
sent.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from platformdirs import user_downloads_path
from rich.console import RenderableType
from textual import constants
from textual.actions import ActionParseResult
from textual.app import App
from textual.binding import Binding, BindingType
from textual.css.query import NoMatches
from textual.dom import DOMNode
from textual.driver import Driver
from textual.events import DeliveryFailed
from textual.screen import Screen
from textual.theme import Theme
from textual.timer import Timer
from textual.worker import Worker

from tokenwatch.base.events import RunMode
from tokenwatch.base.formatting import printable
from tokenwatch.base.loop_share import InputHold
from tokenwatch.core.node_history import NodeHistory
from tokenwatch.core.rack_snapshot import empty_snapshot
from tokenwatch.core.snapshot import RackSnapshot
from tokenwatch.frontends.tui.screens.dashboard import DashboardScreen
from tokenwatch.frontends.tui.screens.fleet_screen import FleetScreen
from tokenwatch.frontends.tui.screens.help_screen import HelpScreen
from tokenwatch.frontends.tui.screens.node_screen import NodeScreen
from tokenwatch.frontends.tui.terminal_driver import TerminalDriver, TerminalGone
from tokenwatch.frontends.tui.theme_loader import DEFAULT_THEME, ThemeCatalog, load_catalog
from tokenwatch.frontends.tui.widgets.replay_bar import ReplayState, speed_label
from tokenwatch.frontends.tui.widgets.run_header import RunHeader
from tokenwatch.session import Session

if TYPE_CHECKING:
    from tokenwatch.inputs.replay.player import ReplayPlayer  # a replay's own: sim never loads it

REFRESH_HZ = 4.0
_QUIT_TIMEOUT_S = 10.0
_NODE_HISTORY_POINTS = 300  # the node screen's window: 5 minutes at 1 s ticks
_GC_YOUNG_OBJECTS = 10_000  # the garbage collector's youngest generation, once the run is in


class TokenwatchApp(App[None]):
    TITLE = "tokenwatch"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit"),
        Binding("ctrl+c", "quit", "Quit", show=False, priority=True),
        Binding("question_mark", "help", "Help"),
        Binding("t", "next_theme", "Theme"),
        Binding("ctrl+l", "redraw", "Redraw", show=False, priority=True),
    ]

    def __init__(
        self,
        session: Session,
        *,
        mode: RunMode = "sim",
        player: ReplayPlayer | None = None,
        theme: str | None = None,
        speed: float | None = None,
        theme_dirs: list[Path] | None = None,
        refresh_hz: float = REFRESH_HZ,
        on_start: Callable[[TokenwatchApp], None] | None = None,
    ) -> None:
        """``on_start`` is called with the app once it runs, on the app's event loop (a /metrics server
        (``--prometheus-port``) attaches there, so its scrapes read the core between events)."""
        super().__init__()
        self.session = session
        self.on_start = on_start
        self.mode = mode
        self.player = player
        self.speed = speed
        self.refresh_hz = refresh_hz
        self.latest: RackSnapshot = empty_snapshot()
        self.refreshes = 0  # snapshots drawn (tests and the benchmark read it)
        self.refreshes_held = 0  # timer refreshes left out while a key was on its way (tests read it)
        self._last_token: object = None
        self._session_worker: Worker[None] | None = None
        self._refresh_timer: Timer | None = None
        self._quitting = False
        self._fleet_led = False  # the fleet board has replaced the dashboard (a run of several racks)
        self._gc_thresholds: tuple[int, ...] | None = None  # before the heap was settled (None: not yet)
        self.theme_catalog: ThemeCatalog = load_catalog(theme_dirs)
        self._theme_problems = list(self.theme_catalog.problems)
        # Only tokenwatch's themes: they carry the heatmap scale, and the palette lists exactly them.
        for name in list(self.available_themes):
            if name not in self.theme_catalog.themes:
                self.unregister_theme(name)
        for spec in self.theme_catalog.themes.values():
            self.register_theme(spec.theme)
        wanted = theme or DEFAULT_THEME
        if wanted not in self.theme_catalog.themes:
            known = ", ".join(self.theme_catalog.names())
            self._theme_problems.append(f"unknown theme {wanted!r}; using {DEFAULT_THEME!r} (known: {known})")
            wanted = (
                DEFAULT_THEME if DEFAULT_THEME in self.theme_catalog.themes else self.theme_catalog.names()[0]
            )
        self.theme = wanted

    # ------------------------------------------------------------------ lifecycle
    def get_driver_class(self) -> type[Driver]:
        """In a terminal, one whose closing ends the run
        (:mod:`tokenwatch.frontends.tui.terminal_driver`); the web driver (``tokenwatch serve``) and other
        platforms as Textual picks them."""
        driver = super().get_driver_class()
        if constants.DRIVER is None and issubclass(TerminalDriver, driver):
            return TerminalDriver
        return driver

    def on_mount(self) -> None:
        # Pushed rather than the default screen: Textual loads a screen's CSS_PATH only when pushed. A run
        # its input says is a fleet starts on the board: composing, styling and drawing the rack's
        # dashboard only to replace it at the first snapshot was a good part of a 64-rack first frame.
        if self.session.says_fleet():
            self._fleet_led = True
            self.push_screen(FleetScreen(player=self.player, badge=self.badge()))
        else:
            self.push_screen(DashboardScreen(player=self.player, badge=self.badge()))
        for problem in self._theme_problems:
            self.notify(printable(problem), title="Theme", severity="warning", timeout=15)
        if self.on_start is not None:
            self.on_start(self)
        self.session.on_recording_stopped(self._recording_stopped)
        self._session_worker = self.run_worker(self.session.run(), name="session", group="session")
        self._refresh_timer = self.set_interval(1.0 / self.refresh_hz, self.refresh_data)
        self.theme_changed_signal.subscribe(self, self._on_theme_changed)

    def _recording_stopped(self, message: str) -> None:
        """A full disk: the recording stopped, the dashboard goes on (the alert is in the panel too)."""
        self.notify(message, title="Recording", severity="error", timeout=30)

    def _on_theme_changed(self, _theme: Theme) -> None:
        self.refresh_data(force=True)

    # ------------------------------------------------------------------ what the screens read
    def badge(self) -> str:
        if self.mode == "replay":
            player = self.player
            label = speed_label(player.speed) if player is not None else ""
            return f"REPLAY {label}{' ‖' if player is not None and player.paused else ''}".strip()
        if self.mode == "live":
            return "LIVE"
        badge = f"SIM {speed_label(self.speed)}" if self.speed is not None else "SIM"
        kept = self.session.pace_behind()  # the sim cannot keep its speed: it says the pace it keeps
        if kept is None:
            return badge
        if kept < 0.05:  # no run time went by in the last window (the run's start, a stalled machine)
            return f"{badge} · behind"
        return f"{badge} · behind, x{kept:.0f}" if kept >= 10 else f"{badge} · behind, x{kept:.1f}"

    def replay_state(self) -> ReplayState | None:
        player = self.player
        if player is None:
            return None
        return ReplayState(
            player.position_s,
            player.duration_s,
            player.speed,
            player.paused,
            player.seeking,
            player.at_end,
            player.message,
        )

    def node_history(self, node: str, rack: str | None = None) -> NodeHistory | None:
        return self.session.core.node_history(node, last=_NODE_HISTORY_POINTS, rack=rack)

    def shown_rack(self) -> str | None:
        """The fleet's rack on screen (its dashboard, or one of its nodes); None: the run as a whole."""
        for screen in reversed(self.screen_stack):
            if isinstance(screen, DashboardScreen | FleetScreen):
                return screen.rack if isinstance(screen, DashboardScreen) else None
        return None

    @property
    def input_hold(self) -> InputHold | None:
        """The session's hold for a key on its way (None: the session does not share the loop)."""
        share = self.session.loop_share
        return share.hold if share is not None else None

    def refresh_data(self, force: bool = False) -> None:
        """Draw the latest snapshot if anything changed (the timer calls this at ``refresh_hz``; not
        while a key is on its way, see the module docstring).

        A rack's screens are drawn from that rack's snapshot alone (18 nodes, not the fleet's 1,152)."""
        hold = self.input_hold
        if not force and hold is not None and hold.held():
            self.refreshes_held += 1
            return
        if not self.screen_stack:
            # No screen yet, or none left as the app closes: the session yields to the loop while it
            # works, so the timer can fire in those gaps. The next refresh draws whatever is there.
            self._last_token = None
            return
        core = self.session.core
        rack = self.shown_rack()
        # Before the no-change return: the focus follows the screen, not the data (a rack opened while
        # nothing arrives, its server slow or gone, must still be the one asked for next).
        focus = self.session.fleet_focus
        if focus is not None and focus.racks != frozenset((rack,) if rack else ()):
            focus.show((rack,) if rack else ())  # a fleet watched through Prometheus: fetch its nodes
        replay = self.replay_state()
        loading = self.session.loading()
        said = loading.text() if loading is not None and loading.worth_saying() else ""
        token = (id(core), self.session.events_seen, replay, self.theme, said)
        if token == self._last_token and not force:
            return
        self._last_token = token
        if isinstance(self.screen, DashboardScreen):  # a slow start says what it loads, and how far
            try:
                self.screen.query_one(RunHeader).show_loading(said)
            except NoMatches:
                # Pushed, not composed yet (a seek's new screen: the session yields to the loop while
                # it works, so the timer can fire in that gap). The next refresh draws it.
                self._last_token = None
                return
        snap = core.rack_snapshot(rack) if rack is not None else None
        self.latest = snap if snap is not None else core.snapshot()
        self.refreshes += 1
        self._settle_heap(core.started)
        if self._lead_with_fleet(self.latest):
            return  # the board draws itself once mounted
        screen = self.screen
        try:
            if isinstance(screen, DashboardScreen | FleetScreen):
                screen.show_snapshot(self.latest, self.badge(), replay)
            elif isinstance(screen, NodeScreen):
                screen.show_snapshot(self.latest, self.node_history(screen.node, rack), self.badge())
        except NoMatches:
            # A screen between mounted and composed, or being taken down as another replaces it (a
            # loaded machine's timer fires in that gap: the board's end banner was not there yet). The
            # next refresh draws the screen that is there.
            self._last_token = None

    def _lead_with_fleet(self, snap: RackSnapshot) -> bool:
        """A run of more than one rack leads with the fleet board: it takes the dashboard's place once
        the run says so (the dashboard is what shows before the run starts). True when it switched."""
        if self._fleet_led or snap.fleet is None or len(snap.fleet) < 2:
            return False
        screen = self.screen
        if not isinstance(screen, DashboardScreen) or screen.over_fleet:
            return False  # a dialog is open: the board comes when it closes
        self._fleet_led = True
        self.switch_screen(FleetScreen(player=self.player, badge=self.badge()))
        return True

    def _settle_heap(self, started: bool) -> None:
        """Once the run's state exists: collect, then freeze what is alive (the core's state, Textual's
        widgets and modules) out of the garbage collector's sight, and let the youngest generation grow
        to 10,000 objects before it is collected. A full collection otherwise walks ~100,000 long-lived
        objects (50-80 ms at 64 racks: the long tail of a refresh and of a key's response), and the
        objects every frame makes (strips, segments, styles) were promoted until one was due every few
        frames (benchmarks/bench_fleet_board.py, --no-gc-freeze for the figures before)."""
        if started and self._gc_thresholds is None:
            self._gc_thresholds = gc.get_threshold()
            gc.collect()
            gc.freeze()
            gc.set_threshold(max(_GC_YOUNG_OBJECTS, self._gc_thresholds[0]), *self._gc_thresholds[1:])

    def on_unmount(self) -> None:
        if self._gc_thresholds is not None:
            # Back in the collector's sight, as it was: an app made after this one (tests) starts clean.
            gc.unfreeze()
            gc.set_threshold(*self._gc_thresholds)

    # ------------------------------------------------------------------ a key's frame
    async def run_action(
        self,
        action: str | ActionParseResult,
        default_namespace: DOMNode | None = None,
        namespaces: Mapping[str, DOMNode] | None = None,
    ) -> bool:
        """Textual's; then a key on its way has had its action (its frame is the next one sent)."""
        handled = await super().run_action(action, default_namespace, namespaces)
        hold = self.input_hold
        if hold is not None:
            hold.acted()
        return handled

    def _display(self, screen: Screen[object], renderable: RenderableType | None) -> None:
        """Textual's frame out to the terminal; then a key whose action ran is answered."""
        super()._display(screen, renderable)
        hold = self.input_hold
        if hold is not None and renderable is not None:
            hold.frame_sent()

    # ------------------------------------------------------------------ screenshots
    def deliver_screenshot(
        self,
        filename: str | None = None,
        path: str | None = None,
        time_format: str | None = None,
    ) -> str | None:
        """Textual's screenshot (command palette: Screenshot) saves to ~/Downloads, and fails where there
        is none (servers, containers): there it goes to the working directory. Textual's notice says
        where it went."""
        if path is None:
            downloads = user_downloads_path()
            path = str(downloads if downloads.is_dir() else Path.cwd())
        return super().deliver_screenshot(filename, path, time_format)

    def on_delivery_failed(self, event: DeliveryFailed) -> None:
        """Say why a screenshot could not be saved (Textual's own notice only says that it was not)."""
        if event.name == "screenshot":
            event.prevent_default()
            self.notify(
                f"could not save the screenshot: {event.exception}", title="Screenshot", severity="error"
            )

    # ------------------------------------------------------------------ keys
    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_redraw(self) -> None:
        """Paint the whole screen again, as ctrl+l does in a shell: a terminal that was cleared, or a browser
        page that joins ``tokenwatch serve``'s run late (it starts blank), gets every cell."""
        self.screen.refresh(repaint=True)

    def action_next_theme(self) -> None:
        names = self.theme_catalog.names()
        current = names.index(self.theme) if self.theme in names else -1
        self.theme = names[(current + 1) % len(names)]
        self.notify(f"theme: {self.theme}", timeout=2)

    async def on_terminal_gone(self, _message: TerminalGone) -> None:
        """The terminal closed: quit, the run ended as interrupted as SIGHUP ends it (nobody watches)."""
        await self.action_quit()

    async def action_quit(self) -> None:
        """Stop the session (its recorder is flushed and closed) and leave."""
        if self._quitting:
            return
        self._quitting = True
        hold = self.input_hold
        if hold is not None:
            hold.release()  # the session must see the stop, not wait for this key's frame
        self.session.quit()
        worker = self._session_worker
        if worker is not None and not worker.is_finished:
            try:
                await asyncio.wait_for(worker.wait(), _QUIT_TIMEOUT_S)
            except Exception:  # a failed or slow session must not keep the engineer in the app
                worker.cancel()
        self.exit()
