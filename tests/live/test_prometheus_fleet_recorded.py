"""The fleet's recording rules (``tokenwatch rules --recording``) in a real Prometheus: their expressions are
the fleet watch's own queries, promtool accepts them, the recorded series equal the raw queries' values,
and a fleet watch that finds them reads them and shows the same board as one that reads the raw queries.

Cost: 8 racks of 6 nodes x 4 GPUs, each on its own exporter, held still at t = 60 s (so a figure recorded
at the rules' last evaluation is exactly the raw query's now), scraped and evaluated every second.
"""

from __future__ import annotations

import asyncio
import math
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from fleet_support import PROMETHEUS, Prometheus, close_all, rack_core, rack_events, rack_name, serve

from tests.conftest import run_tokenwatch, wait_until
from tests.machine_share import paused_while_others_time
from tokenwatch.base.events import Notice, RackFiguresBatch
from tokenwatch.frontends.metrics import MetricsServer
from tokenwatch.inputs.prometheus.api import PrometheusApi, Sample
from tokenwatch.inputs.prometheus.fleet import FleetSettings, PrometheusFleetCollector
from tokenwatch.sources.fleet_queries import FLEET_PRESETS, rack_queries
from tokenwatch.sources.fleet_rules import RuleSet, recorded_name

PROMTOOL = shutil.which("promtool")
RACKS, NODES = 8, 6
HELD_AT_S = 60.0
FAULTS = {1: "node02:throttle@20s", 3: "node03:down@30s", 6: "node01:throttle@10s,node05:down@40s"}

pytestmark = [pytest.mark.timeout(240), pytest.mark.xdist_group("fleet-recorded")]


def rule_file(*args: str) -> dict[str, Any]:
    result = run_tokenwatch("rules", *args)
    assert result.returncode == 0, result.stderr
    doc = yaml.safe_load(result.stdout)
    assert isinstance(doc, dict)
    return doc


def recording_group(doc: dict[str, Any]) -> dict[str, Any]:
    groups = doc["groups"]
    assert isinstance(groups, list)
    (group,) = [g for g in groups if g["name"] == "tokenwatch-rack-figures"]
    assert isinstance(group, dict)
    return group


@pytest.mark.parametrize("preset", sorted(FLEET_PRESETS))
def test_the_rules_are_the_fleet_watchs_own_queries(preset: str) -> None:
    """One source of truth: the printed rules' expressions are, field by field, the PromQL the fleet
    watch sends for its rack figures with the same labels and rate window; the recorded names are the
    ones it reads."""
    settings = FleetSettings(
        url="http://127.0.0.1:9", preset=preset, rack_label="cluster_rack", node_label="host", window_s=120.0
    )
    c = PrometheusFleetCollector(settings, now=lambda: 0.0)
    sent = {field: c._q(template) for field, template in c.templates.items()}
    assert c.figure_queries.raw == sent
    doc = rule_file(
        "--recording", "--preset", preset, "--rack-label", "cluster_rack", "--node-label", "host",
        "--rate-window", "2m", "--interval", "5s",
    )  # fmt: skip
    group = recording_group(doc)
    assert group["interval"] == "5s"
    rules = group["rules"]
    assert isinstance(rules, list)
    assert {r["record"]: r["expr"] for r in rules} == {recorded_name(f): q for f, q in sent.items()}
    assert set(sent) == set(rack_queries(FLEET_PRESETS[preset]))
    # What the watch reads where the rules run: each rule's series, with the labels the rule adds.
    for r in rules:
        field = r["record"].removeprefix("tokenwatch_rack:")
        selector = c.figure_queries.recorded[field]
        assert selector.startswith(r["record"] + "{")
        for label, value in r["labels"].items():
            assert f'{label}="{value}"' in selector
    window = [r["labels"].get("tokenwatch_rate_window") for r in rules]
    assert window == [None if preset == "tokenwatch" else "120s"] * len(rules)


def test_rules_alone_prints_both_groups_and_each_flag_its_own() -> None:
    both = rule_file()
    assert [g["name"] for g in both["groups"]] == ["tokenwatch", "tokenwatch-rack-figures"]
    assert [g["name"] for g in rule_file("--alerting")["groups"]] == ["tokenwatch"]
    assert [g["name"] for g in rule_file("--recording")["groups"]] == ["tokenwatch-rack-figures"]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--node-label", "a-b"), "tokenwatch rules: --node-label 'a-b' is not a Prometheus label name"),
        (
            ("--preset", "nope"),
            "tokenwatch rules: unknown --preset 'nope'; presets: tokenwatch, vllm, sglang",
        ),
        (("--interval", "0s"), "must be longer than zero"),
    ],
)
def test_bad_rule_options_are_one_line(args: tuple[str, ...], said: str) -> None:
    result = run_tokenwatch("rules", *args)
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1
    assert said in result.stderr
    assert result.stdout == ""


