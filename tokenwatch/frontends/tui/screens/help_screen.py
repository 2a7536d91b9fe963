"""``?``: every key, from the one key table (:mod:`tokenwatch.frontends.tui.keys`)."""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from tokenwatch.frontends.tui.keys import KEY_TABLE


def key_table() -> Table:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold", no_wrap=True)
    table.add_column()
    for n, (section, keys) in enumerate(KEY_TABLE):
        if n:
            table.add_row("", "")
        table.add_row(f"[u]{section}[/u]", "")
        for key, what in keys:
            table.add_row(key, what)
    return table


class HelpScreen(ModalScreen[None]):
    CSS_PATH = "help_screen.tcss"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss", "Close"),
        Binding("question_mark", "dismiss", "Close", show=False),
        Binding("q", "dismiss", "Close", show=False),
    ]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box"):
            yield Static(key_table(), id="help-keys")
            yield Static("escape closes this help", id="help-hint")

    def on_mount(self) -> None:
        self.query_one("#help-box").border_title = "tokenwatch keys"
