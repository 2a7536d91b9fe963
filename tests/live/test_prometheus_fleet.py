"""A 64-rack fleet watched through a real Prometheus, and through a real VictoriaMetrics: 64 simulated
racks, each served by its own tokenwatch exporter with its ``rack`` label (as 64 headless watches would),
scraped every second by the engine. The per-rack figures the server aggregates equal each rack's own
core; drill-down reads one rack's nodes and GPUs; a rack whose exporter dies is down while the others go
on; ``tokenwatch watch`` of a fleet config runs it end to end.

Cost: 64 racks of 6 nodes x 4 GPUs (~350 series each, 22,000 in all, scraped at 1 s); the cores are
simulated to t = 60 s once and then hold still, so what the server aggregates is exactly what each core
says. About 20 s per engine, most of it the engine starting and scraping.
"""

from __future__ import annotations

import asyncio
import math
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from fleet_support import (
    ENGINES,
    HeldFleet,
    expected,
    held_fleet,
    rack_name,
    serve,
)

from tests.conftest import PATIENCE_S, REPO_ROOT, cli_env, events_so_far, wait_until
from tokenwatch.base.events import (
    GPU_METRICS,
    RACK_FIGURES,
    GpuBatch,
    ProgressBatch,
    RackFiguresBatch,
    RunStarted,
)
from tokenwatch.core import RackCore
from tokenwatch.inputs.prometheus.api import PrometheusApi
from tokenwatch.inputs.prometheus.fleet import FleetSettings, PrometheusFleetCollector
from tokenwatch.recording import RecordingReader

# One worker runs the module, one engine after the other: two engines each scraping 64 exporters at once
# on a loaded machine miss scrapes.
pytestmark = [pytest.mark.timeout(180), pytest.mark.xdist_group("fleet-64-racks")]

RACKS, NODES, GPUS = 64, 6, 4
HELD_AT_S = 60.0
# A few racks with trouble: a node that throttles (slow, so likely its rack's worst), one that is down.
FAULTS = {4: "node02:throttle@20s", 9: "node03:down@30s", 17: "node01:throttle@10s,node05:down@40s"}
COL = {name: i for i, name in enumerate(RACK_FIGURES)}


@pytest.fixture(scope="module", params=ENGINES)
def fleet(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HeldFleet]:
    tmp = tmp_path_factory.mktemp(f"fleet-{request.param}")
    with held_fleet(request.param, tmp, RACKS, NODES, FAULTS, HELD_AT_S) as held:
        yield held


def collector(url: str) -> PrometheusFleetCollector:
    return PrometheusFleetCollector(FleetSettings(url=url, interval_s=1.0), now=lambda: 0.0)


async def discovered(url: str) -> tuple[PrometheusFleetCollector, RunStarted]:
    # A server loaded by the rest of the suite can let the listing query time out (discover then says
    # why and finds nothing), and a fresh server lists only the racks it has scraped so far (first in a
    # run, a listing without rack01 and rack02 put them last in the racks' order): asked again, by a
    # fresh collector, until it lists the whole fleet.
    deadline = time.monotonic() + PATIENCE_S
    while True:
        c = collector(url)
        found = await c.discover()
        whole = found is not None and len(found.nodes) == RACKS * NODES
        if whole or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.5)  # the poll interval
    assert found is not None, c._said
    assert len(found.nodes) == RACKS * NODES, "the listing never held every rack"
    started = RunStarted(
        0.0,
        "fleet",
        "Offline",
        found.nodes,
        found.gpus_per_node or 1,
        None,
        None,
        "live",
        time.time(),
        dict(found.meta),
    )
    return c, started


async def one_round(c: PrometheusFleetCollector) -> list[object]:
    async with PrometheusApi(c.settings.url) as api:
        return list(await c.poll(api, time.time() - 0.5))


