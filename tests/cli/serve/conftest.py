"""The browser view's fixtures: ``tokenwatch serve`` as a real process, headless Chromium over CDP."""

from __future__ import annotations

import re
import signal
import subprocess
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cli.serve.cdp import CHROMIUM, Browser, Page
from tests.conftest import PATIENCE_S, start_tokenwatch


@dataclass
class Served:
    """A running ``tokenwatch serve`` and the address it printed (``http://127.0.0.1:PORT/?token=...``)."""

    process: subprocess.Popen[str]
    url: str

    @property
    def base(self) -> str:
        """``http://127.0.0.1:PORT``: the page's origin."""
        return self.url.split("/?", 1)[0]

    @property
    def port(self) -> int:
        return int(self.base.rsplit(":", 1)[1])

    @property
    def token(self) -> str:
        return self.url.split("?token=", 1)[1]

    @property
    def ws_url(self) -> str:
        """The websocket the page opens (textual-serve's script adds the terminal's size)."""
        return f"ws://127.0.0.1:{self.port}/ws/{self.token}?width=120&height=40"

    def stop(
        self, timeout_s: float = PATIENCE_S, sig: signal.Signals = signal.SIGINT
    ) -> tuple[int, str, str]:
        """Ctrl-C as a terminal sends it (or ``sig``); returns (exit status, stdout, stderr)."""
        self.process.send_signal(sig)
        out, err = self.process.communicate(timeout=timeout_s)
        return self.process.returncode, out, err


ServeFactory = Callable[..., Served]


@pytest.fixture
def serve() -> Iterator[ServeFactory]:
    """``serve("sim", "--speed", "0")``: ``tokenwatch serve --port 0 -- sim --speed 0``, Ctrl-C after;
    ``options=("--max-viewers", "60")`` go to serve itself."""
    started: list[Served] = []

    def start(*run_command: str, options: tuple[str, ...] = ()) -> Served:
        process = start_tokenwatch("serve", "--port", "0", *options, "--", *run_command)
        assert process.stdout is not None
        first = process.stdout.readline()  # the line naming the address, once it listens
        found = re.search(r" on (http://\S+) \(Ctrl-C stops\)", first)
        if found is None:
            process.kill()
            _, err = process.communicate()
            raise AssertionError(f"tokenwatch serve did not start: {first!r} {err!r}")
        served = Served(process, found.group(1))
        started.append(served)
        return served

    yield start
    for served in started:
        if served.process.poll() is None:
            try:
                served.stop()
            except subprocess.TimeoutExpired:
                served.process.kill()
                served.process.communicate()


@pytest.fixture
async def browser(tmp_path: Path) -> AsyncIterator[Browser]:
    """A fresh headless Chromium (its own profile; the machine has no network)."""
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    started = await Browser.start(tmp_path / "chromium-profile")
    try:
        yield started
    finally:
        await started.close()


@pytest.fixture
def page(browser: Browser) -> Page:
    """The browser's first tab."""
    assert browser.page is not None
    return browser.page
