"""/metrics serves the body of the last snapshot: byte-for-byte today's exposition of that snapshot, never
behind the event loop, never half-written.

No test here times anything: "never behind the loop" is shown by a scrape answered while the loop is
provably held (it waits for that very scrape, with a generous ceiling).
"""

from __future__ import annotations

import asyncio
import gzip
import threading
import time
import urllib.request

from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry

from tests.conftest import PATIENCE_S, wait_until_async
from tests.frontends.metrics.test_exporter_metrics import _Mirror
from tokenwatch.core import RackCore
from tokenwatch.frontends.metrics import MetricsServer, serve_metrics
from tokenwatch.frontends.metrics.exposition import families
from tokenwatch.frontends.metrics.families import take_view
from tokenwatch.frontends.metrics.published import CoreKey, core_key
from tokenwatch.inputs.sim.collector import SimulatorCollector
from tokenwatch.inputs.sim.profile import load_profile
from tokenwatch.inputs.sim.rack_sim import SimSettings
from tokenwatch.session import Session

UP = b"# HELP tokenwatch_up 1 while tokenwatch is serving.\n# TYPE tokenwatch_up gauge\ntokenwatch_up 1.0\n"


def scrape(port: int, *, packed: bool = False) -> bytes:
    headers = {"Accept-Encoding": "gzip"} if packed else {}
    request = urllib.request.Request(f"http://127.0.0.1:{port}/metrics", headers=headers)
    with urllib.request.urlopen(request, timeout=PATIENCE_S) as answer:
        body: bytes = answer.read()
        return gzip.decompress(body) if answer.headers.get("Content-Encoding") == "gzip" else body


def server_session(core: RackCore, minutes: float, speed: float) -> Session:
    profile = load_profile("gb300-nvl72")
    settings = SimSettings(profile, scenario="Server", seed=5, duration_s=minutes * 60.0)
    return Session(core, [SimulatorCollector(settings, speed=speed)], flush_interval_s=None)


def published_key(server: MetricsServer) -> CoreKey | None:
    latest = server.last_published
    return None if latest is None else latest.key


def prometheus_client_body(core: RackCore) -> bytes:
    """The exposition of the core as it is now, written by prometheus_client's own classes."""
    view = take_view(core)
    assert view is not None
    registry = CollectorRegistry()
    registry.register(_Mirror(families(view)))
    return UP + generate_latest(registry)


async def test_the_served_body_is_the_last_snapshots_exposition_byte_for_byte() -> None:
    core = RackCore()
    session = server_session(core, minutes=2.0, speed=0.0)
    server = serve_metrics(core, 0, publish_every_s=0.05)  # inside the running loop: attaches to it
    try:
        await session.run()  # the run ends; the loop still runs and publishes the final state
        final = core_key(core)
        deadline = time.monotonic() + PATIENCE_S
        while published_key(server) != final:  # each scrape asks the loop for the next body
            assert time.monotonic() < deadline, "the final state never published by the loop"
            await asyncio.to_thread(scrape, server.port)
            await asyncio.sleep(0.05)
        expected = prometheus_client_body(core)
        assert await asyncio.to_thread(scrape, server.port) == expected
        assert await asyncio.to_thread(scrape, server.port, packed=True) == expected
    finally:
        server.close()


async def test_a_scrape_is_answered_while_the_loop_is_held() -> None:
    """A verdict tick (or a dashboard frame) holding the loop: the scrape gets the last body at once;
    before, it waited for the loop to take its snapshot (and failed after 5 s)."""
    core = RackCore()
    await server_session(core, minutes=1.0, speed=0.0).run()
    server = serve_metrics(core, 0)
    scraped = threading.Event()
    answers: list[bytes] = []
    errors: list[BaseException] = []
    try:
        await wait_until_async(lambda: published_key(server) == core_key(core), "the first body")

        def scraper() -> None:
            try:
                answers.append(scrape(server.port))
            except BaseException as exc:
                errors.append(exc)
            finally:
                scraped.set()

        thread = threading.Thread(target=scraper)
        thread.start()
        answered_while_held = scraped.wait(PATIENCE_S)  # the loop is held here until the scrape is answered
        await asyncio.to_thread(thread.join, PATIENCE_S)
    finally:
        server.close()
    assert not errors
    assert answered_while_held
    assert answers == [prometheus_client_body(core)]


async def test_scrapes_during_a_run_are_whole_bodies() -> None:
    """Bodies swapped while scrapers read them: every body read is a complete exposition (it parses,
    and holds every node's series) of one instant (the rack total is the sum of the nodes)."""
    core = RackCore()
    session = server_session(core, minutes=10.0, speed=20.0)
    server = serve_metrics(core, 0, publish_every_s=0.01)
    bodies: list[bytes] = []
    errors: list[BaseException] = []
    loop = asyncio.get_running_loop()

    def scrape_until_enough() -> None:
        while not session.stopped and sum(b"tokenwatch_rack_generated_tokens" in b for b in bodies) < 20:
            try:
                bodies.append(scrape(server.port, packed=len(bodies) % 2 == 1))
            except BaseException as exc:
                errors.append(exc)
        loop.call_soon_threadsafe(session.stop)

    thread = threading.Thread(target=scrape_until_enough)
    thread.start()
    try:
        await session.run()
    finally:
        session.stopped = True
        await asyncio.to_thread(thread.join, PATIENCE_S)
        server.close()
    assert not errors
    run = core.run
    assert run is not None
    with_figures = [b.decode() for b in bodies if b"tokenwatch_rack_generated_tokens" in b]
    assert len(with_figures) >= 20
    for body in with_figures:
        assert body.endswith("\n")
        fams = {f.name: f for f in text_string_to_metric_families(body)}
        nodes = fams["tokenwatch_node_generated_tokens"].samples
        assert sorted(s.labels["node"] for s in nodes) == sorted(run.nodes)
        assert fams["tokenwatch_rack_generated_tokens"].samples[0].value == sum(s.value for s in nodes)