def test_discovery_lists_every_rack_and_node_in_order(fleet: HeldFleet) -> None:
    c, started = asyncio.run(discovered(fleet.url))
    assert c.racks == [rack_name(r) for r in range(RACKS)]
    assert len(started.nodes) == RACKS * NODES
    assert started.nodes[:2] == ("rack01/node01", "rack01/node02")
    assert started.gpus_per_node == GPUS
    layout = started.meta["fleet"]["racks"]
    assert layout[10] == ["rack11", 10 * NODES, NODES]
    # No recording rules on this server: the raw queries make the rack figures, and the watch says so.
    assert started.meta["fleet"]["rack_figures"] == "raw"
    assert c._figures_note is not None
    assert c._figures_note.message == (
        "prometheus fleet: rack figures from the raw queries (no recorded series for every rack: group by "
        '(rack) (tokenwatch_rack:nodes_total{tokenwatch_preset="tokenwatch"}); `tokenwatch rules '
        "--recording` makes them)"
    )


def test_each_racks_figures_are_its_own_cores(fleet: HeldFleet) -> None:
    """What the server aggregates (sum/count/min/max/quantile/bottomk by rack) equals, rack by rack, the
    figures of that rack's own node-level core; and the fleet table a core makes of them equals them too."""
    c, started = asyncio.run(discovered(fleet.url))
    c.node_reader = None  # the rack figures alone
    batch = full_round(c)
    assert batch.racks == tuple(rack_name(r) for r in range(RACKS))
    assert not batch.down.any()
    core = RackCore()
    core.ingest(started)
    core.ingest(
        RackFiguresBatch(1.0, batch.racks, batch.values, batch.down, batch.worst_node, batch.worst_cause)
    )
    table = core.snapshot().fleet
    assert table is not None
    throttled_worst = 0
    for r, rack_own in enumerate(fleet.cores):
        want = expected(rack_own)
        got = batch.values[r]
        for name in ("nodes_total", "nodes_up", "gpus"):
            assert got[COL[name]] == getattr(want, name), (rack_name(r), name)
        assert got[COL["tokens_per_s"]] == pytest.approx(want.tokens_per_s, rel=1e-12)
        assert got[COL["power_w"]] == pytest.approx(want.power_w, rel=1e-12)
        assert batch.worst_node[r] == want.worst_node.split("/")[-1]
        assert batch.worst_cause[r] == ("throttling" if want.throttling else "")
        throttled_worst += want.throttling
        # The board's row, as the core makes it from the batch.
        assert table.racks[r] == rack_name(r)
        assert table.state[r] == "up"
        assert (table.nodes_total[r], table.nodes_up[r], table.gpus[r]) == (
            want.nodes_total,
            want.nodes_up,
            want.gpus,
        )
        assert table.per_gpu_tokens_per_s[r] == pytest.approx(want.per_gpu, rel=1e-12)
        assert table.tokens_per_joule[r] == pytest.approx(want.tokens_per_joule, rel=1e-12)
        assert table.spread_pct[r] == pytest.approx(want.spread_pct, rel=1e-9)
        assert table.worst_delta_pct[r] == pytest.approx(want.worst_delta_pct, rel=1e-9)
        assert list(table.nodes_of(r)) == list(range(r * NODES, (r + 1) * NODES))
    assert throttled_worst >= 1  # the faults above make a throttling node some rack's worst
    assert (batch.values[:, COL["nodes_up"]] < NODES).sum() == 2  # the two racks with a node down
    snap = core.snapshot()
    assert snap.aggregate.tokens_per_s == pytest.approx(sum(expected(k).tokens_per_s for k in fleet.cores))


