"""A small Chrome DevTools Protocol client: headless Chromium, one page, over aiohttp's websocket client.

Enough to load textual-serve's page, read what its terminal shows and press keys in it the way a user's
keyboard does (``Input.dispatchKeyEvent`` into the focused terminal).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp

from tests.conftest import PATIENCE_S

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--remote-debugging-port=0",  # the port it took is written to DevToolsActivePort in the profile
    "--window-size=1600,1400",  # tall enough for the heatmap below the verdict panel and the node table
)

# textual-serve keeps its xterm.js terminal in a closure: its bundle assigns `this.terminal = ...`. A
# setter on Object.prototype sees that assignment, keeps the terminal where the test can read it, and then
# steps aside (the property becomes an ordinary one on that object).
CAPTURE_TERMINAL = """
Object.defineProperty(Object.prototype, "terminal", {
  configurable: true,
  get() { return undefined; },
  set(value) {
    Object.defineProperty(this, "terminal", {value, writable: true, configurable: true, enumerable: true});
    if (value && value.buffer) (window.__tokenwatchTerminals ||= []).push(value);
  },
});
"""

# The rows the terminal shows now, as text (xterm.js's public buffer API).
SCREEN_TEXT = """
(() => {
  const terminal = (window.__tokenwatchTerminals || [])[0];
  if (!terminal) return null;
  const buffer = terminal.buffer.active;
  const rows = [];
  for (let y = 0; y < terminal.rows; y++) {
    const line = buffer.getLine(buffer.viewportY + y);
    rows.push(line ? line.translateToString(true) : "");
  }
  return rows.join("\\n");
})()
"""

# US keyboard: what Chromium needs to type each key the tests press.
_KEYS: dict[str, tuple[str, int, int]] = {  # key -> (code, windowsVirtualKeyCode, modifiers)
    "m": ("KeyM", 77, 0),
    "s": ("KeyS", 83, 0),
    "?": ("Slash", 191, 8),  # 8: shift
}


class CdpError(RuntimeError):
    pass


class Browser:
    """Headless Chromium started with a fresh profile and its DevTools port; ``page`` is its one tab."""

    def __init__(self, process: asyncio.subprocess.Process, http: aiohttp.ClientSession) -> None:
        self.process = process
        self.http = http
        self.page: Page | None = None
        self.pages: list[Page] = []
        self.devtools_port = 0

    @classmethod
    async def start(cls, profile: Path, timeout_s: float = PATIENCE_S) -> Browser:
        assert CHROMIUM is not None
        profile.mkdir(parents=True, exist_ok=True)
        process = await asyncio.create_subprocess_exec(
            CHROMIUM,
            *CHROMIUM_FLAGS,
            f"--user-data-dir={profile}",
            "about:blank",
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        browser = cls(process, aiohttp.ClientSession())
        try:
            port = await _devtools_port(profile / "DevToolsActivePort", process, timeout_s)
            browser.devtools_port = port
            async with browser.http.get(f"http://127.0.0.1:{port}/json/list") as response:
                targets = await response.json()
            page_ws = next(t["webSocketDebuggerUrl"] for t in targets if t["type"] == "page")
            browser.page = Page(await browser.http.ws_connect(page_ws, max_msg_size=0))
            browser.pages.append(browser.page)
        except BaseException:
            await browser.close()
            raise
        return browser

    async def new_page(self) -> Page:
        """Another tab of the same browser (same profile: it shares the first tab's cookies)."""
        url = f"http://127.0.0.1:{self.devtools_port}/json/new?about:blank"
        async with self.http.put(url) as response:
            target = await response.json()
        page = Page(await self.http.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0))
        self.pages.append(page)
        return page

    async def close(self) -> None:
        for page in self.pages:
            await page.close()
        await self.http.close()
        if self.process.returncode is None:
            self.process.terminate()
            try:
                await asyncio.wait_for(self.process.wait(), PATIENCE_S)
            except TimeoutError:
                self.process.kill()
                await self.process.wait()


async def _devtools_port(path: Path, process: asyncio.subprocess.Process, timeout_s: float) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.returncode is not None:
            raise CdpError(f"chromium exited with status {process.returncode}")
        with contextlib.suppress(OSError, ValueError, IndexError):
            return int(path.read_text().split()[0])
        await asyncio.sleep(0.05)
    raise CdpError(f"chromium wrote no DevTools port in {timeout_s} s")