@pytest.mark.skipif(PROMTOOL is None, reason="promtool is not installed (apt-get install prometheus)")
@pytest.mark.parametrize("preset", sorted(FLEET_PRESETS))
def test_promtool_accepts_the_recording_rules(tmp_path: Path, preset: str) -> None:
    path = tmp_path / "rules.yml"
    path.write_text(run_tokenwatch("rules", "--preset", preset).stdout)
    assert PROMTOOL is not None
    checked = subprocess.run(
        [PROMTOOL, "check", "rules", str(path)], capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    figures = len(rack_queries(FLEET_PRESETS[preset]))
    assert f"SUCCESS: {4 + figures} rules found" in checked.stdout


# ------------------------------------------------------------------------------------ a real Prometheus
@dataclass
class RuledFleet:
    url: str
    servers: list[MetricsServer]
    rules_loaded_at: float  # Unix time: the racks were scraped for seconds before the rules were loaded
    early: PrometheusFleetCollector  # a watch that listed the fleet before the rules were loaded


def collector(url: str) -> PrometheusFleetCollector:
    return PrometheusFleetCollector(FleetSettings(url=url, interval_s=1.0), now=lambda: 0.0)


def listed_with_the_recorded_series(url: str) -> PrometheusFleetCollector:
    """A watch that listed the fleet and found the recorded series of every rack. On the loaded machine a
    scrape that missed its timeout leaves its rack out of the rules' next evaluation (that rack's recorded
    series stale until the one after): the server's answer at that instant, so the listing is asked again."""
    found: list[PrometheusFleetCollector] = []

    def listed() -> bool:
        c = collector(url)
        found[:] = [c] if asyncio.run(c.discover()) is not None and c.figure_queries.using_recorded else []
        return bool(found)

    wait_until(listed, "a listing that finds every rack's recorded series", poll_s=0.5)
    return found[0]


def recorded_racks(url: str) -> set[str]:
    async def ask() -> list[Sample]:
        async with PrometheusApi(url) as api:
            return await api.query(
                'group by (rack) (tokenwatch_rack:nodes_total{tokenwatch_preset="tokenwatch"})'
            )

    return {labels.get("rack", "") for labels, _ in asyncio.run(ask())}


@pytest.fixture(scope="module")
def ruled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RuledFleet]:
    if PROMETHEUS is None:
        pytest.skip("prometheus is not installed (apt-get install prometheus)")
    cores = [
        rack_core(rack_events(r, NODES, FAULTS.get(r, ""), until_s=HELD_AT_S), HELD_AT_S)
        for r in range(RACKS)
    ]
    servers = [serve(core) for core in cores]
    tmp = tmp_path_factory.mktemp("fleet-recorded")
    prom = Prometheus(tmp, [f"127.0.0.1:{s.port}" for s in servers])
    rules = tmp / "tokenwatch-rules.yml"
    rules.write_text(run_tokenwatch("rules", "--recording", "--interval", "1s").stdout)
    prom.start()
    try:
        prom.wait_until_scraped()
        early = collector(prom.url)
        assert asyncio.run(early.discover()) is not None
        # The rules are loaded while the fleet runs (a reload, as an operator adds them): its history
        # holds seconds of raw figures before the first recorded one.
        scraped = time.time()
        wait_until(lambda: time.time() >= scraped + 3.0, "three seconds of raw history", poll_s=0.2)
        with open(tmp / "prometheus.yml", "a") as config:
            config.write(f"rule_files: ['{rules}']\n")
        assert prom.proc is not None
        loaded = time.time()
        prom.proc.send_signal(signal.SIGHUP)
        every = {rack_name(r) for r in range(RACKS)}
        wait_until(lambda: recorded_racks(prom.url) == every, "the recorded series of every rack", poll_s=0.5)
        # The racks are held still: a pause while another worker times an engine changes no answer.
        with paused_while_others_time(prom.proc):
            yield RuledFleet(prom.url, servers, loaded, early)
    finally:
        prom.stop()
        close_all(servers)