def test_drill_down_fetches_one_racks_nodes(fleet: HeldFleet) -> None:
    """With rack05 on screen (and the alerting pass not due), only its nodes' counters and GPUs come,
    and they are its core's."""
    c, _ = asyncio.run(discovered(fleet.url))
    c.focus.show({"rack05"})
    events: list[object] = []

    def rack05_scraped() -> bool:
        """A round with rack05's series in it: on a loaded machine a scrape can miss its timeout, and the
        server then drops that rack's series from its answers until the next scrape."""
        nonlocal events
        c.alerting_pass.counted_from = time.time()  # the whole-fleet pass has just been done
        events = asyncio.run(one_round(c))
        return any(isinstance(e, GpuBatch) for e in events)

    wait_until(rack05_scraped, "a round with rack05's GPUs", poll_s=0.5)
    gpu = [e for e in events if isinstance(e, GpuBatch)]
    progress = [e for e in events if isinstance(e, ProgressBatch)]
    assert len(gpu) == 1
    assert len(progress) == 1
    first = 4 * NODES
    assert sorted(set(gpu[0].node_index.tolist())) == list(range(first, first + NODES))
    own = fleet.cores[4].snapshot()
    power = GPU_METRICS.index("power_w")
    for row in range(len(gpu[0].gpu)):
        node, g = int(gpu[0].node_index[row]) - first, int(gpu[0].gpu[row])
        want = own.gpus.values[node, g, power]
        if math.isfinite(want):
            assert gpu[0].values[row, power] == pytest.approx(want)
    tokens = dict(zip(progress[0].node_index.tolist(), progress[0].tokens_done.tolist(), strict=True))
    assert tokens == {first + i: int(own.nodes.tokens_done[i]) for i in range(NODES)}


def test_the_alerting_pass_reads_every_node(fleet: HeldFleet) -> None:
    c, _ = asyncio.run(discovered(fleet.url))
    progress: ProgressBatch | None = None

    def every_node() -> bool:
        """An alerting pass (each round made the first again) that reached every node: on a loaded
        machine a scrape can miss its timeout and leave a rack's series out of one round."""
        nonlocal progress
        c.alerting_pass.counted_from = -math.inf
        events = asyncio.run(one_round(c))
        progress = next(e for e in events if isinstance(e, ProgressBatch))
        return len(progress.node_index) == RACKS * NODES

    wait_until(every_node, "an alerting pass that reached every node", poll_s=0.5)
    assert progress is not None
    tokens = progress.tokens_done.reshape(RACKS, NODES)
    for r in (0, 31, 63):
        assert tokens[r].tolist() == fleet.cores[r].snapshot().nodes.tokens_done.tolist()


def test_watch_of_a_fleet_config_end_to_end(fleet: HeldFleet, tmp_path: Path) -> None:
    """``tokenwatch check`` and ``tokenwatch watch --headless`` of a fleet config: the recording starts
    with the fleet's nodes and its racks' node ranges, and holds the rack figures."""
    config = tmp_path / "fleet.yaml"
    config.write_text(
        "run: {name: fleet, scenario: Offline}\n"
        "nodes: {rack_label: rack}\n"
        f"fleet: {{url: '{fleet.url}', interval: 1s, lookback: 0s}}\n"
    )
    check = subprocess.run(
        [sys.executable, "-m", "tokenwatch", "check", str(config)],
        capture_output=True,
        text=True,
        env=cli_env(),
        cwd=REPO_ROOT,
        timeout=60,
        check=False,
    )
    assert check.returncode == 0, check.stderr
    assert f"a fleet through Prometheus at {fleet.url}" in check.stdout
    recording = tmp_path / "fleet.jsonl"
    watch = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tokenwatch",
            "watch",
            str(config),
            "--headless",
            "--interval",
            "1s",
            "--record",
            str(recording),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cli_env(),
        cwd=REPO_ROOT,
    )
    try:
        # Three rounds, one of them with every rack scraped, however long they take (a loaded machine made
        # two in a fixed 4 s, and a scrape can miss Prometheus's 900-ms timeout there), then Ctrl-C.
        wait_until(
            lambda: (
                watch.poll() is not None or (rack_batches(recording) >= 3 and full_batches(recording) >= 1)
            ),
            "three rounds of rack figures, one with every rack up",
        )
        watch.send_signal(signal.SIGINT)
        _, err = watch.communicate(timeout=PATIENCE_S)
    finally:
        if watch.poll() is None:
            watch.kill()
            watch.communicate()
    assert watch.returncode == 130, err  # interrupted, as Ctrl-C is
    events = list(RecordingReader(recording).events())
    started = events[0]
    assert isinstance(started, RunStarted)
    assert len(started.nodes) == RACKS * NODES
    assert started.meta["fleet"]["racks"][0] == ["rack01", 0, NODES]
    batches = [e for e in events if isinstance(e, RackFiguresBatch)]
    assert len(batches) >= 3
    full = [b for b in batches if every_rack_up(b)]
    want = sum(expected(k).tokens_per_s for k in fleet.cores)
    assert float(np.nansum(full[-1].values[:, COL["tokens_per_s"]])) == pytest.approx(want, rel=1e-9)


