"""A watch that attaches to a run in progress reads its nodes' backlogs before the run starts (minutes of
logs at rack size): that load is a :class:`~tokenwatch.base.loading.Loading` the session names while it
goes, which the dashboard's header and a headless watch's terminal say (``reading the backlog of 1 node:
43 %``), and which is over, at 100 %, once the run has started with its history."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest
from live_support import LiveRun, VllmLog, attached_at

from tokenwatch.base.loading import Loading
from tokenwatch.inputs.config import load_watch_config
from tokenwatch.inputs.watch import build_collector

pytestmark = pytest.mark.timeout(120)


async def test_reading_a_backlog_is_a_load_the_session_names_until_the_history_is_in(tmp_path: Path) -> None:
    log = VllmLog(tmp_path / "vllm.log")
    log.backlog(5.0, 10.0, lambda _: 800.0)
    cfg = tmp_path / "local.yaml"
    cfg.write_text(
        "run: {name: one-box}\ngpu: {source: none}\n"
        f"progress:\n  - {{kind: log, preset: vllm, path: '{log.path}'}}\n"
    )
    config = load_watch_config(cfg)
    run = LiveRun(config, build_collector(config))
    named: list[Loading] = []

    async def watch_loads() -> None:  # what the front ends poll: the session's load under way
        while True:
            loading = run.session.loading()
            if loading is not None and loading not in named:
                named.append(loading)
            await asyncio.sleep(0)

    async with run:
        watcher = asyncio.create_task(watch_loads())
        try:
            await run.wait_for(
                "the history", lambda: (a := attached_at(run)) is not None and run.core.now >= a
            )
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
        assert run.session.loading() is None  # over: nothing to say any more
    loading = run.collector.loading
    assert loading is not None
    assert named == [loading]  # the session named it while the backlog was read
    assert loading.what == "reading the backlog of 1 node"
    assert loading.share == pytest.approx(1.0)
    assert loading.finished_at is not None
    assert loading.done_text().startswith("reading the backlog of 1 node: done in ")