def by_series(samples: list[Sample]) -> dict[tuple[tuple[str, str], ...], float]:
    """Samples keyed by their labels, less the name and the labels the rule adds."""
    drop = {"__name__", "tokenwatch_preset"}
    return {
        tuple(sorted((k, v) for k, v in labels.items() if k not in drop)): value for labels, value in samples
    }


def test_the_recorded_series_equal_the_raw_queries(ruled: RuledFleet) -> None:
    rule_set = RuleSet()
    raw, recorded = rule_set.expressions(), rule_set.recorded()
    answers: tuple[dict[str, list[Sample]], dict[str, list[Sample]]] = ({}, {})

    async def both(at: float) -> tuple[dict[str, list[Sample]], dict[str, list[Sample]]]:
        async with PrometheusApi(ruled.url) as api:
            got_raw, failed_raw = await api.query_all(raw, at)
            got_recorded, failed_recorded = await api.query_all(recorded, at)
        assert not failed_raw, failed_raw
        assert not failed_recorded, failed_recorded
        return got_raw, got_recorded

    def every_rack() -> bool:
        """An instant at which both hold every rack (on a loaded machine a scrape can miss its timeout,
        and the evaluation after it then lacks that rack)."""
        nonlocal answers
        answers = asyncio.run(both(time.time() - 0.5))
        return all(len(a.get("nodes_total", [])) == RACKS for a in answers)

    wait_until(every_rack, "an instant at which the raw and recorded figures hold every rack", poll_s=0.5)
    got_raw, got_recorded = answers
    for field in raw:
        assert by_series(got_recorded[field]) == by_series(got_raw[field]), field
    # Not empty by accident: the faults show in the worst-node series and the nodes up.
    assert len(got_raw["worst_throttling"]) >= 1
    assert {v for _, v in got_raw["nodes_up"]} == {NODES, NODES - 1}


async def two_watches(url: str, at: float) -> tuple[PrometheusFleetCollector, list[object], list[object]]:
    """One watch that found the recorded series, one told to read the raw queries, one round each at
    the same instant."""
    recorded, raw = collector(url), collector(url)
    assert await recorded.discover() is not None
    assert await raw.discover() is not None
    raw.figure_queries.using_recorded = False
    async with PrometheusApi(url) as api:
        return recorded, list(await recorded.poll(api, at)), list(await raw.poll(api, at))


def batch_of(events: list[object]) -> RackFiguresBatch:
    (batch,) = [e for e in events if isinstance(e, RackFiguresBatch)]
    return batch


def test_the_board_is_the_same_from_the_recorded_series_as_from_the_raw_queries(ruled: RuledFleet) -> None:
    rounds: tuple[PrometheusFleetCollector, list[object], list[object]] | None = None

    every = tuple(rack_name(r) for r in range(RACKS))

    def every_rack() -> bool:
        """The first watch found every rack's recorded series (the rules' first evaluations may not hold
        them yet: this test can run first in its module), and both watches listed every rack and see each
        up (a scrape that missed its timeout leaves its rack out of a listing, or down in a round, on the
        loaded machine)."""
        nonlocal rounds
        rounds = asyncio.run(two_watches(ruled.url, time.time() - 0.5))
        found = rounds[0].figure_queries.using_recorded
        return found and all(batch_of(r).racks == every and not batch_of(r).down.any() for r in rounds[1:])

    wait_until(
        every_rack,
        "a round in which the recorded series are found and both watches see every rack",
        poll_s=0.5,
    )
    assert rounds is not None
    watch, from_recorded, from_raw = rounds
    assert watch.figure_queries.using_recorded
    assert watch.fleet_meta["rack_figures"] == "recorded"
    a, b = batch_of(from_recorded), batch_of(from_raw)
    assert a.racks == b.racks == tuple(rack_name(r) for r in range(RACKS))
    assert np.array_equal(a.values, b.values, equal_nan=True)
    assert a.worst_node == b.worst_node
    assert a.worst_cause == b.worst_cause
    assert "throttling" in a.worst_cause


