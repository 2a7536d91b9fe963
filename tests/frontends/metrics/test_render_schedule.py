"""When the /metrics body is rendered: for the next scrape, just before it is due (a clock injected)."""

from __future__ import annotations

import asyncio

from tests.conftest import wait_until_async
from tests.frontends.metrics.test_exporter_published import scrape, server_session
from tokenwatch.core import RackCore
from tokenwatch.frontends.metrics import serve_metrics
from tokenwatch.frontends.metrics.render_schedule import MARGIN_RENDERS, RenderSchedule


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_first_scrape_asks_for_a_render_at_once() -> None:
    clock = Clock()
    schedule = RenderSchedule(0.5, clock)
    assert not schedule.due()  # nobody scraped: nothing is rendered
    schedule.scraped()
    assert schedule.due()
    schedule.rendering()
    assert not schedule.due()


def test_with_a_steady_interval_the_render_ends_just_before_the_next_scrape() -> None:
    clock = Clock()
    schedule = RenderSchedule(0.5, clock)
    schedule.render_s = 0.3
    schedule.scraped()
    schedule.rendering()
    clock.now += 15.0
    schedule.scraped()  # the interval is known now: 15 s
    lead = MARGIN_RENDERS * 0.3 + 2 * 0.5
    start = clock.now + 15.0 - lead
    clock.now = start - 0.01
    assert not schedule.due()  # not right after the scrape: that body would be 15 s old at the next one
    clock.now = start
    assert schedule.due()
    schedule.rendering()
    clock.now += 1.0
    assert not schedule.due()  # one render per scrape


def test_a_scrape_interval_shorter_than_a_render_renders_at_once() -> None:
    clock = Clock()
    schedule = RenderSchedule(0.5, clock)
    schedule.render_s = 2.0
    schedule.scraped()
    schedule.rendering()
    clock.now += 1.0
    schedule.scraped()
    assert schedule.due()


async def test_the_first_scrape_of_a_started_run_serves_the_run() -> None:
    """The exporter attached before the run started: its first body is of an empty core; once the run
    has started, the first scrape serves the run's figures, not that empty page."""
    core = RackCore()
    server = serve_metrics(core, 0, publish_every_s=0.05)  # attaches to this loop before any event
    session = server_session(core, minutes=2.0, speed=0.0)
    try:
        await session.run()
        await wait_until_async(
            lambda: (
                not server.rendering
                and server.last_published is not None
                and server.last_published.key[1] != -1
            ),
            "a body of the started run",
        )
        body = await asyncio.to_thread(scrape, server.port)
    finally:
        server.close()
    assert b"tokenwatch_rack_generated_tokens" in body
