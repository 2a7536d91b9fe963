"""The browser view's fixtures: ``tokenwatch serve`` as a real process, headless Chromium over CDP."""

from __future__ import annotations

import re
import signal
import subprocess
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import PATIENCE_S, start_tokenwatch
from tests.serve.cdp import CHROMIUM, Browser, Page


@dataclass
class Served:
    """A running ``tokenwatch serve`` and the address it printed."""

    process: subprocess.Popen[str]
    url: str

    def stop(self, timeout_s: float = PATIENCE_S) -> tuple[int, str, str]:
        """Ctrl-C, as a terminal sends it to the server; returns (exit status, stdout, stderr)."""
        self.process.send_signal(signal.SIGINT)
        out, err = self.process.communicate(timeout=timeout_s)
        return self.process.returncode, out, err


ServeFactory = Callable[..., Served]


@pytest.fixture
def serve() -> Iterator[ServeFactory]:
    """``serve("sim", "--speed", "0")``: ``tokenwatch serve --port 0 -- sim --speed 0``, Ctrl-C after."""
    started: list[Served] = []

    def start(*run_command: str) -> Served:
        process = start_tokenwatch("serve", "--port", "0", "--", *run_command)
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
async def page(tmp_path: Path) -> AsyncIterator[Page]:
    """One tab of a fresh headless Chromium (its own profile; the machine has no network)."""
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    browser = await Browser.start(tmp_path / "chromium-profile")
    assert browser.page is not None
    try:
        yield browser.page
    finally:
        await browser.close()
