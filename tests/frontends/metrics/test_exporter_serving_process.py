"""/metrics is answered by a process of its own: a scrape needs nothing of the tokenwatch process at the
moment it comes, neither its event loop, nor a render in progress, nor its interpreter (the GIL).

Nothing here is timed: each test holds the part a scrape must not need, until the scrape is answered
(with a generous ceiling), and then compares the body byte for byte with prometheus_client's exposition
of the state it must show.
"""

from __future__ import annotations

import asyncio
import contextlib
import mmap
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import PATIENCE_S, REPO_ROOT, cli_env, start_listening, wait_until_async
from tests.frontends.metrics.test_exporter_published import (
    prometheus_client_body,
    published_key,
    scrape,
)
from tokenwatch.base.events import Event
from tokenwatch.core import RackCore
from tokenwatch.frontends.metrics import serve_metrics
from tokenwatch.frontends.metrics.published import _RENDER_LOCK, core_key
from tokenwatch.inputs.sim.profile import load_profile
from tokenwatch.inputs.sim.rack_sim import RackSimulation, SimSettings

# Another process scrapes once and then marks a byte of a shared file: read through an mmap, a check of
# that byte never lets go of the GIL (a file check would: os.stat releases it).
SCRAPER = """
import mmap, sys, urllib.request
body = urllib.request.urlopen(sys.argv[1], timeout=float(sys.argv[4])).read()
open(sys.argv[2], "wb").write(body)
with open(sys.argv[3], "r+b") as flag, mmap.mmap(flag.fileno(), 1) as mark:
    mark[0] = 1
"""


def server_run(seconds: float) -> list[Event]:
    profile = load_profile("gb300-nvl72")
    settings = SimSettings(profile, scenario="Server", seed=5, duration_s=seconds)
    return list(RackSimulation(settings).events())


def fed(events: list[Event]) -> RackCore:
    core = RackCore()
    for event in events:
        core.ingest(event)
    return core


async def test_a_scrape_is_answered_while_this_process_holds_its_loop_and_its_gil(tmp_path: Path) -> None:
    """The loop's thread spins in Python with a switch interval longer than the ceiling, so no other
    thread of this process runs; a scraper in another process is answered all the same."""
    core = fed(server_run(60.0))
    expected = prometheus_client_body(core)
    server = serve_metrics(core, 0)
    body_file, flag_file = tmp_path / "body", tmp_path / "answered"
    flag_file.write_bytes(b"\0")
    switch_before = sys.getswitchinterval()
    try:
        await wait_until_async(lambda: published_key(server) == core_key(core), "the first body")
        assert await asyncio.to_thread(scrape, server.port) == expected  # the serving process holds it
        url = f"http://127.0.0.1:{server.port}/metrics"
        # Blocking the loop is the point here: the scrape must be answered while it is held.
        scraper = subprocess.Popen(  # noqa: ASYNC220
            [sys.executable, "-c", SCRAPER, url, str(body_file), str(flag_file), str(PATIENCE_S)]
        )
        with flag_file.open("r+b") as flag, mmap.mmap(flag.fileno(), 1) as answered:
            sys.setswitchinterval(PATIENCE_S * 2)  # this thread keeps the GIL while it spins below
            deadline = time.monotonic() + PATIENCE_S
            while not answered[0] and time.monotonic() < deadline:
                pass
            sys.setswitchinterval(switch_before)
            answered_while_held = bool(answered[0])
        await asyncio.to_thread(scraper.wait, PATIENCE_S)
    finally:
        sys.setswitchinterval(switch_before)
        server.close()
    assert answered_while_held
    assert scraper.returncode == 0
    assert body_file.read_bytes() == expected


async def test_a_scrape_during_a_render_gets_the_previous_whole_body() -> None:
    """The render of the next body is held half-way (it waits for the exposition's lock); a scrape then
    serves the body before it, whole; once the render finishes, the new one."""
    events = server_run(120.0)
    half = len(events) // 2
    core = fed(events[:half])
    before = prometheus_client_body(core)
    server = serve_metrics(core, 0, publish_every_s=0.05)
    try:
        await wait_until_async(lambda: published_key(server) == core_key(core), "the first body")
        assert await asyncio.to_thread(scrape, server.port) == before
        with _RENDER_LOCK:  # the render thread waits here, inside the next render
            for event in events[half:]:
                core.ingest(event)
            after = prometheus_client_body(core)
            assert after != before
            assert await asyncio.to_thread(scrape, server.port) == before  # asks for the next body
            await wait_until_async(lambda: server.rendering, "the render of the moved core to begin")
            for packed in (False, True):
                assert await asyncio.to_thread(scrape, server.port, packed=packed) == before
            assert server.rendering  # still held: those scrapes were answered during the render
        await wait_until_async(lambda: published_key(server) == core_key(core), "the render to finish")
        assert await asyncio.to_thread(scrape, server.port) == after
    finally:
        server.close()


def test_without_a_loop_each_scrape_reads_the_core_as_it_is() -> None:
    """No loop feeds the core (before or after a run): the serving process asks for each scrape, so a
    scrape after the core moved serves the moved core, not the body it held."""
    events = server_run(120.0)
    half = len(events) // 2
    core = fed(events[:half])
    server = serve_metrics(core, 0)  # no running loop here
    try:
        assert scrape(server.port) == prometheus_client_body(core)
        for event in events[half:]:
            core.ingest(event)
        assert scrape(server.port, packed=True) == prometheus_client_body(core)
    finally:
        server.close()


def test_closing_the_server_ends_its_process_and_frees_the_port() -> None:
    server = serve_metrics(fed(server_run(30.0)), 0)
    port = server.port
    assert scrape(port)
    server.close()
    assert server.process_exit_code == 0
    with socket.socket() as again:  # bind and listen fail (EADDRINUSE) while the process still listens
        again.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        again.bind(("127.0.0.1", port))
        again.listen(1)


def test_ctrl_c_in_a_terminal_stops_a_headless_run_without_a_traceback() -> None:
    """Ctrl-C in a terminal signals the whole foreground process group, the serving process too: it
    leaves the stop to tokenwatch (and ends when tokenwatch closes it), so no traceback of it shows."""
    argv = ["sim", "--duration", "10m", "--speed", "1", "--headless", "--prometheus-port"]
    proc, port = start_listening(
        lambda port: subprocess.Popen(
            [sys.executable, "-m", "tokenwatch", *argv, str(port)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=cli_env(),
            cwd=REPO_ROOT,
            start_new_session=True,  # its own group, as a terminal's foreground job
        ),
        "the exporter",
    )
    try:
        deadline = time.monotonic() + PATIENCE_S
        while True:  # the run's figures served: the serving process runs and holds a body
            with contextlib.suppress(OSError):
                if b"tokenwatch_rack_generated_tokens" in scrape(port):
                    break
            assert time.monotonic() < deadline, "no run figures served"
            time.sleep(0.2)
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=PATIENCE_S)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode == 130
    assert "Traceback" not in err
    assert "KeyboardInterrupt" not in err
