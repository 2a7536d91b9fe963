"""The fleet's PromQL (scoped to racks, labels filled in) and a fleet collector whose server is gone:
no exception, one notice per problem, nothing made up."""

from __future__ import annotations

import asyncio
import re

import pytest

from tests.conftest import refusing_port
from tokenwatch.base.clock import ManualClock
from tokenwatch.base.events import Event, Notice, RackFiguresBatch
from tokenwatch.base.formatting import natural_key
from tokenwatch.inputs.prometheus.fleet import FleetSettings, PrometheusFleetCollector
from tokenwatch.sources.fleet_queries import (
    FLEET_PRESETS,
    UNSHARDED,
    query,
    rack_matcher,
    rack_queries,
    scoped,
    scoped_names,
)
from tokenwatch.sources.metric_catalogue import PRESETS


def test_a_rack_matcher_goes_inside_every_selector() -> None:
    matcher = rack_matcher("rack", frozenset({"rack02", "rack10"}))
    assert matcher == 'rack=~"rack02|rack10"'
    got = scoped('sum(a{}) and on (n) (b{status="up"} == 1)', matcher)
    assert got == 'sum(a{rack=~"rack02|rack10"}) and on (n) (b{status="up", rack=~"rack02|rack10"} == 1)'
    assert scoped("a{}", "") == "a{}"


def test_rack_names_are_quoted_and_escaped_as_literals() -> None:
    matcher = rack_matcher("rack", frozenset({'a"b', "c.d"}))
    assert matcher == 'rack=~"a\\"b|c\\\\.d"'  # regex dot escaped, then the string literal's escapes
    text = query("x{}", rack="rack", node="node", window_s=60, matcher=matcher)
    assert text == 'x{rack=~"a\\"b|c\\\\.d"}'


def test_bare_metric_names_get_the_matcher_and_nothing_else_does() -> None:
    names = ["a_total", "a", "DCGM_X"]
    text = 'sum by (rack, a) (a_total) or rate(a[1m]) or DCGM_X{gpu="0"} or label_join(a, "a", "/", "a")'
    got = scoped_names(text, names, 'rack=~"r1"')
    assert got == (
        'sum by (rack, a) (a_total{rack=~"r1"}) or rate(a{rack=~"r1"}[1m]) or DCGM_X{gpu="0",rack=~"r1"} or '
        'label_join(a{rack=~"r1"}, "a", "/", "a")'
    )  # a label list and string literals are left as they are; a name's own matchers are kept beside it
    assert scoped_names(text, names, "") == text


@pytest.mark.parametrize("preset", sorted(FLEET_PRESETS))
def test_a_drill_down_reads_only_its_racks_series(preset: str) -> None:
    """Every metric a rack's node queries read is selected for that rack alone, not the whole fleet's
    series joined away afterwards (4,608 GPUs' every 5 s)."""
    c = PrometheusFleetCollector(FleetSettings(url="http://127.0.0.1:9", preset=preset), now=lambda: 0.0)
    c.nodes = ("rack01/node01",)
    c.node_reader = c._node_reader(4)
    fleet = FLEET_PRESETS[preset]
    names = PRESETS[fleet.gpu_preset].sample_names | PRESETS[fleet.progress_preset].sample_names
    drill = c._node_queries(frozenset({"rack01"}))
    # The tokenwatch preset also reads each node's state as its rack's own watch judged it.
    states = {"status"} if fleet.node_status else set()
    assert set(drill) == set(c.node_reader.queries) | states
    for field, text in drill.items():
        if field == "status":
            assert 'tokenwatch_node_status{rack=~"rack01"} == 1' in text
            continue
        read = re.findall(rf"(?<![\w:])({'|'.join(map(re.escape, names))})(?![\w:])(\{{[^}}]*\}})?", text)
        assert read, field
        # the rack's matcher in every selector (beside a name's own, e.g. a whole GPU's {GPU_I_ID=""})
        assert all(sel.endswith('rack=~"rack01"}') for _, sel in read), (field, read)
    # The alerting pass: the whole fleet, each answer without the rack and node labels it joined.
    whole = {f: f"max without (rack, node) ({q})" for f, q in c.node_reader.queries.items()}
    assert {f: q for f, q in c._node_queries(None).items() if f != "status"} == whole


def test_labels_and_window_are_filled_in() -> None:
    queries = rack_queries(FLEET_PRESETS["vllm"])
    text = query(queries["tokens_per_s"], rack="zone", node="instance", window_s=30, matcher="")
    assert text == "sum by (zone) (sum by (zone, instance) (rate(vllm:generation_tokens_total{}[30s])))"
    assert "$" not in "".join(query(q, rack="r", node="n", window_s=1) for q in queries.values())


def test_the_unsharded_queries_are_the_ones_that_rank() -> None:
    """What docs/watch-fleet.md tells Mimir users: only quantile and bottomk are evaluated unsharded."""
    for preset in FLEET_PRESETS.values():
        for field, text in rack_queries(preset).items():
            ranks = text.split("(")[0].strip().startswith(("quantile", "bottomk"))
            assert ranks == (field in UNSHARDED), field


def test_racks_sort_naturally() -> None:
    assert sorted(["rack10", "rack2", "rack1"], key=natural_key) == ["rack1", "rack2", "rack10"]


def test_an_unreachable_server_is_one_notice_not_an_exception() -> None:
    url = f"http://127.0.0.1:{refusing_port()}"
    clock = ManualClock()
    c = PrometheusFleetCollector(
        FleetSettings(url=url, interval_s=1.0, timeout_s=2.0), now=lambda: clock.time(), clock=clock, polls=3
    )
    assert asyncio.run(c.discover()) is None
    events: list[Event] = []

    async def emit(event: Event) -> None:
        events.append(event)

    asyncio.run(c.run(emit))
    assert not any(isinstance(e, RackFiguresBatch) for e in events)
    notices = [e.message for e in events if isinstance(e, Notice)]
    assert len(notices) == 2, notices  # the nodes it could not list, then the queries, once
    assert notices[0].startswith("prometheus fleet: cannot list the fleet's nodes: cannot reach")
    assert notices[1].startswith("prometheus fleet: nodes_total, nodes_up, nodes_running and ")
    assert "failed: cannot reach" in notices[1]