class Page:
    """One tab's DevTools connection: commands by id, answers matched to them, events ignored."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._reader = asyncio.create_task(self._read())
        self._capturing = False

    async def _read(self) -> None:
        async for message in self.ws:
            if message.type != aiohttp.WSMsgType.TEXT:
                continue
            answer = message.json()
            future = self._waiting.pop(answer.get("id", -1), None)
            if future is not None and not future.done():
                future.set_result(answer)
        for future in self._waiting.values():
            if not future.done():  # one whose wait timed out is cancelled already
                future.set_exception(CdpError("the DevTools connection closed"))

    async def send(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        number = next(self._ids)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[number] = future
        await self.ws.send_json({"id": number, "method": method, "params": params or {}})
        answer = await asyncio.wait_for(future, PATIENCE_S)
        if "error" in answer:
            raise CdpError(f"{method}: {answer['error']}")
        result: dict[str, Any] = answer.get("result", {})
        return result

    async def open(self, url: str) -> None:
        """Load ``url`` with the terminal capture in place before the page's own scripts run."""
        if not self._capturing:
            await self.send("Page.enable")
            await self.send("Page.addScriptToEvaluateOnNewDocument", {"source": CAPTURE_TERMINAL})
            self._capturing = True
        await self.send("Page.navigate", {"url": url})

    async def evaluate(self, expression: str) -> Any:
        answer = await self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in answer:
            raise CdpError(f"{expression[:60]}...: {answer['exceptionDetails']}")
        return answer["result"].get("value")

    async def screen_text(self) -> str:
        text = await self.evaluate(SCREEN_TEXT)
        return text if isinstance(text, str) else ""

    async def terminal_shown(self) -> bool:
        """Whether the page shows its terminal: it has drawn, and no "Session ended" dialog covers it."""
        classes = str(await self.evaluate("document.body.className")).split()
        return "-first-byte" in classes and "-closed" not in classes

    async def wait_until(self, shows: Callable[[str], bool], what: str, timeout_s: float = PATIENCE_S) -> str:
        """The screen once ``shows(screen)`` holds; fails with what it showed instead."""
        deadline = time.monotonic() + timeout_s
        text = ""
        while time.monotonic() < deadline:
            text = await self.screen_text()
            if text and shows(text):
                return text
            await asyncio.sleep(0.1)
        raise AssertionError(f"the page never showed {what} in {timeout_s} s; it showed:\n{text}")

    async def wait_for_text(self, *wanted: str, timeout_s: float = PATIENCE_S) -> str:
        """The screen once it shows every string in ``wanted``."""
        return await self.wait_until(lambda text: all(w in text for w in wanted), repr(wanted), timeout_s)

    async def settled_text(self, *wanted: str, timeout_s: float = PATIENCE_S) -> str:
        """The screen once it shows ``wanted`` and two reads 0.3 s apart agree (no frame half drawn)."""
        text = await self.wait_for_text(*wanted, timeout_s=timeout_s)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            await asyncio.sleep(0.3)
            again = await self.screen_text()
            if again == text:
                return text
            text = again
        raise AssertionError(f"the page kept changing for {timeout_s} s; last:\n{text}")

    async def wait_without(self, gone: str, timeout_s: float = PATIENCE_S) -> str:
        """The screen once ``gone`` has left it."""
        return await self.wait_until(lambda text: gone not in text, f"no {gone!r}", timeout_s)

    async def press(self, key: str) -> None:
        """Type ``key`` into the terminal as a keyboard would: focus, key down (with its text), key up."""
        code, virtual, modifiers = _KEYS[key]
        await self.evaluate("document.querySelector('.xterm-helper-textarea').focus()")
        common = {"key": key, "code": code, "windowsVirtualKeyCode": virtual, "modifiers": modifiers}
        await self.send("Input.dispatchKeyEvent", {"type": "keyDown", "text": key, **common})
        await self.send("Input.dispatchKeyEvent", {"type": "keyUp", **common})

    async def close(self) -> None:
        await self.ws.close()
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reader
