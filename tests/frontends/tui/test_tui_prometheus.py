"""`--prometheus-port` with the dashboard: /metrics serves the core the dashboard shows, also after a seek.

/metrics serves the body of the last published snapshot (at most one publish interval old), so each
check waits for the body that holds the figure the core holds, with a generous ceiling.
"""

from __future__ import annotations

import asyncio
import re
import time
import urllib.request

from tests.conftest import PATIENCE_S
from tests.frontends.tui.apps import replay_app, settle
from tokenwatch.frontends.metrics import serve_metrics

NODE01_TOKENS = 'tokenwatch_node_generated_tokens_total{node="node01"}'


def scrape(port: int) -> dict[str, float]:
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=PATIENCE_S).read().decode()
    values = {}
    for line in body.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            values[re.sub(r',rack="[^"]*"', "", name)] = float(value)  # one rack: keyed by node
    return values


async def scraped_tokens(port: int, expected: int) -> float:
    """node01's generated tokens as /metrics serves them, once they are ``expected`` (the core's)."""
    deadline = time.monotonic() + PATIENCE_S
    while True:
        served = (await asyncio.to_thread(scrape, port)).get(NODE01_TOKENS)
        if served == expected or time.monotonic() > deadline:
            return -1.0 if served is None else served
        await asyncio.sleep(0.05)


async def test_metrics_follow_the_dashboards_core_through_a_seek() -> None:
    app = replay_app(at_s=20 * 60)
    exporter = serve_metrics(lambda: app.session.core, 0)
    app.on_start = lambda _app: exporter.attach_loop(asyncio.get_running_loop())
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot, app)
            tokens = int(app.session.core.state.tokens[0])
            assert await scraped_tokens(exporter.port, tokens) == tokens
            await pilot.press("shift+left")  # back 10 minutes: the player swaps in a rebuilt core
            await settle(pilot, app)
            earlier = int(app.session.core.state.tokens[0])
            assert earlier < tokens
            assert await scraped_tokens(exporter.port, earlier) == earlier
    finally:
        exporter.close()