@pytest.mark.timeout(360)  # its discovery and the dead rack's wait, each allowed more on a loaded server
def test_a_rack_whose_exporter_dies_is_down_the_others_go_on(fleet: HeldFleet) -> None:
    """rack07's exporter stops: once Prometheus has failed to scrape it, rack07 is down (its figures
    unknown, its size kept) and every other rack's figures are what they were. It comes back after."""
    c, started = asyncio.run(discovered(fleet.url))
    c.node_reader = None
    before = full_round(c)
    dead = 6
    others = [r for r in range(RACKS) if r != dead]
    known = np.isfinite(before.values[others])
    port = fleet.servers[dead].port
    fleet.servers[dead].close()
    try:
        after = before

        def only_dead_gone() -> bool:
            """A round with it down and every other rack as whole as before (under load a late scrape
            can leave another rack's series, or some of them, out of one round)."""
            return bool(
                after.down[dead]
                and after.down.sum() == 1
                and (np.isfinite(after.values[others]) == known).all()
            )

        # Two patience spans: on a loaded machine a rack's scrapes (900 ms allowed) fail for a while too.
        deadline = time.monotonic() + 2 * PATIENCE_S
        while not only_dead_gone() and time.monotonic() < deadline:
            time.sleep(0.5)  # the poll interval: a round each time
            # A round whose queries timed out on a loaded server has no figures (it says why): the next.
            after = next((e for e in asyncio.run(one_round(c)) if isinstance(e, RackFiguresBatch)), after)
        assert after.down.tolist() == [r == dead for r in range(RACKS)]
        assert after.values[dead, COL["nodes_total"]] == NODES  # its size is still known
        assert np.isnan(after.values[dead, COL["tokens_per_s"]])
        # Equal but for the order the engine adds in (VictoriaMetrics' sums differ in the last bit).
        np.testing.assert_allclose(after.values[others], before.values[others], rtol=1e-12)
        core = RackCore()
        core.ingest(started)
        core.ingest(
            RackFiguresBatch(1.0, after.racks, after.values, after.down, after.worst_node, after.worst_cause)
        )
        table = core.snapshot().fleet
        assert table is not None
        assert table.state[dead] == "down"
        assert table.nodes_up[dead] == 0
        assert all(table.state[r] == "up" for r in others)
    finally:
        fleet.servers[dead] = serve(fleet.cores[dead], port)


def recorded_batches(recording: Path) -> list[RackFiguresBatch]:
    """The rounds of rack figures the recording being written holds."""
    return [e for e in events_so_far(recording) if isinstance(e, RackFiguresBatch)]


def rack_batches(recording: Path) -> int:
    return len(recorded_batches(recording))


def full_batches(recording: Path) -> int:
    """The rounds in which every rack was up (on a loaded machine a scrape can miss its timeout)."""
    return sum(every_rack_up(b) for b in recorded_batches(recording))


def every_rack_up(batch: RackFiguresBatch) -> bool:
    return len(batch.racks) == RACKS and not batch.down.any()


def full_round(c: PrometheusFleetCollector) -> RackFiguresBatch:
    """The first round with every rack's figures (a scrape that missed its timeout leaves a rack out)."""
    batch: RackFiguresBatch | None = None

    def every_rack() -> bool:
        nonlocal batch
        found = next((e for e in asyncio.run(one_round(c)) if isinstance(e, RackFiguresBatch)), None)
        batch = found if found is not None else batch  # a round with no figures (timed out): the next
        return found is not None and every_rack_up(found)

    wait_until(every_rack, "a round with every rack scraped", poll_s=0.5)
    assert batch is not None
    return batch