def test_the_history_is_the_same_either_way_and_the_rules_start_is_filled_raw(ruled: RuledFleet) -> None:
    """A backfill that begins before the rules' first evaluation: the steps before it come from the raw
    queries, the rest from the recorded series, and every step where both hold every rack is the raw's."""
    recorded, raw = listed_with_the_recorded_series(ruled.url), collector(ruled.url)
    asyncio.run(raw.discover())
    raw.figure_queries.using_recorded = False

    rules_began = ruled.rules_loaded_at
    # Some seconds of recorded figures before the backfill's end (the fixture is ready at their first),
    # asked until the server holds them: on a loaded machine its rule evaluations come late.
    start = rules_began - 3.0
    end = start
    a: list[RackFiguresBatch] = []

    def recorded_for_four_seconds() -> bool:
        nonlocal a, end
        end = time.time() - 1.0
        a = [e for e in asyncio.run(recorded.history(start, end)) if isinstance(e, RackFiguresBatch)]
        return bool(a) and a[-1].t >= rules_began + 4

    wait_until(recorded_for_four_seconds, "four seconds of recorded figures in the history", poll_s=0.5)
    b = [e for e in asyncio.run(raw.history(start, end)) if isinstance(e, RackFiguresBatch)]
    assert [x.t for x in a] == [x.t for x in b]
    assert a[0].t < rules_began  # the raw figures before the rules'
    assert a[-1].t >= rules_began + 4
    whole = 0
    for x, y in zip(a, b, strict=True):
        if x.down.any() or y.down.any():
            continue  # the scrapes' first seconds: a rack not read yet
        # Rack by rack: a batch's rows come in its answer's order (the core reads them by name), and the
        # recorded series' answer listed rack08 before rack07 where the raw one did not.
        assert sorted(x.racks) == sorted(y.racks), x.t
        xi, yi = np.argsort(x.racks), np.argsort(y.racks)
        assert np.array_equal(x.values[xi], y.values[yi], equal_nan=True), x.t
        assert [x.worst_node[i] for i in xi] == [y.worst_node[i] for i in yi], x.t
        whole += 1
    assert whole >= 5


def test_a_watch_says_which_queries_make_the_rack_figures(ruled: RuledFleet, tmp_path: Path) -> None:
    config = tmp_path / "fleet.yaml"
    config.write_text(f"run: {{name: fleet}}\nfleet: {{url: '{ruled.url}', interval: 1s, lookback: 0s}}\n")
    result = run_tokenwatch("watch", str(config), "--headless", "--stop-after", "3s")
    assert result.returncode == 0, result.stderr
    said = [line for line in result.stderr.splitlines() if "rack figures from" in line]
    assert said == [
        "tokenwatch: note: prometheus fleet: rack figures from the recording rules' series tokenwatch_rack:* "
        '(tokenwatch_preset="tokenwatch"), one series per rack and figure'
    ]


def test_the_watch_goes_back_to_the_raw_queries_when_the_recorded_series_are_gone(ruled: RuledFleet) -> None:
    """Recorded series that answer for no rack (rules unloaded) are not a fleet gone down: the same
    instant is asked raw, and said."""
    c = listed_with_the_recorded_series(ruled.url)
    gone = {
        f: q.replace("tokenwatch_rack:", "tokenwatch_gone:") for f, q in c.figure_queries.recorded.items()
    }
    c.figure_queries.recorded = gone

    async def round_() -> list[object]:
        async with PrometheusApi(ruled.url) as api:
            return list(await c.poll(api, time.time() - 0.5))

    events = asyncio.run(round_())
    notes = [e.message for e in events if isinstance(e, Notice)]
    assert any("the recorded series answer for no rack" in n for n in notes), notes
    assert not c.figure_queries.using_recorded
    batch = batch_of(events)
    assert not batch.down.any()
    assert np.isfinite(batch.values[:, 0]).all()
    assert math.isfinite(float(batch.values[0, 4]))


def test_a_watch_started_before_the_rules_finds_them_at_its_alerting_pass(ruled: RuledFleet) -> None:
    """The watch listed the fleet before the rules existed (raw); its next alerting pass finds the
    recorded series for every rack, says so, and the rounds after read them."""
    c = ruled.early
    assert not c.figure_queries.using_recorded
    assert c._figures_note is not None
    assert "rack figures from the raw queries" in c._figures_note.message
    c.node_reader = None  # the rack figures alone
    c.alerting_pass.counted_from = -math.inf  # the alerting pass is due

    async def round_() -> list[object]:
        async with PrometheusApi(ruled.url) as api:
            return list(await c.poll(api, time.time() - 0.5))

    notes = [e.message for e in asyncio.run(round_()) if isinstance(e, Notice)]
    assert any("rack figures from the recording rules' series" in n for n in notes), notes
    assert c.figure_queries.using_recorded
    assert c.figure_queries.queries == c.figure_queries.recorded
